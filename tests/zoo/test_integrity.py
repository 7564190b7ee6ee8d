"""Nothing corrupted reaches a result: shard checksums on load, unreadable files named, file modes.

Every fault is made on a real packed zoo (`tiny_zoo_copy`): a byte flipped in the middle of a
shard, a truncated shard, a truncated manifest, an edited dataset hash.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from zoo.cli import main
from zoo.storage.folder import MANIFEST, read_manifest
from zoo.storage.integrity import CorruptShardError, verified_dataset_hash
from zoo.loader import dataset_hash, load_split
from benchmarks.run_options import RunOptions

CONFIG = "cnn-mnist"


def shard(folder: Path, split: str) -> Path:
    (entry,) = [f for f in read_manifest(folder)["configs"][CONFIG]["files"] if f["split"] == split]
    return folder / entry["path"]


def flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def bench(folder: Path, out: Path, capsys) -> tuple[int, str]:
    code = main(["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(folder),
                 "--seeds", "0,1,2", "--out", str(out), "--set", "epochs=1", "--set", "model.hidden_sizes=[4]"])
    return code, capsys.readouterr().err


def test_a_flipped_byte_fails_the_benchmark_and_names_the_shard(tiny_zoo_copy, tmp_path, capsys):
    train = shard(tiny_zoo_copy, "train")
    flip_middle_byte(train)
    code, err = bench(tiny_zoo_copy, tmp_path / "mlp.json", capsys)
    assert code == 1
    assert f"{train}: xxh3_128 differs from the manifest (corrupted)" in err
    assert not (tmp_path / "mlp.json").exists()  # nothing was trained on it, nothing written


def flip_a_weight_byte(path: Path) -> None:
    """Flips a byte inside the first row's first tensor (past its safetensors header)."""
    first_row = pq.read_table(path, columns=["weights"])["weights"][0].as_py()
    data = bytearray(path.read_bytes())
    start = data.find(first_row[:64])
    header_length = int.from_bytes(first_row[:8], "little")
    data[start + 8 + header_length + 9] ^= 0x40
    path.write_bytes(bytes(data))


def test_load_split_checks_the_shards_it_reads(tiny_zoo, tiny_zoo_copy):
    flip_a_weight_byte(shard(tiny_zoo_copy, "train"))
    with pytest.raises(CorruptShardError, match=r"train-00000-of-00001-[0-9a-f]{8}\.parquet: xxh3_128 differs"):
        load_split(tiny_zoo_copy, CONFIG, "train")
    assert len(load_split(tiny_zoo_copy, CONFIG, "test")) == 3  # an intact split still loads
    # the negative control: unchecked, the flipped byte goes through silently as a wrong weight
    wrong = load_split(tiny_zoo_copy, CONFIG, "train", check=False).weights.flatten()
    genuine = load_split(tiny_zoo, CONFIG, "train").weights.flatten()
    assert (wrong != genuine).sum() == 1


def test_a_truncated_shard_is_named_whether_checked_or_not(tiny_zoo_copy):
    test = shard(tiny_zoo_copy, "test")
    test.write_bytes(test.read_bytes()[:-100])
    with pytest.raises(CorruptShardError, match=rf"{test}: \d+ bytes, manifest says \d+ \(truncated"):
        load_split(tiny_zoo_copy, CONFIG, "test")
    with pytest.raises(ValueError, match=rf"^{test}: not readable as Parquet"):
        load_split(tiny_zoo_copy, CONFIG, "test", check=False)


def test_info_names_a_truncated_shard(tiny_zoo_copy, capsys):
    validation = shard(tiny_zoo_copy, "validation")
    validation.write_bytes(validation.read_bytes()[:1000])
    assert main(["info", str(tiny_zoo_copy)]) == 1
    err = capsys.readouterr().err
    assert f"{validation}: not readable as Parquet" in err and "Traceback" not in err


def test_an_edited_dataset_hash_is_not_recorded(tiny_zoo_copy, tmp_path, capsys):
    manifest = json.loads((tiny_zoo_copy / MANIFEST).read_text())
    genuine = manifest["configs"][CONFIG]["dataset_hash"]
    assert verified_dataset_hash(tiny_zoo_copy) == genuine
    manifest["configs"][CONFIG]["dataset_hash"] = "ab" * 32  # the bytes did not change; the claim did
    (tiny_zoo_copy / MANIFEST).write_text(json.dumps(manifest))
    assert dataset_hash(tiny_zoo_copy) == "ab" * 32  # what the manifest says, unchecked
    code, err = bench(tiny_zoo_copy, tmp_path / "mlp.json", capsys)
    assert code == 1 and f"records dataset hash abababababab…, but its shards' checksums give {genuine[:12]}…" in err


@pytest.mark.parametrize("command", [["info"], ["verify"], ["bench"]])
def test_a_truncated_manifest_is_named(tiny_zoo_copy, tmp_path, capsys, command):
    path = tiny_zoo_copy / MANIFEST
    path.write_text(path.read_text()[:200])
    if command == ["bench"]:
        code, err = bench(tiny_zoo_copy, tmp_path / "mlp.json", capsys)
    else:
        code, err = main(command + [str(tiny_zoo_copy)]), capsys.readouterr().err
    assert code == 1 and f"{path}: not a readable manifest" in err and "truncated" in err
    assert "Traceback" not in err


