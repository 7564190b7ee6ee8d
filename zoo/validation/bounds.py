"""Every size a file or a spec may declare, bounded before anything is allocated or built.

One place for the bounds that stand between a few hostile bytes and this machine's memory and
disk (issue 48): what a file declares (a layer's width, a member's parameter count, a shard's
column size, an archive's unpacked size, a sidecar's rows) is checked against these constants
before anything is decoded, allocated or built. Each bound is sized so that everything it
admits fits a 24 GB, 2-core machine with room for the rest of the process; each says what the
largest real input is, so a reader can see the headroom.
"""

from __future__ import annotations

GIB = 2**30
MIB = 2**20

# --- members: architectures declared by imported files and specs -----------------------------
# The largest real member is well under a million parameters (a Small CNN Zoo CNN has 4,970, an NFN
# SIREN 1,281, a Small Transformer Zoo member about 40,000, our cnn-cifar10 members under 100,000).
MAX_MEMBER_PARAMETERS = 20_000_000  # 80 MB of float32 per member: a population of 64 still fits in 6 GB
MAX_LAYER_WIDTH = 16_384  # units, channels or embedding dimensions of one layer (the largest real one is 512)


def check_member(where: str, parameters: int, widths: dict[str, int] | None = None) -> None:
    """Refuses a declared architecture before it is built: `parameters` (computed arithmetically from
    what the file or spec declares, never by building the model) and each named width of `widths`
    against the bounds above; the error names `where` (the file and key, or the spec and field)."""
    from zoo.validation.inputs import InputError

    for name, width in (widths or {}).items():
        if not 0 < int(width) <= MAX_LAYER_WIDTH:
            raise InputError(f"{where}: {name} {width} is outside 1..{MAX_LAYER_WIDTH:,} "
                             "(zoo.validation.bounds.MAX_LAYER_WIDTH)")
    if int(parameters) > MAX_MEMBER_PARAMETERS:
        raise InputError(f"{where}: declares a member of {int(parameters):,} parameters; at most "
                         f"{MAX_MEMBER_PARAMETERS:,} are accepted (zoo.validation.bounds.MAX_MEMBER_PARAMETERS)")

# --- decompression, archives and free disk ------------------------------------------------------

# --- tables: CSV, sidecars and Parquet shards ---------------------------------------------------

# --- staged checkpoints and the dry run -----------------------------------------------------------
