"""Verification: corrupted, missing or stray shards are reported by name; metrics are recomputed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from zoo.cli import main
from zoo.storage.folder import MANIFEST, read_manifest, write_json_atomic
from zoo.dataset.pack import file_checksums
from zoo.dataset.verify import verify

CONFIG = "cnn-mnist"


def shard(folder: Path, split: str) -> str:
    (entry,) = [f for f in read_manifest(folder)["configs"][CONFIG]["files"] if f["split"] == split]
    return entry["path"]


def reseal(folder: Path) -> None:
    """Rewrites the manifest's byte counts and checksums to match the shards on disk."""
    manifest = read_manifest(folder)
    for entry in manifest["configs"][CONFIG]["files"]:
        entry["bytes"] = (folder / entry["path"]).stat().st_size
        entry.update(file_checksums(folder / entry["path"]))
    write_json_atomic(folder / MANIFEST, manifest)


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_intact_zoo_verifies(tiny_zoo, capsys):
    report = verify(tiny_zoo)
    assert report.ok, report.problems
    assert (report.files_checked, report.rows_checked) == (3, 18)
    code, out, err = run_cli(["verify", str(tiny_zoo)], capsys)
    assert code == 0, err
    assert "checked 3 shards, 18 rows" in out and out.strip().endswith("ok")


def test_truncated_and_flipped_shards_are_reported_by_name(tiny_zoo_copy, capsys):
    truncated, flipped = shard(tiny_zoo_copy, "train"), shard(tiny_zoo_copy, "test")
    path = tiny_zoo_copy / truncated
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    path = tiny_zoo_copy / flipped
    data = bytearray(path.read_bytes())
    middle = len(data) // 2  # inside the uncompressed weights pages: still readable Parquet
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))

    problems = verify(tiny_zoo_copy).problems
    assert any(p.startswith(f"{truncated}: ") and "manifest says" in p and "truncated" in p for p in problems)
    assert any(p.startswith(f"{truncated}: not readable as Parquet") for p in problems)
    assert any(p == f"{flipped}: xxh3_128 differs from the manifest (corrupted)" for p in problems)
    assert not any(shard(tiny_zoo_copy, "validation") in p for p in problems)  # the intact shard is not blamed

    code, out, err = run_cli(["verify", str(tiny_zoo_copy)], capsys)
    assert code == 1
    assert "nfnzoo verify: error:" in err and truncated in err and flipped in err
    assert not out.strip().endswith("ok")


def glob_card(folder: Path) -> None:
    """Rewrites the card's data_files as packs before the exact shard lists wrote them: a glob per split."""
    text = (folder / "README.md").read_text()
    _, header, body = text.split("---\n", 2)
    data = yaml.safe_load(header)
    for config in data["configs"]:
        for files in config["data_files"]:
            files["path"] = f"data/{config['config_name']}/{files['split']}-*.parquet"
    (folder / "README.md").write_text(f"---\n{yaml.safe_dump(data, sort_keys=False)}---\n{body}")


def test_a_stray_shard_is_a_warning_under_a_card_that_lists_its_shards(tiny_zoo_copy, capsys):
    stray = f"data/{CONFIG}/train-00001-of-00002.parquet"  # e.g. left by a killed pack: nothing reads it
    shutil.copyfile(tiny_zoo_copy / shard(tiny_zoo_copy, "train"), tiny_zoo_copy / stray)
    report = verify(tiny_zoo_copy)
    assert report.ok, report.problems
    (warning,) = report.warnings
    assert warning.startswith(f"{stray}: not listed in the manifest") and "next `nfnzoo pack` removes it" in warning
    code, out, err = run_cli(["verify", str(tiny_zoo_copy)], capsys)
    assert code == 0 and stray in err and out.strip().endswith("ok")


def test_a_stray_shard_is_a_problem_under_an_older_cards_glob(tiny_zoo_copy, capsys):
    glob_card(tiny_zoo_copy)
    assert verify(tiny_zoo_copy).ok  # an older pack's card (a glob per split) still verifies
    stray = f"data/{CONFIG}/train-00001-of-00002.parquet"  # which `load_dataset` would read through the glob
    shutil.copyfile(tiny_zoo_copy / shard(tiny_zoo_copy, "train"), tiny_zoo_copy / stray)
    assert verify(tiny_zoo_copy).problems == [f"{stray}: not listed in the manifest"]
    assert run_cli(["verify", str(tiny_zoo_copy)], capsys)[0] == 1


def test_missing_shard_is_reported(tiny_zoo_copy):
    missing = shard(tiny_zoo_copy, "validation")
    (tiny_zoo_copy / missing).unlink()
    report = verify(tiny_zoo_copy)
    assert report.problems == [f"{missing}: missing"]
    assert report.files_checked == 2


def test_missing_manifest_is_reported(tiny_zoo_copy, capsys):
    (tiny_zoo_copy / MANIFEST).unlink()
    (problem,) = verify(tiny_zoo_copy).problems
    assert "no manifest.json" in problem and "nfnzoo pack" in problem
    code, _, err = run_cli(["verify", str(tiny_zoo_copy)], capsys)
    assert code == 1 and "no manifest.json" in err


def test_unparsable_manifest_is_reported(tiny_zoo_copy):
    (tiny_zoo_copy / MANIFEST).write_text("{not json")
    assert not verify(tiny_zoo_copy).ok


