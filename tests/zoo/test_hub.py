"""Reading a zoo from a Hub dataset repo (`zoo.hub.resolve`), offline, from a pre-populated Hub cache.

The cache is laid out as huggingface_hub lays out a downloaded dataset repo
(`cache_dataset_repo` in tests/conftest.py) from the real tiny zoo's files, and the real
`snapshot_download` resolves it with HF_HUB_OFFLINE=1: nothing here is a stand-in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zoo.cli import main
from zoo.storage.folder import read_manifest
from zoo.hub.resolve import HubDataError, parse_repo_reference, resolve_data
from zoo.storage.integrity import verified_dataset_hash

REPO = "org/zoo"


@pytest.fixture
def cached(hub_cache, tiny_zoo, cache_dataset_repo) -> str:
    """The tiny zoo as the cached dataset repo org/zoo at main and tag v1; returns the commit sha."""
    return cache_dataset_repo(hub_cache, REPO, tiny_zoo, ("main", "v1"))


@pytest.mark.parametrize(("text", "expected"), [
    ("org/zoo", ("org/zoo", None)), ("org/zoo@v1", ("org/zoo", "v1")),
    ("my-org/zoo.v2@refs/pr/1", ("my-org/zoo.v2", "refs/pr/1")),
    ("zoo", None), ("runs/cnn/mnist", None), ("/abs/zoo", None), ("org/zoo@", None), ("org/zoo@a@b", None),
])
def test_repo_references_are_org_slash_name_with_an_optional_revision(text, expected):
    assert parse_repo_reference(text) == expected


def test_an_existing_local_path_wins_over_a_repo_of_that_name(tmp_path, monkeypatch):
    (tmp_path / "org" / "zoo").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert parse_repo_reference("org/zoo") is None
    source = resolve_data("org/zoo")
    assert source.folder == Path("org/zoo") and source.repo is None and source.revision is None


@pytest.mark.parametrize("revision", [None, "v1", "commit"])
def test_a_cached_repo_resolves_offline_to_its_snapshot_and_commit(cached, hub_cache, tiny_zoo, revision):
    revision = cached if revision == "commit" else revision
    source = resolve_data(REPO if revision is None else f"{REPO}@{revision}")
    assert source.repo == REPO and source.revision == cached
    assert source.folder == hub_cache / "datasets--org--zoo" / "snapshots" / cached
    assert read_manifest(source.folder) == read_manifest(tiny_zoo)
    assert verified_dataset_hash(source.folder) == verified_dataset_hash(tiny_zoo)  # every shard checked


def test_an_unknown_revision_offline_is_one_line_naming_it(cached):
    with pytest.raises(HubDataError) as caught:
        resolve_data(f"{REPO}@v9")
    message = str(caught.value)
    assert "\n" not in message and "org/zoo@v9" in message and "'v9'" in message
    assert "HF_HUB_OFFLINE=1" in message and "not in the Hugging Face cache" in message


def test_an_uncached_repo_offline_is_one_line_naming_it(hub_cache):
    with pytest.raises(HubDataError, match=r"^org/other@main: revision 'main' of dataset repo org/other is not in"):
        resolve_data("org/other")


def test_a_snapshot_missing_a_shard_is_one_line_not_a_partial_zoo(cached, hub_cache, tiny_zoo):
    shard = read_manifest(tiny_zoo)["configs"]["cnn-mnist"]["files"][0]["path"]
    (hub_cache / "datasets--org--zoo" / "snapshots" / cached / shard).unlink()
    with pytest.raises(HubDataError, match=r"^org/zoo@v1: the cached snapshot .* is missing files"):
        resolve_data(f"{REPO}@v1")


def run_cli(cli, args: list[str], env: dict[str, str], cwd: Path):
    """`nfnzoo ARGS` in a fresh process (the session's forked CLI, tests/forked_cli.py)."""
    return cli.run(args, cwd=cwd, env=env, timeout=300)


def test_info_and_verify_accept_a_repo_id(cli, cached, offline_hf, tiny_zoo, tmp_path):
    info = run_cli(cli, ["info", f"{REPO}@v1"], offline_hf, tmp_path)
    assert info.returncode == 0, info.stderr
    assert f"dataset repo {REPO} at commit {cached}" in info.stderr
    assert f"dataset hash: {read_manifest(tiny_zoo)['configs']['cnn-mnist']['dataset_hash']}" in info.stdout
    report = tmp_path / "verify.json"
    verified = run_cli(cli, ["verify", "--data", REPO, "--json", str(report)], offline_hf, tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert "checked 3 shards, 18 rows" in verified.stdout and verified.stdout.strip().endswith("ok")
    assert json.loads(report.read_text())["revision"] == cached


def test_verify_of_an_unknown_revision_is_a_one_line_error(cli, cached, offline_hf, tmp_path):
    result = run_cli(cli, ["verify", f"{REPO}@v9"], offline_hf, tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("nfnzoo verify: error: org/zoo@v9: revision 'v9'")


def test_info_takes_the_zoo_once(tiny_zoo, capsys):
    assert main(["info", str(tiny_zoo), "--data", str(tiny_zoo)]) == 1
    assert "not both" in capsys.readouterr().err
    assert main(["info"]) == 1
    assert "not neither" in capsys.readouterr().err
