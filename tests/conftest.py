"""Shared fixtures: one tiny real zoo per session, trained on MNIST without Ray and packed.

Torch runs on one intra-op thread in every test, as each Ray trial does
(`zoo.worker.configure_threads`): float reductions, hence trained weights, depend on the
thread count, and on 2-core machines extra threads only contend.

`tiny_zoo` is the packed folder (specs/, staging/, data/, manifest.json, README.md). Its
files are made read-only so a test that mutates it by mistake fails loudly; a test that
needs to change a zoo takes `tiny_zoo_copy`, a writable copy in its own `tmp_path`.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from zoo.spec import ZooSpec, load_spec, spec_from_data


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    import torch

    from zoo.worker import configure_threads

    previous = torch.get_num_threads()
    configure_threads(1)
    yield
    torch.set_num_threads(previous)


def make_tiny_spec() -> ZooSpec:
    """The bundled `cnn-mnist` spec, `tiny` profile, shrunk further to train in seconds.

    6 sampled runs x checkpoints at epochs 0, 1, 2 = 18 checkpoints; 1,000 training images.
    Built through `spec_from_data`, so the shrunk spec is validated like any other.
    """
    data = load_spec("cnn-mnist", "tiny").to_data()
    data["dataset"].update(train_size=1000, validation_size=500, test_size=500, eval_train_size=500)
    data["search_space"]["sampled"]["count"] = 6
    return spec_from_data(data, "tests/conftest.py:make_tiny_spec")


@pytest.fixture(scope="session")
def tiny_zoo_spec() -> ZooSpec:
    return make_tiny_spec()


@pytest.fixture(scope="session")
def tiny_zoo(tmp_path_factory, tiny_zoo_spec: ZooSpec) -> Path:
    """A packed tiny zoo (read-only). Staged with `zoo.worker.train_runs`, no Ray."""
    from zoo.folder import STAGING_FOLDER, save_spec
    from zoo.pack import pack
    from zoo.plan import plan_runs
    from zoo.staging import Staging
    from zoo.worker import train_runs

    folder = tmp_path_factory.mktemp("tiny_zoo")
    save_spec(tiny_zoo_spec, folder)
    written = train_runs(tiny_zoo_spec, plan_runs(tiny_zoo_spec), Staging(folder / STAGING_FOLDER))
    assert written == 18, written
    pack(folder)
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return folder


@pytest.fixture(scope="session")
def tiny_transformer_zoo(tmp_path_factory) -> Path:
    """A packed tiny `transformer-mnist` zoo (read-only): 16 runs (4 configurations x 4 seeds) of
    4 epochs on 800 images, checkpoints at epochs 2, 3, 4 and the best; no Ray."""
    from zoo.folder import STAGING_FOLDER, save_spec
    from zoo.pack import pack
    from zoo.plan import plan_runs
    from zoo.staging import Staging
    from zoo.worker import train_runs

    data = load_spec("transformer-mnist", "tiny").to_data()
    data["dataset"].update(train_size=800, validation_size=200, test_size=200, eval_train_size=200)
    data["seeds"] = [0, 1, 2, 3]
    data["training"].update(epochs=4, checkpoint_epochs=[2, 3, 4])
    data["splits"]["fractions"] = {"train": 0.5, "validation": 0.25, "test": 0.25}
    spec = spec_from_data(data, "tests/conftest.py:tiny_transformer_zoo")
    folder = tmp_path_factory.mktemp("tiny_transformer_zoo")
    save_spec(spec, folder)
    written = train_runs(spec, plan_runs(spec), Staging(folder / STAGING_FOLDER))
    assert written == 16 * 4, written
    pack(folder)
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return folder


@pytest.fixture(scope="session")
def tiny_inr_zoo_folder(tmp_path_factory) -> Path:
    """The packed `inr-mnist` `tiny` profile: 28 SIRENs (every 2,500th MNIST image, so all three
    splits: 18 / 2 / 8 runs), checkpoints at steps 100 and 200; no Ray. Tests must not change it."""
    from zoo.folder import STAGING_FOLDER, save_spec
    from zoo.pack import pack
    from zoo.plan import plan_runs
    from zoo.staging import Staging
    from zoo.worker import train_runs

    spec = load_spec("inr-mnist", "tiny")
    folder = tmp_path_factory.mktemp("inr_zoo")
    save_spec(spec, folder)
    written = train_runs(spec, plan_runs(spec), Staging(folder / STAGING_FOLDER))
    assert written == 28 * 2, written
    pack(folder)
    return folder


@pytest.fixture
def tiny_zoo_copy(tiny_zoo: Path, tmp_path: Path) -> Path:
    """A writable copy of the tiny zoo (same bytes, same relative layout)."""
    return Path(shutil.copytree(tiny_zoo, tmp_path / "zoo", copy_function=shutil.copyfile))


@pytest.fixture
def offline_hf(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """Hub access off and a throwaway HF_HOME, here and in the returned subprocess env."""
    home = tmp_path / "hf_home"
    home.mkdir()
    settings = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home)}
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **settings}


def cache_dataset_repo(cache: Path, repo_id: str, folder: Path, refs: tuple[str, ...] = ("main",)) -> str:
    """Lays a packed zoo out as huggingface_hub's cache holds a dataset repo downloaded at `refs`.

    The documented layout (huggingface_hub `file_download.py`, `_snapshot_download.py`):
    `<cache>/datasets--ORG--NAME/blobs/<etag>` (sha256 for LFS files, here the shards; the git
    blob sha1 otherwise), `snapshots/<commit>/<path>` a relative symlink to the blob,
    `refs/<ref>` the commit sha (no newline: it is read verbatim), and `trees/<commit>.json` the
    tree listing an offline `snapshot_download` checks the snapshot's completeness against.
    Files are the card, the manifest and the manifest's shards. Returns the commit sha.
    """
    import hashlib
    import json
    import os

    from zoo.folder import read_manifest

    manifest = read_manifest(folder)
    paths = sorted(["README.md", "manifest.json",
                    *(f["path"] for entry in manifest["configs"].values() for f in entry["files"])])
    storage = cache / f"datasets--{repo_id.replace('/', '--')}"
    contents = {path: (folder / path).read_bytes() for path in paths}
    commit = hashlib.sha1(json.dumps({p: hashlib.sha256(b).hexdigest() for p, b in contents.items()},
                                     sort_keys=True).encode()).hexdigest()
    tree = {}
    for path, data in contents.items():
        blob_id = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        lfs = path.endswith(".parquet")
        etag = hashlib.sha256(data).hexdigest() if lfs else blob_id
        blob = storage / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = storage / "snapshots" / commit / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
        tree[path] = {"size": len(data), "blob_id": blob_id,
                      **({"lfs_sha256": etag, "lfs_size": len(data)} if lfs else {})}
    (storage / "trees").mkdir(exist_ok=True)
    (storage / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": tree}))
    for ref in refs:
        (storage / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (storage / "refs" / ref).write_text(commit)
    return commit


@pytest.fixture
def hub_cache(offline_hf, monkeypatch) -> Path:
    """The offline Hub cache of `offline_hf`, for this process too: huggingface_hub reads
    HF_HUB_CACHE and HF_HUB_OFFLINE when it is imported, so its constants are set here as well."""
    from huggingface_hub import constants

    cache = Path(offline_hf["HF_HOME"]) / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    offline_hf["HF_HUB_CACHE"] = str(cache)  # the subprocess environment of this test, too
    return cache


@pytest.fixture(name="cache_dataset_repo")
def cache_dataset_repo_fixture():
    """cache_dataset_repo(cache, repo_id, folder, refs) -> commit sha (see the function)."""
    return cache_dataset_repo
