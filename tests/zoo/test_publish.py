"""Publishing: verify first, then one commit of exactly the dataset files, merged and tagged.

The Hub client is the one stand-in in this suite (`api`, `repo` in tests/conftest.py): an autospec
of `huggingface_hub.HfApi`, so a call with a wrong signature still fails. Its methods are backed
by `SimulatedRepo`, a folder
that applies the commit operations the client receives the way the Hub does (a delete of a
missing file or a stale parent commit is refused), and what the repo then holds must load
with `datasets` on its own, offline.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete

from zoo.cli import main
from zoo.storage.folder import MANIFEST, read_manifest, save_spec
from zoo.dataset.pack import pack
from zoo.storage.integrity import release_hash as content_hash
from zoo.hub.publish import PublishError, publish, release_tag
from zoo.planning.spec import spec_from_data

CONFIG = "cnn-mnist"


def listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def shards_of(folder: Path, config: str = CONFIG) -> set[str]:
    return {f["path"] for f in read_manifest(folder)["configs"][config]["files"]}


def repacked(tiny_zoo: Path, target: Path, *, name: str = CONFIG, shard_bytes: int | None = None) -> Path:
    """The tiny zoo's staged checkpoints packed again into `target`: as config `name`, in shards of
    about `shard_bytes` (more shards than the tiny zoo's one per split). Real `pack`, no training."""
    shutil.copytree(tiny_zoo / "staging", target / "staging", copy_function=shutil.copyfile)
    data = json.loads((tiny_zoo / "specs" / f"{CONFIG}.json").read_text())
    save_spec(spec_from_data({**data, "name": name}, "tests/zoo/test_publish.py"), target)
    pack(target, **({"max_shard_bytes": shard_bytes} if shard_bytes else {}))
    return target


def row_counts(seen: dict) -> dict[str, int]:
    return {split: got["rows"] for split, got in seen["splits"].items()}


def test_publish_creates_the_repo_and_sends_one_commit_of_exactly_the_dataset_files(tiny_zoo, api, repo):
    published = publish(tiny_zoo, "org/zoo", api=api, private=True)
    api.create_repo.assert_called_once_with(repo_id="org/zoo", repo_type="dataset", exist_ok=True, private=True)
    assert [c[0] for c in api.method_calls] == [  # the repo exists before it is read, read before the commit
        "create_repo", "repo_info", "list_repo_files", "create_commit", "list_repo_refs", "create_tag"]
    api.upload_folder.assert_not_called()  # it may split a large folder into several commits
    (head, operations), = repo.commits
    kwargs = api.create_commit.call_args.kwargs
    assert kwargs["repo_type"] == "dataset" and kwargs["revision"] is None and kwargs["parent_commit"] == "0" * 40
    assert "3 shards, 18 checkpoints" in kwargs["commit_message"]
    assert all(isinstance(op, CommitOperationAdd) for op in operations)  # nothing to delete in a new repo
    assert sorted(op.path_in_repo for op in operations) == sorted({"README.md", MANIFEST} | shards_of(tiny_zoo))
    files = listing(tiny_zoo)
    assert any(f.startswith("staging/") for f in files) and any(f.startswith("specs/") for f in files)
    for name in repo.files() - {".gitattributes"}:  # the folder's own bytes, card and manifest included
        assert (repo.root / name).read_bytes() == (tiny_zoo / name).read_bytes(), name
    assert published.commit == head and published.commit_url.endswith(head)
    assert published.configs == (CONFIG,) and published.kept == published.replaced == published.deleted == ()


def test_the_repo_alone_loads_with_datasets(tiny_zoo, api, repo, read_with_datasets):
    publish(tiny_zoo, "org/zoo", api=api)
    seen = read_with_datasets(repo.root, CONFIG)
    assert row_counts(seen) == read_manifest(tiny_zoo)["configs"][CONFIG]["splits"]


def test_a_republish_with_fewer_shards_deletes_the_stale_ones_in_the_same_commit(
        tiny_zoo, tmp_path, api, repo, read_with_datasets):
    many = repacked(tiny_zoo, tmp_path / "many", shard_bytes=2**10)  # a shard per checkpoint or so
    assert len(shards_of(many)) > len(shards_of(tiny_zoo))
    publish(many, "org/zoo", api=api)
    assert shards_of(many) <= repo.files()
    published = publish(tiny_zoo, "org/zoo", api=api)  # re-pack with the default shard size: 3 shards

    (_, operations) = repo.commits[-1]
    deleted = {op.path_in_repo for op in operations if isinstance(op, CommitOperationDelete)}
    added = {op.path_in_repo for op in operations if isinstance(op, CommitOperationAdd)}
    assert deleted == shards_of(many) - shards_of(tiny_zoo) and not deleted & added
    assert set(published.deleted) == deleted and published.replaced == (CONFIG,)
    assert {f for f in repo.files() if f.startswith("data/")} == shards_of(tiny_zoo)  # exactly the manifest's
    seen = read_with_datasets(repo.root, CONFIG)  # the card's glob reads no old shard: no duplicated rows
    splits = read_manifest(tiny_zoo)["configs"][CONFIG]["splits"]
    assert row_counts(seen) == splits and sum(len(set(s["model_ids"])) for s in seen["splits"].values()) == 18


def test_configs_already_in_the_repo_are_kept_and_merged_into_card_and_manifest(
        tiny_zoo, tmp_path, api, repo, read_with_datasets):
    other = repacked(tiny_zoo, tmp_path / "other", name="cnn-mnist-b")
    publish(tiny_zoo, "org/zoo", api=api)
    published = publish(other, "org/zoo", api=api)
    assert published.configs == (CONFIG, "cnn-mnist-b") and published.kept == (CONFIG,)
    (_, operations) = repo.commits[-1]
    assert not any(isinstance(op, CommitOperationDelete) for op in operations)  # the other config's shards stay
    merged = read_manifest(repo.root)
    assert merged["configs"] == {**read_manifest(tiny_zoo)["configs"], **read_manifest(other)["configs"]}
    assert {f for f in repo.files() if f.startswith("data/")} == shards_of(tiny_zoo) | shards_of(other, "cnn-mnist-b")
    for config, folder in [(CONFIG, tiny_zoo), ("cnn-mnist-b", other)]:
        seen = read_with_datasets(repo.root, config)
        assert row_counts(seen) == read_manifest(folder)["configs"][config]["splits"], config
    from zoo.dataset.verify import verify

    assert verify(repo.root).ok  # the merged repo is a valid zoo folder: card, manifest and shards agree


def test_a_folders_version_of_a_config_replaces_the_repos(tiny_zoo, tmp_path, api, repo):
    both = repacked(tiny_zoo, tmp_path / "both", name="cnn-mnist-b")
    publish(both, "org/zoo", api=api)
    publish(tiny_zoo, "org/zoo", api=api)
    many = repacked(tiny_zoo, tmp_path / "many", shard_bytes=2**10)
    published = publish(many, "org/zoo", api=api)
    assert published.replaced == (CONFIG,) and published.kept == ("cnn-mnist-b",)
    assert read_manifest(repo.root)["configs"][CONFIG] == read_manifest(many)["configs"][CONFIG]
    assert {f for f in repo.files() if f.startswith(f"data/{CONFIG}/")} == shards_of(many)
    assert shards_of(both, "cnn-mnist-b") <= repo.files()


def test_a_repo_with_a_foreign_card_is_refused_before_any_commit(tiny_zoo, api, repo):
    (repo.root / "README.md").write_text("# someone else's dataset\n")
    with pytest.raises(PublishError, match=r"^org/zoo: the repo has a README.md but no manifest.json"):
        publish(tiny_zoo, "org/zoo", api=api)
    api.create_commit.assert_not_called()


def test_a_manifest_of_another_format_is_refused_before_any_commit(tiny_zoo, api, repo):
    publish(tiny_zoo, "org/zoo", api=api)
    manifest = read_manifest(repo.root)
    (repo.root / MANIFEST).write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(PublishError, match="format_version 99, the folder's 1"):
        publish(tiny_zoo, "org/zoo", api=api)
    assert len(repo.commits) == 1


def test_the_commit_is_tagged_with_the_version_and_the_content_hash(tiny_zoo, tmp_path, api, repo, capsys):
    manifest = read_manifest(tiny_zoo)
    published = publish(tiny_zoo, "org/zoo", api=api)
    tag = f"v{manifest['package_version']}-{manifest['configs'][CONFIG]['dataset_hash'][:8]}"
    assert published.tag == tag and repo.tags == {tag: published.commit}
    api.create_tag.assert_called_once_with("org/zoo", tag=tag, revision=published.commit, repo_type="dataset",
                                           tag_message=f"nfnzoo release {tag}")
    again = publish(tiny_zoo, "org/zoo", api=api)  # the same data again: the tag is kept, not refused
    assert again.tag == tag and again.tag_existed and repo.tags == {tag: published.commit}
    assert f'revision="{tag}"' in "\n".join(again.lines()) and f"--data org/zoo@{tag}" in "\n".join(again.lines())


def test_the_combined_hash_of_several_configs_ignores_their_order_and_origin():
    entries = {"a": {"dataset_hash": "1" * 64}, "b": {"dataset_hash": "2" * 64}}
    one = {"package_version": "0.1.0", "configs": entries}
    other = {"package_version": "0.1.0", "configs": dict(reversed(list(entries.items())))}
    assert content_hash(one) == content_hash(other) != content_hash({**one, "configs": {"a": entries["a"]}})
    assert release_tag(one) == f"v0.1.0-{content_hash(one)[:8]}"
    assert content_hash({**one, "configs": {"a": entries["a"]}}) == "1" * 64
    assert content_hash({**one, "configs": {**entries, "b": {"dataset_hash": "3" * 64}}}) != content_hash(one)


def test_the_cli_prints_the_repo_the_commit_and_the_tag(tiny_zoo, api, repo, monkeypatch, capsys):
    import zoo.hub.publish

    real = zoo.hub.publish.publish
    monkeypatch.setattr(zoo.hub.publish, "publish", lambda *a, **k: real(*a, **{**k, "api": api}))
    assert main(["publish", str(tiny_zoo), "--repo", "org/zoo"]) == 0
    out = capsys.readouterr().out
    tag = next(iter(repo.tags))
    assert "-> org/zoo" in out and f"commit {repo.head}" in out and f"tag {tag}" in out
    assert f'datasets.load_dataset("org/zoo", "{CONFIG}", revision="{tag}")' in out


@pytest.mark.parametrize("repo_id", ["zoo", "org/", "/zoo", "org/zoo/extra", ""])
def test_bad_repo_id_fails_before_any_client_call(tiny_zoo, api, repo_id):
    with pytest.raises(PublishError, match="must be ORG/NAME"):
        publish(tiny_zoo, repo_id, api=api)
    assert api.method_calls == []


def test_unverifiable_folder_fails_before_any_client_call(tiny_zoo_copy, api):
    shard = tiny_zoo_copy / read_manifest(tiny_zoo_copy)["configs"][CONFIG]["files"][0]["path"]
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(PublishError, match=r"does not verify(.|\n)*" + shard.name):
        publish(tiny_zoo_copy, "org/zoo", api=api)
    assert api.method_calls == []


def test_unpacked_folder_fails_before_any_client_call(tmp_path, api):
    with pytest.raises(PublishError, match="no manifest.json"):
        publish(tmp_path, "org/zoo", api=api)
    assert api.method_calls == []


def test_cli_publish_with_a_bad_repo_is_a_clean_error(tiny_zoo, capsys):
    assert main(["publish", str(tiny_zoo), "--repo", "not-a-repo"]) == 1
    assert "nfnzoo publish: error: --repo must be ORG/NAME, got 'not-a-repo'" in capsys.readouterr().err


def test_leftovers_of_an_interrupted_pack_are_not_uploaded(tiny_zoo_copy, api, repo):
    shard = read_manifest(tiny_zoo_copy)["configs"][CONFIG]["files"][0]["path"]
    leftover = tiny_zoo_copy / "data" / f".{CONFIG}.building" / Path(shard).name
    leftover.parent.mkdir()
    shutil.copyfile(tiny_zoo_copy / shard, leftover)
    publish(tiny_zoo_copy, "org/zoo", api=api)
    assert repo.files() == {".gitattributes", "README.md", MANIFEST} | shards_of(tiny_zoo_copy)


def publish_in_a_subprocess(folder: Path, env: dict[str, str]):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "zoo.cli", "publish", str(folder), "--repo", "org/zoo"],
                          env=env, capture_output=True, text=True, timeout=120)


