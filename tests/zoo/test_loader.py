"""The fast loader: strided decoding equals per-row decoding; mixed architectures must be filtered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from zoo.storage import safetensors_io
from zoo.storage.folder import MANIFEST, read_manifest, write_json_atomic
from zoo.loader import dataset_hash, decode_weights, load_split, read_weights, split_files
from zoo.dataset.pack import dataset_hash_of, file_checksums, sha256_file, write_shard
from zoo.storage.parquet_pages import fixed_width_pages
from zoo.storage.record import arrow_schema, to_row
from zoo.families.cnn import CNNFamily, CNNHParams

CONFIG = "cnn-mnist"
SPLITS = ("train", "validation", "test")


def weights_column(folder: Path, split: str) -> pa.ChunkedArray:
    return pa.concat_tables([pq.read_table(p) for p in split_files(folder, CONFIG, split)])["weights"]


def assert_matches_rows(batch, rows: list[bytes]) -> None:
    """The batch holds exactly the per-row safetensors decoding of `rows`, in order."""
    assert len(batch) == len(rows)
    for tensor in batch.tensors:
        assert tensor.dtype == torch.float32
    for i, row in enumerate(rows):
        tensors, _ = safetensors_io.decode(row)
        assert list(tensors) == list(batch.space.names)
        for name, stacked in zip(batch.space.names, batch.tensors):
            assert torch.equal(stacked[i], tensors[name]), (i, name)


@pytest.mark.parametrize("split", SPLITS)
def test_decode_weights_equals_per_row_decoding(tiny_zoo, split):
    column = weights_column(tiny_zoo, split)
    batch = decode_weights(column)
    assert_matches_rows(batch, column.to_pylist())
    assert batch.flatten().shape == (len(column), 4970)


def test_multi_chunk_and_sliced_columns(tiny_zoo):
    column = pa.chunked_array(weights_column(tiny_zoo, "train").chunks + weights_column(tiny_zoo, "test").chunks)
    rows = column.to_pylist()
    array = column.combine_chunks()
    pieces = pa.chunked_array([array.slice(0, 5), array.slice(5, 1), array.slice(6, 0), array.slice(6)])
    assert [c.offset for c in pieces.chunks] == [0, 5, 6, 6]  # offset views into one buffer
    for threads in (1, 2):
        assert_matches_rows(decode_weights(pieces, threads=threads), rows)
    assert_matches_rows(decode_weights(column.slice(3, 7)), rows[3:10])
    assert_matches_rows(decode_weights(column.combine_chunks()), rows)  # a plain Array


def test_misaligned_binary_buffer_takes_the_byte_copy_path(tiny_zoo):
    rows = weights_column(tiny_zoo, "validation").to_pylist()
    data = b"\x00" + b"".join(rows)  # every row starts one byte past a word boundary
    offsets = np.cumsum([1] + [len(r) for r in rows]).astype(np.int64)
    array = pa.Array.from_buffers(pa.large_binary(), len(rows), [None, pa.py_buffer(offsets.tobytes()),
                                                                  pa.py_buffer(data)])
    assert array.to_pylist() == rows
    assert (np.frombuffer(array.buffers()[2], np.uint8).ctypes.data + 1) % 4 != 0
    assert_matches_rows(decode_weights(array), rows)


# --- reading shards: direct PLAIN pages when possible, Arrow otherwise ----------------------

def _pack_settings(table: pa.Table) -> dict:
    metadata = [n for n in table.schema.names if n != "weights"]
    return dict(compression={**{n: "zstd" for n in metadata}, "weights": "none"}, use_dictionary=metadata,
                write_statistics=metadata)


def _nullable_weights(table: pa.Table) -> pa.Table:
    fields = [pa.field("weights", pa.large_binary(), nullable=True) if f.name == "weights" else f
              for f in table.schema]
    return table.cast(pa.schema(fields))


# name: (writer settings over pack's, table transform, whether the direct page path applies)
WRITERS = {
    "as packed": ({}, None, True),
    "many pages and row groups": (dict(data_page_size=1, write_batch_size=2, row_group_size=5), None, True),
    "data page v2": (dict(data_page_version="2.0", data_page_size=1, write_batch_size=3), None, True),
    "compressed weights": (dict(compression="zstd"), None, False),
    "dictionary weights": (dict(use_dictionary=True), None, False),
    "nullable weights": ({}, _nullable_weights, False),
}


@pytest.mark.parametrize("settings, transform, direct", WRITERS.values(), ids=WRITERS.keys())
def test_read_weights_equals_per_row_decoding_for_any_writer(tiny_zoo, tmp_path, settings, transform, direct):
    (source,) = split_files(tiny_zoo, CONFIG, "train")
    table = pq.read_table(source)
    if transform is not None:
        table = transform(table)
    path = tmp_path / "shard.parquet"
    pq.write_table(table, path, **{**_pack_settings(table), **settings})
    pages = fixed_width_pages(path, "weights")
    assert (pages is not None) == direct
    if direct:
        assert sum(len(page) for page in pages[1]) == table.num_rows
        if "data_page_size" in settings:
            assert len(pages[1]) > 2
    rows = table["weights"].to_pylist()
    for threads in (1, 2):
        assert_matches_rows(read_weights([path], threads=threads), rows)


def test_read_weights_decodes_only_the_chosen_rows_of_direct_and_arrow_shards(tiny_zoo, tmp_path):
    """`rows=`: the chosen rows, in order, equal to per-row decoding, from a direct shard of many small
    pages, a compressed (Arrow) one and a direct one, with and without the one-pass checksums."""
    tables = [pq.read_table(split_files(tiny_zoo, CONFIG, split)[0]) for split in SPLITS]
    paths = []
    for i, (table, settings) in enumerate(zip(tables, [dict(data_page_size=1, write_batch_size=1),
                                                      dict(compression="zstd"), {}])):
        paths.append(tmp_path / f"{i}.parquet")
        pq.write_table(table, paths[-1], **{**_pack_settings(table), **settings})
    rows = [w for table in tables for w in table["weights"].to_pylist()]
    chosen = np.random.default_rng(0).random(len(rows)) < 0.4
    chosen[len(tables[0])] = False  # a shard's first row left out: the layout comes from a chosen row
    checksums = [file_checksums(path)["xxh3_128"] for path in paths]
    for threads in (1, 2):
        for sums in (None, checksums):
            batch = read_weights(paths, threads=threads, checksums=sums, rows=chosen)
            assert_matches_rows(batch, [row for row, kept in zip(rows, chosen) if kept])
    assert len(read_weights(paths, rows=np.zeros(len(rows), dtype=bool))) == 0
    with pytest.raises(ValueError, match="a mask of"):
        read_weights(paths, rows=chosen[:-1])


def test_load_split_keep_equals_the_full_split_indexed(tiny_zoo):
    full = load_split(tiny_zoo, CONFIG, "train")
    mask = np.array(full.metadata["epoch"] == full.metadata["epoch"].max())
    kept = load_split(tiny_zoo, CONFIG, "train",
                      keep=lambda metadata: np.array(metadata["epoch"] == metadata["epoch"].max()))
    assert len(kept) == mask.sum() < len(full)
    for ours, theirs in zip(kept.weights.tensors, full.weights[torch.as_tensor(mask)].tensors):
        assert torch.equal(ours, theirs)
    assert kept.metadata.equals(full.metadata[mask].reset_index(drop=True))
    everything = load_split(tiny_zoo, CONFIG, "train", keep=lambda metadata: None)
    assert all(torch.equal(a, b) for a, b in zip(everything.weights.tensors, full.weights.tensors))


def test_read_weights_concatenates_direct_and_arrow_shards(tiny_zoo, tmp_path):
    tables = [pq.read_table(split_files(tiny_zoo, CONFIG, split)[0]) for split in SPLITS]
    paths = []
    for i, (table, settings) in enumerate(zip(tables, [dict(compression="zstd"), {}, dict(data_page_size=1,
                                                                                          write_batch_size=1)])):
        paths.append(tmp_path / f"{i}.parquet")
        pq.write_table(table, paths[-1], **{**_pack_settings(table), **settings})
    assert fixed_width_pages(paths[0], "weights") is None and fixed_width_pages(paths[2], "weights") is not None
    rows = [w for table in tables for w in table["weights"].to_pylist()]
    assert_matches_rows(read_weights(paths), rows)


def test_fixed_width_pages_of_a_missing_column_is_none(tiny_zoo):
    assert fixed_width_pages(split_files(tiny_zoo, CONFIG, "test")[0], "gradients") is None


def test_empty_column_is_an_error():
    with pytest.raises(ValueError, match="no rows to decode"):
        decode_weights(pa.chunked_array([], type=pa.large_binary()))


def test_load_split_metadata_has_every_column_but_weights(tiny_zoo):
    loaded = load_split(tiny_zoo, CONFIG, "train")
    schema = arrow_schema(CNNHParams, CNNFamily.METRICS)
    assert list(loaded.metadata.columns) == [n for n in schema.names if n != "weights"]
    assert len(loaded) == 12 and len(loaded.weights) == 12
    assert load_split(tiny_zoo, None, "train").metadata.equals(loaded.metadata)  # the only config


def test_unknown_split_or_config_is_a_clear_error(tiny_zoo, tmp_path):
    with pytest.raises(ValueError, match=r"has no split 'holdout'; it has \['test', 'train', 'validation'\]"):
        load_split(tiny_zoo, CONFIG, "holdout")
    with pytest.raises(ValueError, match=r"has no config 'cnn-cifar'; it holds \['cnn-mnist'\]"):
        load_split(tiny_zoo, "cnn-cifar", "train")
    with pytest.raises(FileNotFoundError, match="is not a packed zoo"):
        load_split(tmp_path, CONFIG, "train")


def test_dataset_hash_is_the_manifest_hash_of_the_shards(tiny_zoo):
    entry = read_manifest(tiny_zoo)["configs"][CONFIG]
    assert dataset_hash(tiny_zoo) == dataset_hash(tiny_zoo, CONFIG) == entry["dataset_hash"]
    assert entry["dataset_hash"] == dataset_hash_of(
        [{"path": f["path"], "sha256": sha256_file(tiny_zoo / f["path"])} for f in entry["files"]])


# --- several architectures in one split -----------------------------------------------------

def add_rows(folder: Path, split: str, records) -> None:
    """Appends records to a split's shard and reseals the manifest, as a second config would."""
    manifest = read_manifest(folder)
    (entry,) = [f for f in manifest["configs"][CONFIG]["files"] if f["split"] == split]
    path = folder / entry["path"]
    rows = pq.read_table(path).to_pylist() + [to_row(r) for r in records]
    write_shard(rows, arrow_schema(CNNHParams, CNNFamily.METRICS), path, len(rows[0]["weights"]))  # pack's own writer
    manifest["configs"][CONFIG]["splits"][split] += len(rows) - entry["rows"]  # the split's count is its shards' sum
    entry.update(rows=len(rows), bytes=path.stat().st_size, **file_checksums(path))
    write_json_atomic(folder / MANIFEST, manifest)


