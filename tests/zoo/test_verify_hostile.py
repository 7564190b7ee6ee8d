"""Hostile and broken zoos: manifests naming files outside the folder, malformed manifests,
safetensors headers declaring sizes their rows do not hold, repeated ids, inconsistent counts
and cards. Each is a one-line error or a `verify` problem naming the file (and key or row),
nothing outside the folder is opened, and nothing is allocated by a declared size."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zoo.storage.folder import MANIFEST, read_manifest
from zoo.validation.inputs import InputError
from zoo.storage.integrity import dataset_hash_of, file_checksums
from zoo.loader import load_split
from zoo.storage.safetensors_io import read_header
from zoo.dataset.verify import verify

CONFIG = "cnn-mnist"
ROOT = Path(__file__).resolve().parents[2]


def run(cli, *argv: str, timeout: int = 120):
    """`nfnzoo ARGV` in a fresh process (the session's forked CLI, tests/forked_cli.py)."""
    return cli.run(list(argv), cwd=ROOT, env=dict(os.environ), timeout=timeout)


def run_main(capsys, *argv: str) -> tuple[int, str]:
    """The CLI in this process (for the many cases that need no process of their own): (exit code, stderr)."""
    from zoo.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exit:  # argparse's usage errors
        code = exit.code
    return code, capsys.readouterr().err


def write_manifest(folder: Path, manifest: dict) -> None:
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def train_entry(folder: Path) -> dict:
    return next(f for f in read_manifest(folder)["configs"][CONFIG]["files"] if f["split"] == "train")


def rewrite_rows(folder: Path, column: str, change) -> str:
    """Rewrites one column of the train shard with `change(values)`, and reseals the manifest to it."""
    manifest = read_manifest(folder)
    entry = next(f for f in manifest["configs"][CONFIG]["files"] if f["split"] == "train")
    path = folder / entry["path"]
    table = pq.read_table(path)
    values = change(table[column].to_pylist())
    table = table.set_column(table.schema.get_field_index(column), table.schema.field(column),
                             pa.array(values, table.schema.field(column).type))
    pq.write_table(table, path)
    entry.update(bytes=path.stat().st_size, **file_checksums(path))
    manifest["configs"][CONFIG]["dataset_hash"] = dataset_hash_of(manifest["configs"][CONFIG]["files"])
    write_manifest(folder, manifest)
    return entry["path"]


# --- manifest shard paths stay inside the folder -------------------------------------------------------------

@pytest.mark.parametrize("where", ["parent", "absolute", "symlink"])
def test_a_manifest_naming_a_file_outside_the_folder_is_refused_before_it_is_opened(cli, tiny_zoo_copy, tmp_path,
                                                                                    where):
    outside = tmp_path / "outside.parquet"
    os.mkfifo(outside)  # opening it would block; its size would be reported by a stat
    manifest = read_manifest(tiny_zoo_copy)
    entry = manifest["configs"][CONFIG]["files"][0]
    if where == "parent":
        entry["path"] = "../outside.parquet"
    elif where == "absolute":
        entry["path"] = str(outside)
    else:  # a link inside the folder that leads out
        (tiny_zoo_copy / entry["path"]).unlink()
        (tiny_zoo_copy / entry["path"]).symlink_to(outside)
    write_manifest(tiny_zoo_copy, manifest)
    result = run(cli, "verify", str(tiny_zoo_copy), timeout=60)  # a FIFO opened would hang until the timeout
    assert result.returncode == 1, result.stderr
    assert f"configs.{CONFIG}.files[0].path" in result.stderr and "bytes" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    with pytest.raises(InputError, match=rf"configs\.{CONFIG}\.files\[0\]\.path"):
        load_split(tiny_zoo_copy, CONFIG, entry["split"])
    result = run(cli, "info", str(tiny_zoo_copy), timeout=60)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert f"configs.{CONFIG}.files[0].path" in result.stderr


def test_a_hub_snapshots_links_into_its_own_blobs_are_allowed(tiny_zoo, tmp_path):
    from zoo.storage.manifest import shard_path

    cache = tmp_path / "datasets--org--zoo"
    snapshot = cache / "snapshots" / ("a" * 40)
    (cache / "blobs").mkdir(parents=True)
    (snapshot / "data").mkdir(parents=True)
    (cache / "blobs" / "etag").write_bytes(b"x")
    (snapshot / "data" / "s.parquet").symlink_to("../../../blobs/etag")
    assert shard_path(snapshot, "data/s.parquet", "manifest") == snapshot / "data" / "s.parquet"
    os.mkfifo(tmp_path / "elsewhere")
    (snapshot / "data" / "t.parquet").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="leads outside"):
        shard_path(snapshot, "data/t.parquet", "manifest")


