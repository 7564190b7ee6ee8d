"""Hostile shards the size checker itself must survive (issue 48, second round).

A page header is Thrift compact protocol; a crafted one declaring a list or a map of 2**62 doubles
made the checker (`zoo.storage.parquet_pages.declared_page_bytes`, run before Arrow decodes
anything) allocate without end, or loop without reading a byte. A FIFO in place of a shard hung
every reader that opened it. Each case runs the real CLI (forked, `tests/forked_cli.py`) in a memory
cgroup with a timeout, so a regression fails its test instead of the machine.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memory_limit import GIB, run_limited
from parquet_chunks import declared_chunks


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


# field 1 = i32 0, then field 2 = a list of 2**62 doubles (skipping a double used to read nothing) ...
LIST_OF_DOUBLES = b"\x15\x00\x19\xf7" + _varint(2**62)
# ... or field 2 = a map of 2**62 double -> double pairs (the loop never ran past the end: a hang)
MAP_OF_DOUBLES = b"\x15\x00\x1b" + _varint(2**62) + b"\x77"
CRAFTED = {"list": (LIST_OF_DOUBLES, "a list of doubles of 4,611,686,018,427,387,904 elements"),
           "map": (MAP_OF_DOUBLES, "a map of doubles of 4,611,686,018,427,387,904 elements")}


def _environment(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "hf_home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home),
            "RAY_AUTH_MODE": "disabled"}


def _nfnzoo(cli, tmp_path: Path, *argv: str, timeout: float = 60):
    working = tmp_path / "cwd"
    working.mkdir(exist_ok=True)
    started = time.monotonic()
    result = cli.run_limited(list(argv), cwd=working, env=_environment(tmp_path), timeout=timeout,
                             limit_bytes=GIB + GIB // 2)
    assert not result.oom_killed, result.describe()
    assert result.returncode is not None, f"nfnzoo {' '.join(argv)} hung: {result.describe()}"
    assert time.monotonic() - started < timeout
    return result


def _one_error_line(result, command: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.describe()
    assert len(lines) == 1 and lines[0].startswith(f"nfnzoo {command}: error: "), result.describe()
    assert "Traceback" not in result.stderr
    return lines[0]


def _bench(folder: Path, tmp_path: Path) -> list[str]:
    return ["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(folder),
            "--seeds", "0", "--out", str(tmp_path / "r.json")]


def _reseal(folder: Path) -> None:
    """The manifest's sizes, checksums and dataset hashes made to match the shards again."""
    from zoo.storage.integrity import dataset_hash_of, file_checksums

    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    for config in manifest["configs"].values():
        for entry in config["files"]:
            shard = folder / entry["path"]
            entry.update(bytes=shard.stat().st_size, **file_checksums(shard))
        config["dataset_hash"] = dataset_hash_of(config["files"])
    path.chmod(0o644)
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True))


def _test_shard(folder: Path) -> Path:
    return next(folder.glob("data/*/test-*.parquet"))


def _crafted_zoo(folder: Path, crafted: bytes) -> Path:
    """The zoo with the first page header of column 0, row group 0 of its test shard overwritten by
    `crafted`, the manifest resealed so that only the header is wrong; returns the shard."""
    shard = _test_shard(folder)
    chunk = pq.read_metadata(shard).row_group(0).column(0)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    shard.chmod(0o644)
    with open(shard, "r+b") as handle:
        handle.seek(start)
        handle.write(crafted)
    _reseal(folder)
    return shard


@pytest.mark.parametrize("variant", sorted(CRAFTED))
def test_a_crafted_page_header_is_one_line_naming_the_shard_not_an_oom_or_a_hang(cli, tiny_zoo_copy, tmp_path, variant):
    crafted, expected = CRAFTED[variant]
    shard = _crafted_zoo(tiny_zoo_copy, crafted)
    column = pq.read_metadata(shard).row_group(0).column(0).path_in_schema
    for command, argv in (("info", ["info", str(tiny_zoo_copy)]), ("bench", _bench(tiny_zoo_copy, tmp_path))):
        line = _one_error_line(_nfnzoo(cli, tmp_path, *argv), command)
        assert f"{shard}: column '{column}' of row group 0" in line and "an unreadable page header" in line, line
        assert expected in line and "MAX_THRIFT_CONTAINER_ELEMENTS" in line, line
    result = _nfnzoo(cli, tmp_path, "verify", str(tiny_zoo_copy))
    assert result.returncode == 1, result.describe()
    assert f"{shard.relative_to(tiny_zoo_copy)}: column '{column}'" in result.stderr and expected in result.stderr
    assert "Traceback" not in result.stderr

    load = f"from zoo.loader import load_split\nload_split({str(tiny_zoo_copy)!r}, split='test')\n"
    result = run_limited([sys.executable, "-c", load], limit_bytes=GIB + GIB // 2, timeout=60,
                         env=_environment(tmp_path))
    assert not result.oom_killed and result.returncode == 1, result.describe()
    assert "CorruptShardError" in result.stderr and expected in result.stderr, result.describe()