def test_a_folder_that_is_no_zoo_gets_no_advice_to_pack_it(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a zoo")
    assert main(["info", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is not a packed zoo: no manifest.json" in err and "run `nfnzoo pack" not in err
    assert main(["info", str(tmp_path / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_written_files_get_the_users_normal_mode(tiny_zoo, tmp_path, umask):
    from benchmarks.harness import run_benchmark
    from leaderboards import render, submit
    from zoo.storage.atomic import write_json_atomic
    from zoo.storage.folder import write_json_atomic as write_sorted_json
    from zoo.storage.staging import Staging
    from zoo.storage.staging import read_staged

    previous = os.umask(umask)
    try:
        out = tmp_path / "results" / "mlp.json"
        run_benchmark("generalization", "mlp", tiny_zoo, None,
                      RunOptions([0, 1, 2], model_overrides={"hidden_sizes": [4]}, task_overrides={"epochs": 1},
                                 progress=False),
                      out)
        accepted = submit(out, tmp_path / "board", tiny_zoo)
        render(tmp_path / "board", tmp_path / "site")
        some_id = next(iter(Staging(tiny_zoo / "staging").model_ids()))
        staged = Staging(tmp_path / "staging").write(read_staged(Staging(tiny_zoo / "staging").path(some_id)))
        written = [out, out.with_name("mlp.predictions.csv"), accepted.path, tmp_path / "board" / "datasets.json",
                   tmp_path / "site" / "index.md", staged, write_json_atomic(tmp_path / "a.json", {})]
        write_sorted_json(tmp_path / "b.json", {})
        written.append(tmp_path / "b.json")
    finally:
        os.umask(previous)
    expected = 0o666 & ~umask
    assert {path.name: oct(stat.S_IMODE(path.stat().st_mode)) for path in written} == \
        {path.name: oct(expected) for path in written}


def test_an_interrupt_during_a_multi_file_change_waits_for_its_end():
    import signal

    from zoo.distributed.signals import deferred_signals

    steps = []
    before = signal.getsignal(signal.SIGINT)  # default_int_handler; SIG_IGN when launched as a background job
    with pytest.raises(KeyboardInterrupt):
        with deferred_signals():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("after the signal")  # still runs: the interrupt waits
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is before  # the handler is restored


def test_an_interrupt_while_packing_leaves_the_last_pack_as_it_was(tiny_zoo_copy, monkeypatch):
    from zoo.dataset import pack as pack_module

    before = {p: p.read_bytes() for p in sorted(tiny_zoo_copy.rglob("*")) if p.is_file() and "staging" not in p.parts
              and p.name != ".nfnzoo.lock"}  # the folder lock records who holds it
    real = pack_module.write_shard
    calls = []

    def interrupted(*args, **kwargs):  # Ctrl-C arrives while the second shard is written
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(pack_module, "write_shard", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pack_module.pack(tiny_zoo_copy, max_shard_bytes=1)
    after = {p: p.read_bytes() for p in sorted(tiny_zoo_copy.rglob("*")) if p.is_file() and "staging" not in p.parts
              and p.name != ".nfnzoo.lock"}  # the folder lock records who holds it
    assert after == before  # no half-built folder, no changed shard, manifest or card


def _rewrite_manifest(folder: Path, edit) -> None:
    path = folder / MANIFEST
    path.chmod(0o644)
    manifest = json.loads(path.read_text())
    for entry in manifest["configs"][CONFIG]["files"]:
        edit(entry)
    path.write_text(json.dumps(manifest))


def test_a_manifest_without_the_fast_checksum_is_checked_by_sha256(tiny_zoo_copy):
    """A zoo packed before the fast checksum existed: loads check its sha256, and still catch a flip."""
    assert all(len(f["xxh3_128"]) == 32 for f in read_manifest(tiny_zoo_copy)["configs"][CONFIG]["files"])
    _rewrite_manifest(tiny_zoo_copy, lambda entry: entry.pop("xxh3_128"))
    assert len(load_split(tiny_zoo_copy, CONFIG, "train")) > 0
    flip_a_weight_byte(shard(tiny_zoo_copy, "train"))
    with pytest.raises(CorruptShardError, match=r"\.parquet: sha256 differs"):
        load_split(tiny_zoo_copy, CONFIG, "train")


def test_verify_full_checks_the_sha256_a_forged_fast_checksum_cannot_hide(tiny_zoo_copy, capsys):
    """A shard changed and its xxh3 rewritten to match (what a non-cryptographic hash allows): a load and
    the default verify accept it; `verify --full` checks sha256, the hash of record, and refuses it."""
    from zoo.storage.integrity import xxh3_file

    train = shard(tiny_zoo_copy, "train")
    flip_a_weight_byte(train)
    forged = xxh3_file(train)
    _rewrite_manifest(tiny_zoo_copy, lambda entry: entry.update(xxh3_128=forged) if entry["split"] == "train" else None)
    assert len(load_split(tiny_zoo_copy, CONFIG, "train")) > 0
    assert main(["verify", str(tiny_zoo_copy)]) == 0
    assert main(["verify", str(tiny_zoo_copy), "--full"]) == 1
    said = capsys.readouterr()
    relative = train.relative_to(tiny_zoo_copy).as_posix()
    assert f"{relative}: sha256 differs from the manifest (corrupted)" in said.err, said


def test_a_malformed_fast_checksum_is_one_line_naming_the_key(tiny_zoo_copy, capsys):
    _rewrite_manifest(tiny_zoo_copy, lambda entry: entry.update(xxh3_128="not hex"))
    assert main(["verify", str(tiny_zoo_copy)]) == 1
    assert ".xxh3_128: expected 32 lowercase hex digits" in capsys.readouterr().err
