"""Submitting: accepted entries as data files, datasets known or verified locally, duplicates."""

from __future__ import annotations

import json

import pytest

from leaderboards import OFFICIAL_ROOT, SubmissionRejected, submit
from leaderboards.datasets import load_datasets
from leaderboards.entries import content_hash, load_entries


def test_accepted_submission_is_stored_as_a_data_file(root, write_results, hashes):
    path = write_results(name="statnn.json")
    accepted = submit(path, root)
    data = json.loads(path.read_text())
    digest = content_hash(data)
    expected = root / "entries" / "generalization" / hashes["known"][:12] / f"statnn-{digest[:32]}.json"
    assert accepted.path == expected and accepted.entry_id == f"statnn-{digest[:32]}"
    assert accepted.registered_dataset is None
    entry = json.loads(expected.read_text())
    assert entry["results"] == data
    assert entry["submission"]["content_hash"] == digest
    assert entry["submission"]["source"] == "statnn.json"
    assert f"accepted statnn-{digest[:32]}" in accepted.describe()
    assert [e.submission.id for _, e in load_entries(root)] == [accepted.entry_id]


def test_a_rejection_lists_every_problem_and_writes_nothing(root, write_results, make_data, hashes):
    data = make_data(seeds=(0, 1), taus=(0.5, 0.6), dataset_hash="ee" * 32, dataset_path="nowhere")
    data["num_params"] = 0
    with pytest.raises(SubmissionRejected) as error:
        submit(write_results(data), root)
    problems = error.value.problems
    assert len(problems) == 3
    assert any("at least 3 seeds" in p for p in problems)
    assert any("num_params" in p for p in problems)
    assert any("not a known dataset" in p and "--dataset" in p for p in problems)
    assert "rejected (3 problems)" in str(error.value)
    assert not (root / "entries").exists()
    assert set(load_datasets(root)) == {hashes["known"]}


def test_unreadable_files_are_rejected(root, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SubmissionRejected, match="not valid JSON"):
        submit(bad, root)
    with pytest.raises(SubmissionRejected, match="no such results file"):
        submit(tmp_path / "missing.json", root)


def test_a_verified_local_dataset_is_registered(root, write_results, local_dataset, hashes):
    path = write_results(dataset_hash=hashes["local"], dataset_path=str(local_dataset))
    accepted = submit(path, root)
    record = accepted.registered_dataset
    assert record is not None and record.dataset_hash == hashes["local"]
    assert (record.name, record.config, record.family) == ("cnn-local", "cnn-mnist", "cnn")
    assert record.source == "regenerated from spec cnn-mnist (tiny)"  # its manifest's spec, never the folder's path
    assert load_datasets(root)[hashes["local"]] == record
    assert "registered dataset 'cnn-local'" in accepted.describe()
    assert str(local_dataset.parent) not in (root / "datasets.json").read_text()
    # now known: a second submission on it needs no folder
    submit(write_results(dataset_hash=hashes["local"], dataset_path="gone", seeds=(3, 4, 5)), root)


def test_the_dataset_option_overrides_the_recorded_path(root, write_results, local_dataset, hashes):
    path = write_results(dataset_hash=hashes["local"], dataset_path="runs/elsewhere")
    with pytest.raises(SubmissionRejected, match="no local dataset folder was found at runs/elsewhere"):
        submit(path, root)
    assert submit(path, root, dataset_dir=local_dataset).registered_dataset is not None


def test_a_local_dataset_with_another_hash_is_rejected(root, write_results, local_dataset, hashes):
    path = write_results(dataset_hash="33" * 32, dataset_path=str(local_dataset))
    with pytest.raises(SubmissionRejected, match=rf"has hash {hashes['local'][:12]}…, not the claimed 333333333333…"):
        submit(path, root)
    assert "33" * 32 not in load_datasets(root)


def test_a_known_hash_with_another_config_is_rejected(root, write_results, make_data):
    data = make_data()
    data["dataset"]["config"] = "cnn-cifar10"
    with pytest.raises(SubmissionRejected, match="known as config 'cnn-mnist'"):
        submit(write_results(data), root)


def test_duplicates_are_rejected(root, write_results, make_data):
    first = write_results(name="first.json")
    submit(first, root)
    with pytest.raises(SubmissionRejected, match="identical to the accepted entry"):
        submit(first, root)
    rerun = make_data(seeds=(2, 1, 0), taus=(0.7, 0.71, 0.72))  # same experiment, seeds reordered
    with pytest.raises(SubmissionRejected, match="same task, model, model config, task config, dataset and seeds"):
        submit(write_results(rerun), root)
    submit(write_results(seeds=(3, 4, 5)), root)  # new seeds: a new entry
    other_config = make_data(model_config={"hidden_sizes": [64], "activation": "relu", "dropout": 0.0,
                                           "out_features": 1})
    submit(write_results(other_config), root)  # another configuration of the model: a new entry
    other_protocol = make_data()
    other_protocol["task_config"] = {**other_protocol["task_config"], "subset": {"activation": "tanh"}}
    submit(write_results(other_protocol), root)  # the same model under another protocol: a new entry
    assert len(load_entries(root)) == 4


def test_a_corrupted_local_dataset_is_not_registered(root, write_results, local_dataset, hashes):
    shard = next((local_dataset / "data").rglob("*.parquet"))
    shard.write_bytes(b"shard bytez")  # same size, one byte changed: the manifest still claims the hash
    path = write_results(dataset_hash=hashes["local"], dataset_path=str(local_dataset))
    with pytest.raises(SubmissionRejected,
                       match=r"could not verify the dataset .*(sha256|xxh3_128) differs from the manifest"):
        submit(path, root)
    assert hashes["local"] not in load_datasets(root)


def test_submit_without_a_root_writes_to_the_users_own_board(write_results, local_dataset, hashes, tmp_path,
                                                              monkeypatch):
    official = {p: p.read_bytes() for p in OFFICIAL_ROOT.rglob("*") if p.is_file()}
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NFNZOO_LEADERBOARD", raising=False)
    accepted = submit(write_results(name="mine.json", dataset_hash=hashes["local"], dataset_path=str(local_dataset)))
    assert accepted.path.resolve().is_relative_to((tmp_path / "runs" / "leaderboard").resolve())
    assert {p: p.read_bytes() for p in OFFICIAL_ROOT.rglob("*") if p.is_file()} == official  # no tracked file edited
    monkeypatch.setenv("NFNZOO_LEADERBOARD", str(tmp_path / "elsewhere"))
    accepted = submit(write_results(name="again.json", dataset_hash=hashes["local"], dataset_path=str(local_dataset)))
    assert accepted.path.is_relative_to(tmp_path / "elsewhere")


def test_the_official_board_is_the_package_and_its_data_files_are_valid():
    assert OFFICIAL_ROOT.name == "leaderboards" and (OFFICIAL_ROOT / "SCHEMA.md").is_file()
    load_datasets(OFFICIAL_ROOT)  # raises on a malformed datasets.json
    for path, entry in load_entries(OFFICIAL_ROOT):  # every committed entry parses
        assert path.stem == entry.submission.id