# --- the manifest's structure: one line naming the key ---------------------------------------------------------

def _drop_files(entry): entry.pop("files")
def _files_not_list(entry): entry["files"] = {"a": 1}
def _negative_rows(entry): entry["files"][0]["rows"] = -1
def _bad_sha(entry): entry["files"][0]["sha256"] = "xyz"
def _bad_split(entry): entry["files"][0]["split"] = "holdout"
def _complete_text(entry): entry["complete"] = "yes"
def _planned_float(entry): entry["planned_checkpoints"] = 1.5
def _splits_negative(entry): entry["splits"]["train"] = -3
def _no_path(entry): entry["files"][0].pop("path")


@pytest.mark.parametrize("change, key", [
    (_drop_files, "files"), (_files_not_list, "files"), (_negative_rows, "files[0].rows"),
    (_bad_sha, "files[0].sha256"), (_bad_split, "files[0].split"), (_complete_text, "complete"),
    (_planned_float, "planned_checkpoints"), (_splits_negative, "splits.train"), (_no_path, "files[0]"),
])
def test_a_malformed_manifest_is_one_line_naming_the_key(tiny_zoo_copy, capsys, change, key):
    manifest = read_manifest(tiny_zoo_copy)
    change(manifest["configs"][CONFIG])
    write_manifest(tiny_zoo_copy, manifest)
    for command in ("info", "verify"):
        code, err = run_main(capsys, command, str(tiny_zoo_copy))
        assert code == 1 and f"configs.{CONFIG}.{key}" in err, err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("text, expected", [
    ('{"configs": ' + "[" * 1000 + "]" * 1000 + "}", "nested too deeply"),
    ('{"configs": {"../x": {}}}', "not a valid name"),
    ('{"configs": {}, "configs": {}}', "appear twice"),
])
def test_a_hostile_manifest_file_is_one_line(tiny_zoo_copy, capsys, text, expected):
    (tiny_zoo_copy / MANIFEST).write_text(text)
    code, err = run_main(capsys, "info", str(tiny_zoo_copy))
    assert code == 1 and expected in err and len(err.strip().splitlines()) == 1, err


# --- safetensors headers: bounded, checked before allocation ---------------------------------------------------

def _header(body: dict, data: bytes = b"") -> bytes:
    text = json.dumps(body).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.mark.parametrize("buffer, expected", [
    (struct.pack("<Q", 2**30) + b"{}", "declares a 1,073,741,824-byte header"),
    (struct.pack("<Q", 100) + b"{}", "exceeds the 10-byte buffer"),
    (_header({"w": {"dtype": "F32", "shape": [200000, 200000], "data_offsets": [0, 160000000000]}}, b"\0" * 16),
     "outside the 16-byte data section"),
    (_header({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]}}, b"\0" * 16), "needs 16 bytes"),
    (_header({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}), "non-negative"),
    (_header({"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4), "unknown dtype"),
    (_header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12), "overlap"),
    (struct.pack("<Q", 2003) + b"[" * 1000 + b"]" * 1000 + b"   ", "nested too deeply"),
    (_header({"__metadata__": {"nfnzoo": 5}}), "__metadata__ must map names to strings"),
])
def test_a_safetensors_header_is_checked_against_its_buffer(buffer, expected):
    with pytest.raises(ValueError, match=expected):
        read_header(buffer)


