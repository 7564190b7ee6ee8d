"""The bytes on disk: the checkpoint record and its safetensors encoding, the staging
folder, atomic writes and folder locks, the output folder's layout, the manifest and shard
checksums, the atomic commit of a pack, and Parquet page reading.
"""
