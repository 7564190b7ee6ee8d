"""Every size a file or a spec may declare, bounded before anything is allocated or built.

These bounds stand between a few hostile bytes and this machine's memory and disk. What a file declares
is checked against them before anything is decoded, allocated or built. That covers a layer's width, a
member's parameter count, a shard's column size, an archive's unpacked size and a sidecar's rows.

Each bound is sized so that everything it admits fits a 24 GB machine with room for the rest of the
process. Each says what the largest real input is, so a reader can see the headroom.
"""

from __future__ import annotations

GIB = 2**30
MIB = 2**20

# --- members: architectures declared by imported files and specs -----------------------------
# The largest real member is well under a million parameters (a Small CNN Zoo CNN has 4,970, an NFN
# SIREN 1,281, a Small Transformer Zoo member about 40,000, our cnn-cifar10 members under 100,000).
MAX_MEMBER_PARAMETERS = 20_000_000  # 80 MB of float32 per member: a population of 64 still fits in 6 GB
MAX_LAYER_WIDTH = 16_384  # units, channels or embedding dimensions of one layer (the largest real one is 512)
MAX_MEMBER_LAYERS = 1_024  # layers or blocks of one member (the largest real one: 3 convolutions + 2 dense)


def check_member(where: str, parameters: int, widths: dict[str, int] | None = None) -> None:
    """Refuses a declared architecture before it is built, against the bounds above.

    It checks `parameters` and each named width of `widths`. `parameters` is computed arithmetically
    from what the file or spec declares, never by building the model. The error names `where`: the file
    and key, or the spec and field.
    """
    from zoo.validation.inputs import InputError

    for name, width in (widths or {}).items():
        if not 0 < int(width) <= MAX_LAYER_WIDTH:
            raise InputError(f"{where}: {name} {width} is outside 1..{MAX_LAYER_WIDTH:,} "
                             "(zoo.validation.bounds.MAX_LAYER_WIDTH)")
    if int(parameters) > MAX_MEMBER_PARAMETERS:
        raise InputError(f"{where}: declares a member of {int(parameters):,} parameters; at most "
                         f"{MAX_MEMBER_PARAMETERS:,} are accepted (zoo.validation.bounds.MAX_MEMBER_PARAMETERS)")

# --- decompression, archives and free disk ------------------------------------------------------
# An archive is checked before anything is unpacked and counted while it is (zoo.imports.archive); a compressed
# file is counted while it is decompressed (zoo.validation.decompress). The largest real release unpacks to ~5.5 GB
# (the Small CNN Zoo's CIFAR-10-GS weights.npy, 270,000 x 4,970 float32), and weights barely compress (~1.1x).
MAX_UNPACKED_BYTES = 64 * GIB  # one archive's unpacked members (disk, not memory): 11x the largest release
MAX_ARCHIVE_RATIO = 100  # unpacked bytes per archive byte: float weights ~1.1, CSV text ~10; a zip bomb ~1,000
ARCHIVE_RATIO_SLACK_BYTES = 16 * MIB  # what any archive may unpack to whatever its ratio (a tiny fixture's CSVs)
FREE_DISK_MARGIN_BYTES = 64 * MIB  # left free after the unpacked members and the shards written from them (as large)
MAX_MEMBERS = 2_000_000  # members of one archive: the largest release (70,000 SIRENs) has far fewer files
# one released .pth/.pt, read whole: the largest real one (a transformer member) ~200 kB
MAX_STATE_DICT_BYTES = 16 * MIB