@pytest.mark.parametrize("crafted,expected", [
    (LIST_OF_DOUBLES, "a list of doubles of 4,611,686,018,427,387,904 elements; at most 65,536"),
    (MAP_OF_DOUBLES, "a map of doubles of 4,611,686,018,427,387,904 elements; at most 65,536"),
    (b"\x15\x00\x19\xf7" + _varint(1000) + bytes(100), "a list of doubles of 1,000 elements needs 8,000 bytes"),
    (b"\x15\x00\x1b" + _varint(1000) + b"\x88" + bytes(100), "a map of binaries of 1,000 elements needs 2,000 bytes"),
    (b"\x15\x00\x17" + bytes(4), "a double needs 8 bytes"),
    (b"\x15\x00\x18" + _varint(2**40), "a 1,099,511,627,776-byte binary needs"),
    (b"\x1c" * 40, "nested deeper than 16"),
    (b"\x15" + b"\xff" * 20, "a varint longer than 10 bytes"),
    (b"\x1d", "unknown Thrift compact type 13"),
])
def test_the_page_header_parser_fails_fast_on_crafted_bytes(crafted, expected):
    from zoo.storage.parquet_pages import declared_page_bytes

    started = time.monotonic()
    with pytest.raises(ValueError, match="an unreadable page header at byte 0: ") as raised:
        declared_page_bytes(crafted, 0, len(crafted))
    assert expected in str(raised.value), raised.value
    assert time.monotonic() - started < 1


def test_real_page_headers_parse_as_before(tiny_zoo):  # the negative control
    from zoo.storage.parquet_pages import fixed_width_pages

    for shard in sorted(tiny_zoo.glob("data/*/*.parquet")):
        metadata = pq.read_metadata(shard)
        chunks = declared_chunks(shard)
        assert len(chunks) == metadata.num_row_groups * metadata.num_columns > 0
        for _, chunk, paged, values in chunks:
            assert 0 < paged <= chunk.total_uncompressed_size
            assert values == chunk.num_values
        direct = fixed_width_pages(shard, "weights")
        assert direct is not None and sum(len(page) for page in direct[1]) == metadata.num_rows


# --- a FIFO, a folder, in place of a shard or the manifest -------------------------------------

NOT_REGULAR = "not a regular file (a pipe, socket or device)"


def _fifo_shard(folder: Path) -> Path:
    shard = _test_shard(folder)
    shard.unlink()
    os.mkfifo(shard)
    return shard


def test_a_fifo_shard_is_named_by_info_verify_and_bench_run_without_blocking(cli, tiny_zoo_copy, tmp_path):
    shard = _fifo_shard(tiny_zoo_copy)
    for command, argv in (("info", ["info", str(tiny_zoo_copy)]), ("bench", _bench(tiny_zoo_copy, tmp_path))):
        line = _one_error_line(_nfnzoo(cli, tmp_path, *argv, timeout=30), command)
        assert f"{shard}: {NOT_REGULAR}" in line, line
    result = _nfnzoo(cli, tmp_path, "verify", str(tiny_zoo_copy), timeout=30)
    assert result.returncode == 1, result.describe()
    assert f"{shard.relative_to(tiny_zoo_copy)}: {NOT_REGULAR}" in result.stderr, result.describe()
    assert "missing" not in result.stderr and "Traceback" not in result.stderr


def test_the_loader_refuses_a_fifo_shard_without_opening_it(tiny_zoo_copy, tmp_path):
    shard = _fifo_shard(tiny_zoo_copy)
    load = (f"from zoo.loader import load_split, read_metadata\n"
            f"import sys\n"
            f"for read in (lambda: load_split({str(tiny_zoo_copy)!r}, split='test'),\n"
            f"             lambda: load_split({str(tiny_zoo_copy)!r}, split='test', check=False),\n"
            f"             lambda: read_metadata({str(tiny_zoo_copy)!r}, split='test')):\n"
            f"    try:\n"
            f"        read()\n"
            f"    except Exception as error:\n"
            f"        print(type(error).__name__, error)\n")
    result = run_limited([sys.executable, "-c", load], limit_bytes=GIB, timeout=60, env=_environment(tmp_path))
    assert result.returncode == 0 and not result.oom_killed, result.describe()
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("CorruptShardError") and f"{shard}: {NOT_REGULAR}" in line
                                   for line in lines), result.stdout


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_manifest_that_is_not_a_file_is_named_as_what_it_is(cli, tiny_zoo_copy, tmp_path, kind):
    manifest = tiny_zoo_copy / "manifest.json"
    manifest.chmod(0o644)
    manifest.unlink()
    os.mkfifo(manifest) if kind == "fifo" else manifest.mkdir()
    line = _one_error_line(_nfnzoo(cli, tmp_path, "info", str(tiny_zoo_copy), timeout=30), "info")
    expected = NOT_REGULAR if kind == "fifo" else "a folder"
    assert f"{manifest}: {expected}; a packed zoo's manifest.json is a JSON file" in line, line
    assert "no manifest.json" not in line


@pytest.mark.parametrize("variant", sorted(CRAFTED))
def test_a_crafted_pinned_file_is_refused_by_the_check_leaderboards_call(tmp_path, variant):
    """`leaderboards.pinned` and `leaderboards.rescore` check a pinned board file with
    `check_declared_sizes` before decoding it (the board audit's OOM): the same parser, the same line."""
    import pyarrow as pa

    crafted, expected = CRAFTED[variant]
    path = tmp_path / "0123456789ab.test.parquet"
    pq.write_table(pa.table({"model_id": [f"m{i}" for i in range(100)], "test_accuracy": [0.5] * 100}), path)
    chunk = pq.read_metadata(path).row_group(0).column(0)
    with open(path, "r+b") as handle:
        handle.seek(chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset)
        handle.write(crafted)
    check = (f"from pathlib import Path\nfrom zoo.storage.integrity import check_declared_sizes\n"
             f"check_declared_sizes(Path({str(path)!r}))\n")
    result = run_limited([sys.executable, "-c", check], limit_bytes=GIB, timeout=60, env=_environment(tmp_path))
    assert not result.oom_killed and result.returncode == 1, result.describe()
    assert f"CorruptShardError: {path}: column 'model_id' of row group 0 (100 rows): an unreadable page header" \
        in result.stderr and expected in result.stderr, result.describe()