def test_mixed_architectures_need_a_filter(tiny_zoo, tiny_zoo_copy, tiny_zoo_spec, make_record):
    narrow = {**tiny_zoo_spec.architecture, "channels": 8}
    extra = [make_record(seed, architecture=narrow) for seed in (1, 2)]
    add_rows(tiny_zoo_copy, "train", extra)
    with pytest.raises(ValueError, match="rows of several architectures; filter by the `architecture` column"):
        load_split(tiny_zoo_copy, CONFIG, "train")

    original = load_split(tiny_zoo, CONFIG, "train")
    (main_id,) = set(original.metadata["architecture"])
    kept = load_split(tiny_zoo_copy, CONFIG, "train", architecture=main_id)
    assert kept.metadata.equals(original.metadata)
    assert torch.equal(kept.weights.flatten(), original.weights.flatten())

    other = load_split(tiny_zoo_copy, CONFIG, "train", architecture=extra[0].architecture_id)
    assert other.metadata["model_id"].tolist() == [r.model_id for r in extra]
    assert other.weights.space.num_params == 8 * 9 + 8 + 2 * (8 * 8 * 9 + 8) + 10 * 8 + 10
    for i, record in enumerate(extra):
        assert all(torch.equal(other.weights.state_dict(i)[n], t) for n, t in record.weights.items())
    with pytest.raises(ValueError, match="no rows of architecture 'nope'"):
        load_split(tiny_zoo_copy, CONFIG, "train", architecture="nope")