# --- tables: CSV, sidecars and Parquet shards ---------------------------------------------------
# An imported CSV (gzipped or not) is read as a stream: its decompressed bytes, its columns and its rows are
# counted before a frame is built (zoo.imports.tables). The largest real one is the Small CNN Zoo's metrics file,
# 270,000 rows x ~25 columns (~100 MB of text, ~6.8 M cells); a pandas cell costs 8 to ~100 bytes.
MAX_TABLE_BYTES = 512 * MIB  # one CSV's text, decompressed: 5x the largest real one
MAX_TABLE_ROWS = 2_000_000  # rows of one CSV or sidecar: 7x the largest real one (and the most a sidecar may list)
MAX_TABLE_COLUMNS = 1_024  # the largest real one has ~30
MAX_TABLE_CELLS = 40_000_000  # rows x columns: 6x the largest real table, at most ~4 GB as a pandas frame
MAX_LAYOUT_BYTES = 1 * MIB  # the Small CNN Zoo's layout.csv: 8 lines
MAX_SPLIT_FILE_BYTES = 64 * MIB  # the NFN split file: 270,000 indices are 1.8 MB
MAX_SPLITS_JSON_BYTES = 64 * MIB  # the DWSNets splits file: Fashion-MNIST's is 2.8 MB (parsed, ~10x as much)
MAX_PARAMS_JSON_BYTES = 64 * 1024  # a Model Zoos trial's params.json: ~1 kB (only the keys read are kept)
MAX_RESULT_JSON_BYTES = 16 * MIB  # a Model Zoos trial's result.json: ~60 lines of ~2 kB (~120 kB)
MAX_AUGMENTATIONS = 1_000  # nfn-sirens --augmentations N (folders listed): the CIFAR-10 release has a handful
# Parquet shards, from the footer's metadata before a column is decoded. A real shard's metadata
# columns hold under 1 KB a row (ids, hyperparameters, metrics); a row's weights are one member.
MAX_PARQUET_METADATA_ROW_BYTES = 64 * 1024  # every column but `weights`, per row
MAX_PARQUET_WEIGHTS_ROW_BYTES = 8 * MAX_MEMBER_PARAMETERS + 16 * MIB + 8  # a float64 member + its safetensors header
MAX_PARQUET_COLUMN_CHUNK_BYTES = 2 * GIB  # one column of one row group, uncompressed (real ones: under 100 MB)
MAX_PARQUET_FOOTER_BYTES = 64 * MIB  # a shard's footer (schema and row groups' metadata): real ones are a few KB
MAX_PARQUET_ROWS_PER_GROUP = 1_000_000  # rows of one row group: pack writes 32 MiB of weights a group (~7,000 SIRENs)
# a list or map in a Parquet page header (real ones hold none; statistics hold two binaries)
MAX_THRIFT_CONTAINER_ELEMENTS = 2**16
# structs, lists and maps inside a page header (real ones: 3, PageHeader > DataPageHeader > Statistics)
MAX_THRIFT_NESTING = 16

# --- staged checkpoints and the dry run -----------------------------------------------------------
# A plan is counted from the spec's numbers before anything is enumerated; the largest real zoo has
# 125,000 checkpoints (30,000 runs).
MAX_PLANNED_RUNS = 10_000_000
MAX_PLANNED_CHECKPOINTS = 100_000_000
# The dry run de-duplicates repeated sampled draws by drawing them (cheap: ~100 bytes each) up to
# this many (the largest real spec draws 30,000); a larger count is estimated from its first draws.
MAX_DEDUPLICATED_DRAWS = 100_000
# One staged checkpoint file: a member's float64 weights (MAX_MEMBER_PARAMETERS x 8 bytes) plus its
# header; the largest real one is under 1 MB.
MAX_HEADER_BYTES = 16 * MIB  # a safetensors header lists tensor names and shapes: ours are a few kilobytes
MAX_STAGED_BYTES = 8 * MAX_MEMBER_PARAMETERS + MAX_HEADER_BYTES + 8

# --- benchmarks: task and model settings that size an allocation (benchmarks.tasks.limits) ----------
MAX_AUGMENT_COPIES = 1_000  # largest real: 11 (the inr-augmentation suite's np-k11; the NFN paper's extra_aug is 10)
# largest real: the inr-augmentation suite's 12 views of the budget MNIST SIRENs, a few hundred MB
MAX_AUGMENTED_BYTES = 8 * GIB
MAX_BATCH_SIZE = 2**20  # largest real: eval_batch_size 1024 (generalization's default)
MAX_MODEL_PARAMETERS = 500_000_000  # largest real: a few million (NG-T / DWSNet on the transformer zoos); 2 GB float32
