"""The harness: seeds, measurements, the results file and its predictions sidecar."""

from __future__ import annotations

import json

import pandas
import pytest

import zoo
from zoo.storage.integrity import dataset_hash_of
from benchmarks.harness import load_splits, predictions_path, run_benchmark, run_on_splits
from benchmarks.results import load_results, summarize
from nfn_models import model_config
from zoo.validation.schema import SchemaError, to_data
from benchmarks.run_options import RunOptions


def test_results_file_matches_the_documented_schema(results_path, dataset_info, fast_task):
    results = load_results(results_path)  # validates every key and type
    data = json.loads(results_path.read_text())
    assert data["schema_version"] == 1
    assert (data["task"], data["model"]) == ("generalization", "statnn")
    assert data["model_config"] == to_data(model_config("statnn"))
    assert data["task_config"]["epochs"] == fast_task["epochs"]
    assert data["dataset"] == dataset_info
    assert data["seeds"] == [0, 1, 2]
    assert [entry["seed"] for entry in data["per_seed"]] == [0, 1, 2]
    assert data["package_version"] == zoo.__version__
    assert data["hardware"]["device"] == "cpu"
    assert data["created"].endswith("+00:00")
    assert results.num_params > 0
    for entry in results.per_seed:
        assert set(entry.metrics) == {"kendall_tau", "r2", "rmse"}
        assert entry.train_time_s > 0
        assert entry.peak_memory_mb > 10  # the process's peak RSS
        assert 1 <= entry.selection["epoch"] <= fast_task["epochs"]


def test_a_callers_folder_is_never_written_into_the_results(splits, dataset_info, tmp_path):
    """A dataset description that names the folder (an older caller's `path`): the results drop it."""
    out = tmp_path / "r.json"
    results = run_on_splits("generalization", "mlp", splits, {**dataset_info, "path": "/home/me/zoo"},
                            RunOptions([0], model_overrides={"hidden_sizes": [4]}, task_overrides={"epochs": 1},
                                       progress=False),
                            out)
    assert results["dataset"] == dataset_info and "/home/me" not in out.read_text()
    assert load_results(out).dataset.path is None


def test_summary_is_the_mean_and_sample_std_of_the_seeds(results_path):
    data = json.loads(results_path.read_text())
    expected = summarize([entry["metrics"] for entry in data["per_seed"]])
    assert set(data["summary"]) == set(expected) == {"kendall_tau", "r2", "rmse"}
    for name, statistics in expected.items():
        assert data["summary"][name] == pytest.approx(statistics)
    taus = [entry["metrics"]["kendall_tau"] for entry in data["per_seed"]]
    assert data["summary"]["kendall_tau"]["std"] == pytest.approx(pandas.Series(taus).std(ddof=1))


def test_predictions_sidecar(results_path, splits):
    data = json.loads(results_path.read_text())
    sidecar = predictions_path(results_path)
    assert sidecar.name == "statnn.predictions.csv" == data["predictions"]
    table = pandas.read_csv(sidecar)
    assert list(table.columns) == ["seed", "model_id", "target", "prediction"]
    ok_test_rows = int((splits["test"].metadata["status"] == "ok").sum())
    assert table.groupby("seed").size().to_dict() == {0: ok_test_rows, 1: ok_test_rows, 2: ok_test_rows}


def test_files_are_written_atomically_and_progress_goes_to_stderr(splits, dataset_info, tmp_path, capsys):
    out = tmp_path / "deep" / "mlp.json"
    run_on_splits("generalization", "mlp", splits, dataset_info,
                  RunOptions([3, 4], model_overrides={"hidden_sizes": [8]}, task_overrides={"epochs": 1}), out)
    assert sorted(p.name for p in out.parent.iterdir()) == ["mlp.json", "mlp.predictions.csv"]  # no temporaries
    stderr = capsys.readouterr().err
    assert "[1/2] seed3: kendall_tau=" in stderr and "[2/2] seed4: " in stderr
    assert f"wrote {out}" in stderr


def test_without_an_output_path_nothing_is_written(splits, dataset_info, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = run_on_splits("generalization", "mlp", splits, dataset_info,
                            RunOptions([0], model_overrides={"hidden_sizes": [8]}, task_overrides={"epochs": 1},
                                       progress=False))
    assert results["predictions"] is None and results["summary"]["kendall_tau"]["std"] == 0.0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seeds, message", [([], "at least one seed"), ([1, 1, 2], "unique"), ([0.5], "integers")])
def test_bad_seeds_are_refused(splits, dataset_info, seeds, message):
    with pytest.raises(ValueError, match=message):
        run_on_splits("generalization", "statnn", splits, dataset_info, RunOptions(seeds))


def test_bad_overrides_fail_before_loading_data(tmp_path):
    missing = tmp_path / "no-such-dataset"
    with pytest.raises(SchemaError, match="epochz"):
        run_benchmark("generalization", "statnn", missing, None, RunOptions([0], task_overrides={"epochz": 1}))
    with pytest.raises(SchemaError, match="widths"):
        run_benchmark("generalization", "statnn", missing, None, RunOptions([0], model_overrides={"widths": 1}))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_benchmark("generalization", "statnn", missing, None, RunOptions([0]))


def test_load_splits_reads_the_manifest(dataset_folder, splits):
    loaded, dataset = load_splits(dataset_folder, None)
    assert loaded == {"train": splits["train"], "validation": splits["validation"], "test": splits["test"]}
    assert dataset == {"config": "synthetic", "dataset_hash": dataset_hash_of([]), "family": "cnn", "repo": None,
                       "revision": None, "source": None}  # a folder, not a Hub repo; never its path


def test_load_splits_config_errors(tmp_path, write_manifest):
    folder = write_manifest(tmp_path / "two", {"a": "1" * 64, "b": "2" * 64})
    with pytest.raises(ValueError, match="choose one with --config"):
        load_splits(folder, None)
    with pytest.raises(ValueError, match="no config 'c'"):
        load_splits(folder, "c")


def test_run_benchmark_end_to_end(dataset_folder, tmp_path):
    out = tmp_path / "results" / "statnn.json"
    results = run_benchmark("generalization", "statnn", dataset_folder, "synthetic",
                            RunOptions([0, 1, 2], task_overrides={"epochs": 1}, progress=False), out)
    assert load_results(out).dataset.dataset_hash == dataset_hash_of([])
    assert json.loads(out.read_text()) == results
    assert predictions_path(out).exists()


def test_the_ranking_ceiling_is_recorded_per_seed(results_path):
    for entry in load_results(results_path).per_seed:
        assert set(entry.ranking) == {"kendall_tau_ceiling", "distinct_targets", "tied_pair_fraction", "num_targets"}
        assert 0 < entry.ranking["kendall_tau_ceiling"] <= 1