def test_weights_metadata_nested_deeply_is_one_line():
    from zoo.storage.record import parse_weights_metadata

    with pytest.raises(ValueError, match="nested too deeply"):
        parse_weights_metadata({"nfnzoo": "[" * 1000 + "]" * 1000})
    with pytest.raises(ValueError, match="not an architecture"):
        parse_weights_metadata({"nfnzoo": '{"family": "cnn"}'})


def _huge_layer(row: bytes) -> bytes:
    """`row` whose architecture metadata declares its first layer 200000 x 200000 (the tensor entry unchanged)."""
    header, start = read_header(row)
    info = json.loads(header["__metadata__"]["nfnzoo"])
    info["layers"][0]["shape"] = [200000, 200000]
    header["__metadata__"]["nfnzoo"] = json.dumps(info)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + row[start:]


def _huge_header(row: bytes) -> bytes:
    return struct.pack("<Q", 2**30) + row[8:]


@pytest.mark.parametrize("hostile, expected", [
    (_huge_header, "declares a 1,073,741,824-byte header"),
    (_huge_layer, "the architecture says float32 (200000, 200000)"),
])
def test_a_row_declaring_more_than_it_holds_fails_verify_and_the_loader(tiny_zoo_copy, hostile, expected):
    path = rewrite_rows(tiny_zoo_copy, "weights", lambda rows: [hostile(rows[0]), *rows[1:3], hostile(rows[3]),
                                                                *rows[4:]])
    problems = verify(tiny_zoo_copy).problems
    assert any(p.startswith(f"{path}: row 0: ") and expected in p for p in problems), problems
    assert any(p.startswith(f"{path}: row 3: ") for p in problems), problems
    with pytest.raises(ValueError, match=rf"{path}: row 0: .*{expected[:20]}"):  # not a 160 GB allocation
        load_split(tiny_zoo_copy, CONFIG, "train")
def test_rows_shorter_than_the_first_are_refused_before_allocating(tiny_zoo_copy):
    path = rewrite_rows(tiny_zoo_copy, "weights", lambda rows: [rows[0], *(row[:64] for row in rows[1:])])
    with pytest.raises(ValueError, match="do not fit in the"):
        load_split(tiny_zoo_copy, CONFIG, "train")
    assert any(p.startswith(f"{path}: row 1: ") for p in verify(tiny_zoo_copy).problems)


# --- ids, counts and the card -----------------------------------------------------------------------------------

def test_a_repeated_model_id_is_a_problem(tiny_zoo_copy):
    path = rewrite_rows(tiny_zoo_copy, "model_id", lambda ids: [ids[0], ids[0], *ids[2:]])
    problems = verify(tiny_zoo_copy).problems
    assert any(p.startswith(f"{path}: row 1: model_id") and "appears twice" in p for p in problems), problems


def _packed_more(entry): entry["packed_checkpoints"] += 1
def _planned_fewer(entry): entry.update(planned_checkpoints=entry["packed_checkpoints"] - 1)
def _split_count(entry): entry["splits"]["train"] += 2
def _not_complete(entry): entry["complete"] = False


@pytest.mark.parametrize("change, expected", [
    (_packed_more, "packed_checkpoints 19, its shards hold 18"),
    (_planned_fewer, "exceeds planned_checkpoints 17"),
    (_not_complete, "complete is false, but 18 of 18"),
])
def test_inconsistent_counts_are_problems(tiny_zoo_copy, change, expected):
    manifest = read_manifest(tiny_zoo_copy)
    change(manifest["configs"][CONFIG])
    write_manifest(tiny_zoo_copy, manifest)
    problems = verify(tiny_zoo_copy, allow_incomplete=True).problems
    assert any(expected in p for p in problems), problems


