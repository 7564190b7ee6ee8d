"""Publishing: verify first, then create the dataset repo and upload exactly the dataset files.

The Hub client is the one stand-in in this suite: an autospec of `huggingface_hub.HfApi`, so a
call with a wrong signature still fails. What would be uploaded is computed with the Hub's own
pattern filter and must load with `datasets` on its own.
"""

from __future__ import annotations

import shutil
import types
from pathlib import Path
from unittest import mock

import huggingface_hub
import pytest
from huggingface_hub.utils import filter_repo_objects

from zoo.cli import main
from zoo.folder import MANIFEST, read_manifest
from zoo.publish import PublishError, publish

CONFIG = "cnn-mnist"
COMMIT_URL = "https://huggingface.co/datasets/org/zoo/commit/0123abcd"


@pytest.fixture
def api():
    fake = mock.create_autospec(huggingface_hub.HfApi, instance=True)
    fake.upload_folder.return_value = types.SimpleNamespace(commit_url=COMMIT_URL)
    return fake


def listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def uploaded(folder: Path, allow_patterns) -> set[str]:
    return set(filter_repo_objects(listing(folder), allow_patterns=allow_patterns))


def test_publish_creates_the_dataset_repo_and_uploads_the_folder(tiny_zoo, api):
    url = publish(tiny_zoo, "org/zoo", api=api, private=True)
    assert url == COMMIT_URL
    api.create_repo.assert_called_once_with(repo_id="org/zoo", repo_type="dataset", exist_ok=True, private=True)
    api.upload_folder.assert_called_once()
    kwargs = api.upload_folder.call_args.kwargs
    assert kwargs["folder_path"] == str(tiny_zoo)
    assert kwargs["repo_id"] == "org/zoo" and kwargs["repo_type"] == "dataset" and kwargs["revision"] is None
    assert "3 shards, 18 checkpoints" in kwargs["commit_message"]
    assert [c[0] for c in api.method_calls] == ["create_repo", "upload_folder"]  # the repo exists before the upload


def test_upload_patterns_select_card_manifest_and_shards_only(tiny_zoo, api):
    publish(tiny_zoo, "org/zoo", api=api)
    patterns = api.upload_folder.call_args.kwargs["allow_patterns"]
    files = listing(tiny_zoo)
    assert any(f.startswith("staging/") for f in files) and any(f.startswith("specs/") for f in files)
    shards = {f["path"] for f in read_manifest(tiny_zoo)["configs"][CONFIG]["files"]}
    assert uploaded(tiny_zoo, patterns) == {"README.md", MANIFEST} | shards
    ignore = api.upload_folder.call_args.kwargs.get("ignore_patterns")
    assert ignore is None or not (uploaded(tiny_zoo, patterns) & uploaded(tiny_zoo, ignore))


def test_the_uploaded_files_alone_load_with_datasets(tiny_zoo, tmp_path, api, read_with_datasets):
    publish(tiny_zoo, "org/zoo", api=api)
    repo = tmp_path / "repo"  # what the Hub repo would hold
    for name in uploaded(tiny_zoo, api.upload_folder.call_args.kwargs["allow_patterns"]):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tiny_zoo / name, repo / name)
    seen = read_with_datasets(repo, CONFIG)
    assert {s: got["rows"] for s, got in seen["splits"].items()} == read_manifest(tiny_zoo)["configs"][CONFIG]["splits"]


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


def test_leftovers_of_an_interrupted_pack_are_not_uploaded(tiny_zoo_copy, api):
    shard = read_manifest(tiny_zoo_copy)["configs"][CONFIG]["files"][0]["path"]
    leftover = tiny_zoo_copy / "data" / f".{CONFIG}.building" / Path(shard).name
    leftover.parent.mkdir()
    shutil.copyfile(tiny_zoo_copy / shard, leftover)
    publish(tiny_zoo_copy, "org/zoo", api=api)
    kwargs = api.upload_folder.call_args.kwargs
    ignored = uploaded(tiny_zoo_copy, kwargs.get("ignore_patterns") or [])
    sent = uploaded(tiny_zoo_copy, kwargs["allow_patterns"]) - ignored
    assert leftover.relative_to(tiny_zoo_copy).as_posix() not in sent



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