def test_mixed_column_raises_whichever_architecture_comes_first(tiny_zoo_spec, make_record):
    narrow = {**tiny_zoo_spec.architecture, "channels": 8}
    rows = [to_row(make_record(1, architecture=narrow))["weights"], to_row(make_record(2))["weights"]]
    with pytest.raises(ValueError, match="several architectures"):
        decode_weights(pa.array(rows, pa.large_binary()))


def test_same_shapes_of_another_architecture_are_not_mixed_silently(tiny_zoo_spec, make_record):
    strided = make_record(1)
    dense = make_record(2, architecture={**tiny_zoo_spec.architecture, "stride": 1})
    assert strided.architecture_id != dense.architecture_id
    rows = [to_row(strided)["weights"], to_row(dense)["weights"]]
    with pytest.raises(ValueError, match="several architectures"):
        decode_weights(pa.array(rows, pa.large_binary()))


def _checksums(paths: list[Path]) -> list[str]:
    return [file_checksums(path)["xxh3_128"] for path in paths]


@pytest.mark.parametrize("block_bytes", [1, 2**21])
def test_a_checked_read_hashes_in_the_same_pass_and_returns_the_same_weights(tiny_zoo, tmp_path, monkeypatch,
                                                                            block_bytes):
    """`read_weights(..., checksums=...)` over a direct shard of many small pages, a direct one and
    an Arrow-path one (compressed): the same tensors as the unchecked read, hashing blocks of one
    row (1 byte asked) or of 2 MiB; a byte flipped in a page, or in the footer after the last page,
    and the file is named and nothing returned."""
    import zoo.loader
    from zoo.storage.integrity import CorruptShardError

    monkeypatch.setattr(zoo.loader, "HASH_BLOCK_BYTES", block_bytes)
    tables = [pq.read_table(split_files(tiny_zoo, CONFIG, split)[0]) for split in SPLITS]
    paths = []
    for i, (table, settings) in enumerate(zip(tables, [dict(data_page_size=1, write_batch_size=1), {},
                                                      dict(compression="zstd")])):
        paths.append(tmp_path / f"{i}.parquet")
        pq.write_table(table, paths[-1], **{**_pack_settings(table), **settings})
    rows = [w for table in tables for w in table["weights"].to_pylist()]
    for threads in (1, 2):
        assert_matches_rows(read_weights(paths, threads=threads, checksums=_checksums(paths)), rows)
    good = _checksums(paths)
    for path, where in ((paths[0], "middle"), (paths[1], "tail"), (paths[2], "middle")):
        original = path.read_bytes()
        data = bytearray(original)
        data[len(data) // 2 if where == "middle" else len(data) - 12] ^= 0x01  # the footer's metadata
        path.write_bytes(bytes(data))
        try:
            with pytest.raises((CorruptShardError, OSError, ValueError)) as caught:
                read_weights(paths, checksums=good)
            if caught.type is CorruptShardError:
                assert f"{path}: xxh3_128 differs from the manifest (corrupted)" in str(caught.value)
        finally:
            path.write_bytes(original)
    assert_matches_rows(read_weights(paths, checksums=good), rows)  # restored: reads again


def test_load_split_checks_in_one_pass_and_names_the_shard_as_before(tiny_zoo_copy):
    """A flipped weight byte: the one-pass check raises the same error as `check_shards`
    (tests/zoo/test_integrity.py pins its text), and an old manifest without xxh3 still checks
    by sha256."""
    from zoo.storage.integrity import CorruptShardError

    path = split_files(tiny_zoo_copy, CONFIG, "train")[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptShardError, match=rf"{path}: xxh3_128 differs from the manifest \(corrupted\); run "):
        load_split(tiny_zoo_copy, CONFIG, "train")
    manifest = read_manifest(tiny_zoo_copy)
    for entry in manifest["configs"][CONFIG]["files"]:
        entry.pop("xxh3_128")
    write_json_atomic(tiny_zoo_copy / MANIFEST, manifest)
    with pytest.raises(CorruptShardError, match=rf"{path}: sha256 differs"):
        load_split(tiny_zoo_copy, CONFIG, "train")
    assert len(load_split(tiny_zoo_copy, CONFIG, "test")) == 3
