"""No local path in an entry: the results' `dataset.path` of older files is dropped at submission (a
track's benchmark id stays), a `dataset.source` must be one of the source forms, and the sealed entries
that still hold a path show it on no page."""

from __future__ import annotations

import json
import shutil

import pytest

from leaderboards import OFFICIAL_ROOT, SubmissionRejected, render, submit
from leaderboards.audit import audit
from leaderboards.entries import content_hash


@pytest.mark.parametrize("path", ["/home/alice/zoos/cnn-local", "/work/me/runs/cnn-local", "runs/cnn-local",
                                  "C:\\Users\\alice\\zoo", None])
def test_an_entry_stores_no_dataset_path(root, write_results, make_data, path):
    data = make_data()  # on the board's known dataset: nothing to verify from a folder
    if path is not None:
        data["dataset"]["path"] = path  # as older versions wrote them (this one writes none)
    accepted = submit(write_results(data), root)
    stored = json.loads(accepted.path.read_text())
    assert "path" not in stored["results"]["dataset"]
    assert path is None or json.dumps(path) not in accepted.path.read_text()
    assert stored["submission"]["content_hash"] == content_hash(stored["results"])  # of what is stored
    assert [report.problems for report in audit(root)] == [()]


def test_a_new_zoo_is_verified_from_the_folder_given_not_a_recorded_one(root, local_dataset, write_results,
                                                                       make_data, hashes):
    data = make_data(dataset_hash=hashes["local"])
    data["dataset"]["source"] = "regenerated from spec cnn-mnist (tiny)"
    path = write_results(data)
    with pytest.raises(SubmissionRejected, match="the results name no folder; pass --dataset DIR"):
        submit(path, root)
    accepted = submit(path, root, local_dataset)
    assert accepted.registered_dataset.source == "regenerated from spec cnn-mnist (tiny)"
    assert str(local_dataset) not in accepted.path.read_text()


def test_a_tracks_benchmark_id_is_no_folder_and_stays(make_data):
    from leaderboards.submission import stored_results

    data = make_data()
    data["dataset"]["path"] = "track:norga/mnist-5tasks"
    assert stored_results(data) is data
    data["dataset"]["path"] = "/home/alice/zoo"  # negative control
    assert "path" not in stored_results(data)["dataset"]


@pytest.mark.parametrize("source, refused", [
    ("regenerated from spec cnn-mnist (bench)", False),
    ("org/cnn-zoo@" + "ab" * 20, False),
    ("imported from https://example.org/zoo", False),
    ("/home/alice/zoos/cnn", True),
    ("runs/cnn-mnist", True),
    ("local:/work/zoo", True),
])
def test_a_dataset_source_must_say_how_anyone_gets_the_bytes(root, write_results, make_data, source, refused):
    data = make_data()
    data["dataset"]["source"] = source
    path = write_results(data)
    if not refused:
        assert submit(path, root).path.is_file()
        return
    with pytest.raises(SubmissionRejected, match=r"dataset\.source: expected one of .* never a path"):
        submit(path, root)
    assert not (root / "entries").exists()


def test_a_sealed_entrys_path_is_shown_on_no_page(tmp_path):
    """The official board's entries sealed before: their `dataset.path` (runs/...) is in the file, on no page."""
    board = tmp_path / "board"
    entry = next((OFFICIAL_ROOT / "entries" / "generalization" / "391f00067b9d").glob("*.json"))
    recorded = json.loads(entry.read_text())["results"]["dataset"]["path"]
    assert recorded.startswith("runs/")  # what is there (sealed: never rewritten)
    target = board / entry.relative_to(OFFICIAL_ROOT)
    target.parent.mkdir(parents=True)
    for sidecar in (entry, entry.with_name(entry.stem + ".predictions.parquet")):
        shutil.copy(sidecar, target.parent / sidecar.name)
    shutil.copy(OFFICIAL_ROOT / "datasets.json", board / "datasets.json")
    shutil.copytree(OFFICIAL_ROOT / "pinned", board / "pinned")
    render(board, tmp_path / "site")
    shown = [page for page in (tmp_path / "site").iterdir() if page.suffix in (".md", ".html")]
    assert shown and not [page.name for page in shown if recorded in page.read_text()]
    assert recorded in target.read_text()  # negative control: the string is there to be found


@pytest.mark.parametrize("path, accepted", [("track:norga/default", True), (None, False), ("/home/alice/x", False)])
def test_a_tracks_results_name_their_benchmark_not_a_folder(root, write_results, make_data, path, accepted):
    from benchmarks.results import summarize
    from benchmarks.tasks.continual_learning import definition_hash

    definition = {"benchmark": {"source": "mnist", "tasks": 3, "train_per_class": 1, "test_per_class": 1}}
    data = make_data(dataset_hash=definition_hash(definition))
    for seed in data["per_seed"]:
        seed["metrics"] = {"final_average_accuracy": 0.5}
    data.update(task="continual-learning", model="finetune", model_config={}, summary=summarize(
        [seed["metrics"] for seed in data["per_seed"]]), task_config={
            "track": "norga", "profile": "default", "benchmark": definition["benchmark"], "definition": definition})
    data["dataset"].update(family="track", config="norga-default", **({"path": path} if path else {}))
    if accepted:
        stored = json.loads(submit(write_results(data), root).path.read_text())
        assert stored["results"]["dataset"]["path"] == path  # a benchmark's id, kept
        return
    with pytest.raises(SubmissionRejected, match="name their benchmark as dataset.path, track:<track>/<benchmark>"):
        submit(write_results(data), root)
