"""`bench run --data ORG/NAME[@REVISION]`: a Hub dataset repo resolved offline from the Hub
cache (laid out from the real tiny zoo's files by `cache_dataset_repo`, tests/conftest.py),
checked against its manifest, and recorded in the results with the repo and the commit."""

from __future__ import annotations

import json

import pytest

from benchmarks.harness import run_benchmark
from benchmarks.results import load_results
from leaderboards import submit
from zoo.cli import main
from zoo.storage.folder import read_manifest
from zoo.validation.schema import SchemaError
from benchmarks.run_options import RunOptions

REPO = "org/zoo"
FAST = {"epochs": 1, "batch_size": 4}


@pytest.fixture
def cached(hub_cache, tiny_zoo, cache_dataset_repo) -> str:
    return cache_dataset_repo(hub_cache, REPO, tiny_zoo, ("main", "v1"))


def test_a_benchmark_on_a_cached_repo_records_the_repo_and_the_commit(cached, tiny_zoo, tmp_path):
    out = tmp_path / "statnn.json"
    results = run_benchmark("generalization", "statnn", f"{REPO}@v1", None,
                            RunOptions([0, 1, 2], model_overrides={"hidden_sizes": [8]}, task_overrides=FAST,
                                       progress=False),
                            out)
    expected_hash = read_manifest(tiny_zoo)["configs"]["cnn-mnist"]["dataset_hash"]
    assert results["dataset"] == {"config": "cnn-mnist", "dataset_hash": expected_hash, "family": "cnn",
                                  "repo": REPO, "revision": cached, "source": f"{REPO}@{cached}"}
    loaded = load_results(out)
    assert loaded.dataset.repo == REPO and loaded.dataset.revision == cached

    accepted = submit(out, tmp_path / "board")  # verified at the recorded commit, registered as the pinned repo
    assert accepted.registered_dataset.source == f"{REPO}@{cached}"
    assert accepted.registered_dataset.dataset_hash == expected_hash


def test_a_local_folder_records_no_repo(tiny_zoo, tmp_path):
    results = run_benchmark("generalization", "statnn", tiny_zoo, None,
                            RunOptions([0], model_overrides={"hidden_sizes": [8]}, task_overrides=FAST, progress=False))
    assert results["dataset"]["repo"] is None and results["dataset"]["revision"] is None


def test_a_corrupted_cached_shard_fails_the_run_naming_it(cached, hub_cache, tiny_zoo, tmp_path):
    shard = read_manifest(tiny_zoo)["configs"]["cnn-mnist"]["files"][0]["path"]
    link = hub_cache / "datasets--org--zoo" / "snapshots" / cached / shard
    blob = link.resolve()
    blob.write_bytes(blob.read_bytes()[:-1] + b"\0")
    with pytest.raises(ValueError, match=rf"{link.name}: (sha256|xxh3_128) differs from the manifest"):
        run_benchmark("generalization", "statnn", f"{REPO}@v1", None,
                      RunOptions([0], model_overrides={"hidden_sizes": [8]}, task_overrides=FAST, progress=False))


def test_bench_run_with_an_unknown_revision_offline_is_one_line(cached, tmp_path, capsys):
    code = main(["bench", "run", "--task", "generalization", "--model", "statnn", "--data", f"{REPO}@v9",
                 "--seeds", "0", "--out", str(tmp_path / "r.json")])
    assert code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("nfnzoo bench: error: org/zoo@v9: revision 'v9' of dataset repo org/zoo is not in")
    assert not (tmp_path / "r.json").exists()


def test_results_without_repo_fields_still_validate_and_half_a_pin_does_not(results_path, tmp_path):
    data = json.loads(results_path.read_text())
    assert "repo" not in data["dataset"] and load_results(results_path).dataset.repo is None  # an old file
    half = tmp_path / "half.json"
    half.write_text(json.dumps({**data, "dataset": {**data["dataset"], "repo": REPO}}))
    with pytest.raises(SchemaError, match=r"dataset\.revision: expected `repo` and `revision` together"):
        load_results(half)
    short = tmp_path / "short.json"
    short.write_text(json.dumps({**data, "dataset": {**data["dataset"], "repo": REPO, "revision": "v1"}}))
    with pytest.raises(SchemaError, match=r"dataset\.revision: expected the 40-hex commit sha"):
        load_results(short)
