"""Re-scoring: submissions from real runs on toy zoos, verified against the pinned test metadata,
and every kind of tampering rejected with its reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas
import pytest

from benchmarks.harness import predictions_path, run_benchmark
from benchmarks.results import summarize
from benchmarks.tasks import get_task_class
from leaderboards import SubmissionRejected, submit
from leaderboards.audit import audit
from leaderboards.datasets import load_datasets
from leaderboards.entries import load_entries, stored_predictions_path
from leaderboards.pinned import load_pinned, pin_dataset
from zoo.loader import read_metadata
from benchmarks.run_options import RunOptions

SEEDS = [0, 1, 2]
MLP = {"hidden_sizes": [4]}
INR_FAST = {"epochs": 1, "batch_size": 8}
# (task, data fixture, task overrides): each task's protocol filters, test augmentation included
RUNS = {
    "generalization": ("generalization", "tiny_zoo", {"epochs": 1}),
    "generalization-augmented": ("generalization", "tiny_zoo",
                                       {"epochs": 1, "augment_copies": 1,
                                        "augment_splits": ["train", "test"], "min_accuracy": 0.05}),
    "inr-classification": ("inr-classification", "tiny_inr_zoo_folder", INR_FAST),
    "inr-editing": ("inr-editing", "tiny_inr_zoo_folder", INR_FAST),
}


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """name -> (results file, dataset folder), from real 3-seed runs of a small MLP."""
    out = tmp_path_factory.mktemp("rescore_runs")
    made = {}
    for name, (task, fixture, overrides) in RUNS.items():
        folder = request.getfixturevalue(fixture)
        path = out / name / "mlp.json"
        run_benchmark(task, "mlp", folder, None,
                      RunOptions(SEEDS, model_overrides=MLP, task_overrides=overrides, progress=False), path)
        made[name] = (path, folder)
    return made


def _copy(results: Path, tmp_path: Path) -> Path:
    """A writable copy of a results file and its predictions sidecar."""
    folder = tmp_path / "submission"
    folder.mkdir(exist_ok=True)
    shutil.copy(results, folder / results.name)
    shutil.copy(predictions_path(results), folder / predictions_path(results).name)
    return folder / results.name


@pytest.mark.parametrize("name", list(RUNS))
def test_the_board_lists_exactly_the_rows_and_targets_the_run_scored(runs, name):
    results_path, folder = runs[name]
    results = json.loads(results_path.read_text())
    task = get_task_class(results["task"])
    expected = task.test_targets(read_metadata(folder, None, "test"), results["task_config"])
    table = pandas.read_csv(predictions_path(results_path))
    for seed in SEEDS:
        rows = table[table["seed"] == seed].set_index("model_id")
        assert sorted(rows.index) == sorted(expected["model_id"])
        if results["task"] != "inr-editing":  # its targets are renders' errors, not metadata
            assert rows.loc[expected["model_id"], "target"].tolist() == expected["target"].tolist()
    if name == "generalization-augmented":
        assert any("~1" in model_id for model_id in expected["model_id"])


@pytest.mark.parametrize("name", list(RUNS))
def test_a_submission_with_predictions_is_re_scored_pinned_and_verified(runs, name, tmp_path):
    results_path, folder = runs[name]
    board = tmp_path / "board"
    accepted = submit(_copy(results_path, tmp_path), board, folder)
    assert accepted.verified and accepted.rescoring.startswith("re-scored")
    record = load_datasets(board)[accepted.registered_dataset.dataset_hash]
    assert record.test_metadata == f"pinned/{record.dataset_hash[:12]}.test.parquet"
    assert load_pinned(board, record).equals(read_metadata(folder, None, "test"))
    (_, entry), = load_entries(board)
    assert entry.submission.verified and stored_predictions_path(accepted.path).is_file()
    assert [(a.verified, a.problems) for a in audit(board, require_verified=True)] == [(True, ())]
    assert "equals the test split" in pin_dataset(board, folder)  # pinning again checks, writes nothing new


def _tamper(results_path: Path, tmp_path: Path, edit_results=None, edit_predictions=None) -> Path:
    path = _copy(results_path, tmp_path)
    data = json.loads(path.read_text())
    if edit_results:
        edit_results(data)
        data["summary"] = summarize([entry["metrics"] for entry in data["per_seed"]])  # arithmetic stays right
        path.write_text(json.dumps(data))
    if edit_predictions:
        sidecar = predictions_path(path)
        table = pandas.read_csv(sidecar, dtype={"model_id": str})
        edit_predictions(table).to_csv(sidecar, index=False)
    return path


def _rejected(path: Path, board: Path, folder: Path) -> list[str]:
    with pytest.raises(SubmissionRejected) as error:
        submit(path, board, folder)
    assert not (board / "entries").exists()  # nothing written
    return error.value.problems


def test_tampered_metrics_are_rejected_with_the_recomputed_value(runs, tmp_path):
    results_path, folder = runs["generalization"]

    def inflate(data):
        data["per_seed"][1]["metrics"]["kendall_tau"] += 0.01

    problems = _rejected(_tamper(results_path, tmp_path, inflate), tmp_path / "board", folder)
    assert len(problems) == 1 and "seed 1: kendall_tau is reported as" in problems[0]
    assert "re-score to" in problems[0] and "pinned targets" in problems[0]


def test_tampered_predictions_are_rejected(runs, tmp_path):
    results_path, folder = runs["inr-classification"]

    def flip(table):  # one row's predicted class turned right if it was wrong, wrong if it was right
        first = table.index[table["seed"] == 2][0]
        right = table.loc[first, "prediction"] == table.loc[first, "target"]
        table.loc[first, "prediction"] = (table.loc[first, "target"] + right) % 10
        return table

    problems = _rejected(_tamper(results_path, tmp_path, edit_predictions=flip), tmp_path / "board", folder)
    assert len(problems) == 1 and problems[0].startswith("seed 2: accuracy is reported as")


@pytest.mark.parametrize("edit, reason", [
    (lambda t: t.drop(t.index[t["seed"] == 0][:2]), "seed 0: the predicted model_ids are not the test split's"),
    (lambda t: pandas.concat([t, t.iloc[[0]].assign(model_id="not-a-test-row")]), "not test rows 1 (not-a-test-row)"),
    (lambda t: pandas.concat([t, t.iloc[[0]]]), "seed 0: the predictions repeat model_ids"),
    (lambda t: pandas.concat([t, t.iloc[[0]].assign(seed=7)]), "seeds [7] that the results do not list"),
    (lambda t: t.assign(prediction=t["prediction"].astype(object).where(t.index != 3, "nan")),
     "prediction must be a finite number; row(s) [3]"),
    (lambda t: t.rename(columns={"prediction": "guess"}), "expected the columns ['seed', 'model_id', 'prediction']"),
])
def test_predictions_that_are_not_exactly_the_test_rows_are_rejected(runs, tmp_path, edit, reason):
    results_path, folder = runs["generalization"]
    problems = _rejected(_tamper(results_path, tmp_path, edit_predictions=edit), tmp_path / "board", folder)
    assert any(reason in problem for problem in problems), problems


def test_editing_is_re_scored_as_the_mean_of_the_submitted_errors(runs, tmp_path):
    results_path, folder = runs["inr-editing"]

    def shift(table):
        table.loc[table["seed"] == 0, "prediction"] *= 0.5  # a better score than the run got
        return table

    problems = _rejected(_tamper(results_path, tmp_path, edit_predictions=shift), tmp_path / "board", folder)
    assert len(problems) == 1 and problems[0].startswith("seed 0: mse is reported as")


def test_without_predictions_an_entry_is_accepted_unverified(runs, tmp_path):
    results_path, folder = runs["generalization"]
    path = _copy(results_path, tmp_path)
    data = json.loads(path.read_text())
    data["predictions"] = None
    path.write_text(json.dumps(data))
    accepted = submit(path, tmp_path / "board", folder)
    assert not accepted.verified and "no predictions file" in accepted.rescoring
    (report,) = audit(tmp_path / "board")
    assert not report.verified and report.problems == ()
    (report,) = audit(tmp_path / "board", require_verified=True)
    assert "unverified" in report.problems[0]


def test_a_hand_edited_entry_fails_the_audit(runs, tmp_path):
    results_path, folder = runs["generalization"]
    board = tmp_path / "board"
    accepted = submit(_copy(results_path, tmp_path), board, folder)
    assert audit(board)[0].problems == ()
    entry = json.loads(accepted.path.read_text())

    edited = json.loads(json.dumps(entry))
    edited["results"]["per_seed"][0]["metrics"]["kendall_tau"] = 0.99
    accepted.path.write_text(json.dumps(edited))
    problems = audit(board)[0].problems
    assert any("content hash changed" in p for p in problems)
    assert any("seed 0: kendall_tau is reported as 0.99" in p for p in problems)
    accepted.path.write_text(json.dumps(entry))

    stored = stored_predictions_path(accepted.path)
    original = stored.read_bytes()
    table = pandas.read_parquet(stored)
    table.loc[0, "prediction"] += 0.5
    table.to_parquet(stored)
    problems = audit(board)[0].problems
    assert any("the predictions were changed" in p for p in problems)
    stored.write_bytes(original)

    record = next(iter(load_datasets(board).values()))
    pinned = board / record.test_metadata
    pinned.write_bytes(pinned.read_bytes() + b"\0")
    assert any("the pinned test metadata was changed" in p for p in audit(board)[0].problems)


def test_a_known_dataset_without_pinned_metadata_gives_an_unverified_entry_until_pinned(runs, tmp_path):
    results_path, folder = runs["generalization"]
    board = tmp_path / "board"
    first = submit(_copy(results_path, tmp_path), board, folder)  # registers and pins the dataset
    data = json.loads((board / "datasets.json").read_text())
    data["datasets"][0].update(test_metadata=None, test_metadata_sha256=None)
    (board / "datasets.json").write_text(json.dumps(data))
    shutil.rmtree(board / "entries")
    again = submit(_copy(results_path, tmp_path), board)  # no --dataset: nothing to pin from
    assert not again.verified and "pass --dataset DIR" in again.rescoring
    assert first.entry_id == again.entry_id
    assert "pinned" in pin_dataset(board, folder)
    assert load_datasets(board)[first.registered_dataset.dataset_hash].test_metadata is not None
