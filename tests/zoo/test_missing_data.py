"""A data set found nowhere is one line naming every place looked in and how to provide the file.

The CLI test hides the shared data folder from one `nfnzoo generate` (a tmpfs over it in a private
mount namespace, as the cluster tests hide folders from a worker node) and runs without a network
(`unshare -n`), so torchvision's real download fails as on an offline machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.data import images
from zoo.data.images import data_roots, find_local, missing_data

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def nowhere(tmp_path, monkeypatch) -> Path:
    """No data folder at all: $NFNZOO_DATA unset, no shared/data beside the checkout or the working folder."""
    monkeypatch.delenv("NFNZOO_DATA", raising=False)
    monkeypatch.setattr(images, "PROJECT_ROOT", tmp_path / "checkout")
    monkeypatch.setattr(images, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_message_names_every_place_even_when_none_exists(nowhere):
    assert data_roots() == [] and find_local("mnist/mnist.npz") is None
    message = missing_data("MNIST", "mnist/mnist.npz", "the download failed")
    assert "\n" not in message
    assert "$NFNZOO_DATA (unset)" in message and f"{nowhere / 'shared' / 'data'} (absent)" in message
    assert "put the file at $NFNZOO_DATA/mnist/mnist.npz" in message and "the download failed" in message


def test_a_given_folder_is_named_with_its_value(nowhere, monkeypatch):
    monkeypatch.setenv("NFNZOO_DATA", str(nowhere / "mine"))
    assert f"$NFNZOO_DATA ({nowhere / 'mine'})" in missing_data("MNIST", "mnist/mnist.npz", "x")


def _offline_generate(tmp_path: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    hide = f"mount -t tmpfs tmpfs {SHARED_DATA} && " if SHARED_DATA.is_dir() else ""
    command = (f"{hide}exec {sys.executable} -m zoo.cli generate cnn-mnist --profile tiny "
               f"--out {tmp_path / 'zoo'} --num-cpus 1")
    env = {**os.environ, "NFNZOO_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", **extra_env}
    env.pop("NFNZOO_DATA", None)
    env.update(extra_env)
    return subprocess.run(["unshare", "-mn", "--propagation", "private", "sh", "-c", command], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


def test_generate_without_mnist_says_so_in_one_line(tmp_path):
    probe = subprocess.run(["unshare", "-mn", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs tmpfs /mnt && umount /mnt"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount and network namespace here: {probe.stderr.strip()}")
    done = _offline_generate(tmp_path, {"NFNZOO_DATA": str(tmp_path / "empty")})
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = [line for line in errors if line.startswith("nfnzoo generate: error:")]
    assert "MNIST is not here: no mnist/mnist.npz in" in line and f"$NFNZOO_DATA ({tmp_path / 'empty'})" in line
    assert "torchvision could not download it" in line and "put the file at $NFNZOO_DATA/mnist/mnist.npz" in line