def test_offline_mode_is_one_line_naming_it_and_the_token(tiny_zoo, offline_hf):
    result = publish_in_a_subprocess(tiny_zoo, offline_hf)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "offline mode is on (HF_HUB_OFFLINE=1)" in line and "HF_TOKEN" in line and "hf auth login" in line


def test_no_token_and_an_unreachable_hub_are_one_line_each(tiny_zoo, offline_hf):
    # the loopback port 9 (discard) refuses connections: a Hub that cannot be reached, reached for here only
    online = {**offline_hf, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}
    online.pop("HF_TOKEN", None)
    result = publish_in_a_subprocess(tiny_zoo, online)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "no Hugging Face token found" in line and "HF_TOKEN" in line
    result = publish_in_a_subprocess(tiny_zoo, {**online, "HF_TOKEN": "hf_not_a_real_token"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "cannot reach the Hugging Face Hub at http://127.0.0.1:9" in line and "ConnectError" in line


def test_an_imported_zoos_split_sets_are_published_and_load_from_the_repo(tmp_path, api, repo):
    """The split-set files travel with their shards (and a republish does not delete them), so the papers'
    splits load from the repo as from the folder."""
    from small_cnn_fixture import make_zoo
    from zoo.imports import get_importer
    from zoo.split_set_loader import load_split_set

    make_zoo(tmp_path / "src", runs=8, steps=(0, 86))
    get_importer("small-cnn-zoo")(tmp_path / "src", tmp_path / "zoo")
    entry = read_manifest(tmp_path / "zoo")["configs"]["small-cnn-zoo-mnist"]
    split_set = entry["split_sets"]["nfn"]["path"]
    publish(tmp_path / "zoo", "org/zoo", api=api)
    publish(tmp_path / "zoo", "org/zoo", api=api)  # again: nothing of it deleted
    assert split_set in repo.files()
    (_, operations) = repo.commits[-1]
    assert not any(isinstance(op, CommitOperationDelete) for op in operations)
    theirs, ours = load_split_set(repo.root, None, "nfn"), load_split_set(tmp_path / "zoo", None, "nfn")
    assert all(theirs[s].metadata.equals(ours[s].metadata) for s in ("train", "validation", "test"))
