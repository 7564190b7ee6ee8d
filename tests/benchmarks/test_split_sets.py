"""A benchmark task on a named split set (`--set task.splits=nfn`): the set's rows, recorded in the results."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "zoo"))  # the hand-made Small CNN Zoo fixture

from small_cnn_fixture import make_zoo
from benchmarks.run_options import Placement, RunOptions


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    from zoo.imports import get_importer

    root = tmp_path_factory.mktemp("split_sets")
    make_zoo(root / "src", runs=40, steps=(0, 86))
    get_importer("small-cnn-zoo")(root / "src", root / "out")
    return root / "out"


def test_generalization_runs_on_the_nfn_split_and_records_it(imported, tmp_path):
    from benchmarks.harness import run_benchmark
    from benchmarks.tasks.generalization import GeneralizationTask
    from zoo.split_set_loader import load_split_set

    results = run_benchmark("generalization", "statnn", imported, None,
                            RunOptions([0], task_overrides={"splits": "nfn", "epochs": 1},
                                       placement=Placement(device="cpu"), progress=False),
                            tmp_path / "r.json")
    assert results["task_config"]["splits"] == "nfn"
    assert GeneralizationTask.evaluation_protocol(results["task_config"])["splits"] == "nfn"
    assert "split set: nfn" in GeneralizationTask.describe_protocol(results["task_config"])
    test_ids = list(load_split_set(imported, None, "nfn")["test"].metadata["model_id"])
    import pandas as pd

    predicted = pd.read_csv(tmp_path / "r.predictions.csv")
    assert sorted(predicted["model_id"]) == sorted(test_ids) and len(test_ids) == 20


def test_an_unknown_split_set_names_the_ones_there(imported, tmp_path):
    from benchmarks.harness import run_benchmark

    with pytest.raises(ValueError, match=r"no split set 'paper'; it has \['nfn'\]"):
        run_benchmark("generalization", "statnn", imported, None,
                      RunOptions([0], task_overrides={"splits": "paper", "epochs": 1},
                                 placement=Placement(device="cpu"), progress=False))


def test_the_nfn_preset_takes_the_split_set_and_the_papers_training(imported, tmp_path):
    from benchmarks.harness import run_benchmark

    results = run_benchmark("generalization", "statnn", imported, None,
                            RunOptions([0], task_overrides={"preset": "nfn", "epochs": 1},
                                       placement=Placement(device="cpu"), progress=False))
    config = results["task_config"]
    assert (config["splits"], config["loss"], config["batch_size"], config["lr"], config["weight_decay"]) == (
        "nfn", "bce", 8, 1e-3, 0.0)
    assert config["epochs"] == 1  # an override on top of the preset


def test_a_board_pins_the_split_sets_test_rows_and_re_scores_a_result_on_them(imported, tmp_path):
    """Registered with --dataset, the board pins the zoo's test split and each split set's; a result on
    the nfn split is re-scored from the nfn file, audited, and a changed pinned file fails the audit."""
    from benchmarks.harness import run_benchmark
    from leaderboards import submit
    from leaderboards.audit import audit
    from leaderboards.datasets import load_datasets
    from leaderboards.pinned import load_pinned, pin_dataset
    from zoo.split_set_loader import load_split_set, read_split_set_metadata

    out = tmp_path / "statnn.json"
    run_benchmark("generalization", "statnn", imported, None,
                  RunOptions([0, 1, 2], task_overrides={"splits": "nfn", "epochs": 1},
                             placement=Placement(device="cpu"), progress=False),
                  out)
    board = tmp_path / "board"
    accepted = submit(out, board, imported)
    assert accepted.verified, accepted.rescoring
    record = load_datasets(board)[accepted.registered_dataset.dataset_hash]
    assert sorted(record.split_sets) == ["nfn"] and record.test_metadata is not None
    pinned = load_pinned(board, record, "nfn")
    assert pinned.equals(read_split_set_metadata(imported, None, "nfn", "test"))
    assert pinned.equals(load_split_set(imported, None, "nfn")["test"].metadata)
    assert not pinned.equals(load_pinned(board, record))  # the zoo's own test split is another
    assert [(a.verified, a.problems) for a in audit(board, require_verified=True)] == [(True, ())]
    assert "equal the test splits" in pin_dataset(board, imported)
    path = board / "pinned" / f"{record.dataset_hash[:12]}.nfn.test.parquet"
    path.write_bytes(path.read_bytes() + b"\0")  # negative control: the audit reads the split set's file
    (result,) = audit(board, require_verified=True)
    assert any("the pinned test metadata was changed" in problem for problem in result.problems), result.problems


def test_probegen_reads_its_members_activation_from_the_rows_and_refuses_a_mixed_zoo(imported, tmp_path):
    """The Small CNN Zoo fixture holds ReLU and tanh runs: probing them through one activation would score
    half of them through the wrong function, so the harness refuses until a subset picks one, then fills
    `member_activation` from the rows (and refuses one that contradicts them)."""
    from benchmarks.harness import run_benchmark

    small = {"num_probes": 4, "hidden_sizes": [8], "normalize_outputs": False}
    with pytest.raises(ValueError, match=r"the rows hold activation \['relu', 'tanh'\].*task.subset"):
        run_benchmark("generalization", "probegen", imported, None,
                      RunOptions([0], model_overrides=small, task_overrides={"splits": "nfn", "epochs": 1},
                                 placement=Placement(device="cpu"), progress=False))
    results = run_benchmark("generalization", "probegen", imported, None,
                            RunOptions([0], model_overrides=small,
                                       task_overrides={"splits": "nfn", "epochs": 1, "subset": {"activation": "tanh"}},
                                       placement=Placement(device="cpu"), progress=False))
    assert results["model_config"]["member_activation"] == "tanh"
    with pytest.raises(ValueError, match="member_activation='relu', but the rows it reads have activation='tanh'"):
        run_benchmark("generalization", "probegen", imported, None,
                      RunOptions([0], model_overrides={**small, "member_activation": "relu"},
                                 task_overrides={"splits": "nfn", "epochs": 1, "subset": {"activation": "tanh"}},
                                 placement=Placement(device="cpu"), progress=False))


def test_a_result_on_an_edited_split_set_is_refused_though_the_dataset_hash_is_the_same(imported, tmp_path):
    """The dataset hash covers the shards, not a set's file: a set edited to move test rows into train (its
    manifest sha256 updated to match) keeps the hash. The result records the set file's sha256 and the board
    the pinned one, so submit refuses it, naming both (docs/security.md, "received zoo")."""
    import hashlib
    import json
    import shutil

    from benchmarks.harness import run_benchmark
    from leaderboards import SubmissionRejected, submit
    from leaderboards.datasets import load_datasets

    board = tmp_path / "board"
    honest = tmp_path / "honest.json"
    run_benchmark("generalization", "statnn", imported, None,
                  RunOptions([0, 1, 2], task_overrides={"splits": "nfn", "epochs": 1},
                             placement=Placement(device="cpu"), progress=False),
                  honest)
    accepted = submit(honest, board, imported)  # registers the zoo and pins its set, with the set file's hash
    record = load_datasets(board)[accepted.registered_dataset.dataset_hash]
    recorded = json.loads(honest.read_text())["dataset"]["split_set_sha256"]
    assert record.split_set_files == {"nfn": recorded}

    edited = tmp_path / "edited"
    shutil.copytree(imported, edited)
    manifest = json.loads((edited / "manifest.json").read_text())
    described = next(iter(manifest["configs"].values()))["split_sets"]["nfn"]
    ids = json.loads((edited / described["path"]).read_text())
    ids["train"], ids["test"] = ids["train"] + ids["test"][:5], ids["test"][5:]  # five test rows trained on
    data = json.dumps(ids).encode()
    (edited / described["path"]).write_bytes(data)
    described.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    (edited / "manifest.json").write_text(json.dumps(manifest))
    leaked = tmp_path / "leaked.json"
    results = run_benchmark("generalization", "mlp", edited, None,
                            RunOptions([0, 1, 2], task_overrides={"splits": "nfn", "epochs": 1},
                                       placement=Placement(device="cpu"), progress=False),
                            leaked)
    assert results["dataset"]["dataset_hash"] == record.dataset_hash  # the hash alone cannot tell
    with pytest.raises(SubmissionRejected, match=r"split set 'nfn': the results read a set file with sha256 "
                                                  rf"{described['sha256'][:12]}…, the board pinned {recorded[:12]}…"):
        submit(leaked, board)
