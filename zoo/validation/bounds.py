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

# --- decompression, archives and free disk ------------------------------------------------------

# --- tables: CSV, sidecars and Parquet shards ---------------------------------------------------

# --- staged checkpoints and the dry run -----------------------------------------------------------
