"""The bytes on disk, from one checkpoint's record to a committed pack.

It covers the checkpoint record, its safetensors encoding and the staging folder. It covers
atomic writes, folder locks and the output folder's layout. It covers the manifest, shard
checksums, a pack's atomic commit and Parquet page reading.
"""