def test_manifest_row_count_and_schema_are_checked(tiny_zoo_copy):
    manifest = read_manifest(tiny_zoo_copy)
    entry = manifest["configs"][CONFIG]
    entry["files"][0]["rows"] += 1  # and its split's count: a manifest consistent with itself, not with the shard
    entry["splits"][entry["files"][0]["split"]] += 1
    entry["columns"][0]["type"] = "int64"
    write_json_atomic(tiny_zoo_copy / MANIFEST, manifest)
    path = entry["files"][0]["path"]
    rows = entry["files"][0]["rows"]
    problems = verify(tiny_zoo_copy).problems
    assert f"{path}: {rows - 1} rows, manifest says {rows}" in problems
    assert sum("schema differs from the manifest's columns" in p for p in problems) == 3


def test_missing_card_is_reported(tiny_zoo_copy):
    (tiny_zoo_copy / "README.md").unlink()
    assert verify(tiny_zoo_copy).problems == ["README.md: missing or does not list the configs (re-run `nfnzoo pack`)"]


def test_verify_json_report_is_written(tiny_zoo, tmp_path, capsys):
    target = tmp_path / "report.json"
    assert run_cli(["verify", str(tiny_zoo), "--json", str(target)], capsys)[0] == 0
    report = json.loads(target.read_text())
    assert (report["files_checked"], report["rows_checked"], report["problems"]) == (3, 18, [])


# --- recomputation --------------------------------------------------------------------------

def test_recompute_passes_on_the_real_zoo(tiny_zoo, capsys):
    report = verify(tiny_zoo, recompute=4, seed=1)
    assert report.ok, report.problems
    assert len(report.recomputed) == 4
    for result in report.recomputed:
        assert set(result["metrics"]) == {"val_loss", "val_accuracy", "test_loss", "test_accuracy"}
        assert all(m["match"] for m in result["metrics"].values()), result
        for metric in result["metrics"].values():
            assert metric["stored"] == pytest.approx(metric["recomputed"], rel=1e-4, abs=1e-6)
    code, out, _ = run_cli(["verify", str(tiny_zoo), "--recompute", "2"], capsys)
    assert code == 0 and out.count("recomputed cnn-mnist/") == 2


def test_recompute_catches_a_tampered_metric(tiny_zoo_copy, capsys):
    for entry in read_manifest(tiny_zoo_copy)["configs"][CONFIG]["files"]:
        path = tiny_zoo_copy / entry["path"]
        table = pq.read_table(path)
        column = table.schema.get_field_index("test_accuracy")
        shifted = pc.subtract(pc.add(table["test_accuracy"], 0.5), pc.floor(pc.add(table["test_accuracy"], 0.5)))
        table = table.set_column(column, table.schema.field(column), shifted)
        pq.write_table(table, path)
    reseal(tiny_zoo_copy)

    assert verify(tiny_zoo_copy).ok  # checksums, counts and schema agree: only recomputation can tell
    report = verify(tiny_zoo_copy, recompute=3)
    assert not report.ok
    assert len(report.problems) == 3
    assert all("test_accuracy stored" in p and "recomputed" in p for p in report.problems)
    assert all(not result["metrics"]["test_accuracy"]["match"] and result["metrics"]["val_accuracy"]["match"]
               for result in report.recomputed)
    code, _, err = run_cli(["verify", str(tiny_zoo_copy), "--recompute", "1"], capsys)
    assert code == 1 and "test_accuracy stored" in err


def test_recompute_is_skipped_when_files_are_broken(tiny_zoo_copy):
    (tiny_zoo_copy / shard(tiny_zoo_copy, "test")).unlink()
    report = verify(tiny_zoo_copy, recompute=2)
    assert not report.ok and report.recomputed == []


def test_tampered_schema_field_type_still_fails(tiny_zoo_copy):
    path = tiny_zoo_copy / shard(tiny_zoo_copy, "validation")
    table = pq.read_table(path)
    table = table.set_column(table.schema.get_field_index("epoch"), pa.field("epoch", pa.int32()),
                             table["epoch"].cast(pa.int32()))
    pq.write_table(table, path)
    reseal(tiny_zoo_copy)
    assert verify(tiny_zoo_copy).problems == [f"{shard(tiny_zoo_copy, 'validation')}: schema differs from the "
                                              "manifest's columns"]


def test_retrain_reproduces_the_packed_checkpoints_bit_for_bit(tiny_zoo, capsys):
    report = verify(tiny_zoo, retrain=2, seed=3)
    assert report.ok, report.problems
    assert len(report.retrained) == 2
    assert all(r["identical"] and r["checkpoints"] == 3 for r in report.retrained)
    code, out, _ = run_cli(["verify", str(tiny_zoo), "--retrain", "1"], capsys)
    assert code == 0 and "checkpoints identical" in out


def test_retrain_catches_a_weight_from_another_trajectory(tiny_zoo_copy, capsys):
    """One stored weight nudged and the manifest resealed: checksums agree, only retraining tells."""
    path = tiny_zoo_copy / shard(tiny_zoo_copy, "train")
    table = pq.read_table(path)
    blobs = table["weights"].to_pylist()
    blob = bytearray(blobs[0])
    blob[-1] ^= 0x01  # the last byte of the last tensor's data: one float's lowest mantissa bit
    blobs[0] = bytes(blob)
    column = table.schema.get_field_index("weights")
    table = table.set_column(column, table.schema.field(column), pa.array(blobs, type=table.schema.field(column).type))
    pq.write_table(table, path)
    reseal(tiny_zoo_copy)
    tampered_run = table["run_id"][0].as_py()

    assert verify(tiny_zoo_copy).ok
    report = verify(tiny_zoo_copy, retrain=6)  # every run of the tiny zoo
    assert not report.ok
    assert [r["run_id"] for r in report.retrained if not r["identical"]] == [tampered_run]
    assert all(tampered_run in p and "differs" in p for p in report.problems)
    code, _, err = run_cli(["verify", str(tiny_zoo_copy), "--retrain", "6"], capsys)
    assert code == 1 and "DIFFERENT" not in err and f"retrained run {tampered_run}" in err
