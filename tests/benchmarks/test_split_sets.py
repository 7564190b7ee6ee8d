"""A benchmark task on a named split set (`--set task.splits=nfn`): the set's rows, recorded in the results."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "zoo"))  # the hand-made Small CNN Zoo fixture

from small_cnn_fixture import make_zoo  # noqa: E402


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
    from zoo.loader import load_split_set

    results = run_benchmark("generalization", "statnn", imported, None, [0], tmp_path / "r.json",
                            task_overrides={"splits": "nfn", "epochs": 1}, device="cpu", progress=False)
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
        run_benchmark("generalization", "statnn", imported, None, [0], None,
                      task_overrides={"splits": "paper", "epochs": 1}, device="cpu", progress=False)
