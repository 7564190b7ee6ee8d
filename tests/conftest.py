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
