"""End to end on a real packed zoo (the session's `tiny_zoo`, tests/conftest.py): the real
loader, the harness, the plot, and a leaderboard submission verified against the manifest."""

from __future__ import annotations

import json

import pytest

from benchmarks.harness import run_benchmark
from benchmarks.plots import scatter
from leaderboards import SubmissionRejected, render, submit
from zoo.loader import dataset_hash, load_split
from benchmarks.run_options import RunOptions


def test_benchmark_and_submit_a_real_zoo(tiny_zoo, tmp_path):
    out = tmp_path / "results" / "statnn.json"
    results = run_benchmark("generalization", "statnn", tiny_zoo, None,
                            RunOptions([0, 1, 2], model_overrides={"hidden_sizes": [16]},
                                       task_overrides={"epochs": 2, "batch_size": 4}, progress=False),
                            out)
    assert results["dataset"]["config"] == "cnn-mnist" and results["dataset"]["family"] == "cnn"
    assert results["dataset"]["dataset_hash"] == dataset_hash(tiny_zoo, None)
    test_ids = set(load_split(tiny_zoo, None, "test").metadata.query("status == 'ok'")["model_id"])
    predictions = (tmp_path / "results" / "statnn.predictions.csv").read_text().splitlines()
    assert len(predictions) == 1 + 3 * len(test_ids)
    assert json.loads(out.read_text())["num_params"] == results["num_params"] > 0
    for seed in results["per_seed"]:  # the learning curve: one validation score an epoch, the best one selected
        curve, selected = seed["curve"], seed["selection"]
        assert len(curve) == 2 and curve[selected["epoch"] - 1] == selected["validation_kendall_tau"] == max(curve)

    assert scatter([out], tmp_path / "scatter.png").stat().st_size > 0
    # the results name the bytes (hash and source), never the folder: submit verifies the zoo given to it
    assert "path" not in results["dataset"] and str(tiny_zoo) not in out.read_text()
    assert results["dataset"]["source"] == "regenerated from spec cnn-mnist (tiny)"
    with pytest.raises(SubmissionRejected, match=r"the results name no folder; pass --dataset DIR, the zoo's "
                                                  r"folder \(the run read regenerated from spec cnn-mnist \(tiny\)\)"):
        submit(out, tmp_path / "board")
    accepted = submit(out, tmp_path / "board", tiny_zoo)  # verified and registered
    assert accepted.registered_dataset.dataset_hash == results["dataset"]["dataset_hash"]
    assert str(tiny_zoo) not in accepted.path.read_text()
    assert "| 1 | statnn |" in render(tmp_path / "board", tmp_path / "site")