def test_a_split_count_that_is_not_its_shards_sum_is_refused_where_the_manifest_is_read(tiny_zoo_copy):
    manifest = read_manifest(tiny_zoo_copy)
    _split_count(manifest["configs"][CONFIG])
    write_manifest(tiny_zoo_copy, manifest)
    with pytest.raises(InputError, match=r"splits\.train: 14 rows, but its shards' `rows` add up to 12"):
        load_split(tiny_zoo_copy, CONFIG, "train")
    problems = verify(tiny_zoo_copy, allow_incomplete=True).problems
    assert len(problems) == 1 and "splits.train: 14 rows, but its shards' `rows` add up to 12" in problems[0]


def test_a_manifest_that_understates_every_shards_rows_is_refused_by_the_load_and_by_verify(tiny_zoo_copy):
    """Consistent with itself (each split's count its shards' sum), but not with the files' own footers."""
    from zoo.storage.integrity import CorruptShardError

    manifest = read_manifest(tiny_zoo_copy)
    entry = manifest["configs"][CONFIG]
    for shard in entry["files"]:
        shard["rows"] -= 1
        entry["splits"][shard["split"]] -= 1
    entry["packed_checkpoints"] -= len(entry["files"])
    write_manifest(tiny_zoo_copy, manifest)
    with pytest.raises(CorruptShardError, match=r"train-00000-of-00001-[0-9a-f]+\.parquet: 12 rows, manifest says 11"):
        load_split(tiny_zoo_copy, CONFIG, "train")
    problems = verify(tiny_zoo_copy, allow_incomplete=True).problems
    assert all(any(shard["path"] in p and "rows, manifest says" in p for p in problems) for shard in entry["files"])


def test_the_cards_completeness_must_agree_with_the_manifest(tiny_zoo_copy, tiny_zoo_spec):
    from zoo.dataset.card import INCOMPLETE_MARK
    from zoo.dataset.pack import pack
    from zoo.planning.plan import plan_runs
    from zoo.storage.staging import Staging

    card = tiny_zoo_copy / "README.md"
    text = card.read_text()
    card.write_text(text.replace("\nArchitectures:\n", f"\n{INCOMPLETE_MARK} 1 of 2.\n\nArchitectures:\n", 1))
    assert any("the card says it is incomplete, the manifest that it is complete" in p
               for p in verify(tiny_zoo_copy).problems)
    card.write_text(text)
    staging = Staging(tiny_zoo_copy / "staging")
    for model_id in plan_runs(tiny_zoo_spec)[0].model_ids:
        staging.path(model_id).unlink()
    pack(tiny_zoo_copy, allow_incomplete=True)
    assert verify(tiny_zoo_copy, allow_incomplete=True).ok
    card.write_text(card.read_text().replace(INCOMPLETE_MARK, "Note:"))
    assert any("the card says it is complete, the manifest that it is incomplete" in p
               for p in verify(tiny_zoo_copy, allow_incomplete=True).problems)


# --- arguments ----------------------------------------------------------------------------------------------------

def test_verify_json_into_a_missing_folder_is_one_line(cli, tiny_zoo, tmp_path):
    target = tmp_path / "missing" / "report.json"
    result = run(cli, "verify", str(tiny_zoo), "--json", str(target))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert str(target) in result.stderr and not target.parent.exists()
    result = run(cli, "verify", str(tiny_zoo), "--json", str(tmp_path / "report.json"))
    assert result.returncode == 0 and json.loads((tmp_path / "report.json").read_text())["problems"] == []
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # written atomically: no temporary left


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1", "lots"])
def test_pack_refuses_a_shard_size_that_is_not_a_positive_number(tiny_zoo_copy, capsys, value):
    code, err = run_main(capsys, "pack", str(tiny_zoo_copy), "--shard-mb", value)
    assert code == 2 and err.strip().splitlines()[-1].startswith("nfnzoo pack: error: argument --shard-mb"), err
