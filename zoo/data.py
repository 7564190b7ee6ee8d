"""Data sources for zoo training: where the real data sets are and how they are split.

Local copies are looked up in the folder named by ``NFNZOO_DATA`` (laid out like
``../shared/data``: ``mnist/mnist.npz``, ...), else in ``../shared/data`` beside the project
(or the working directory) when it exists; otherwise the usual online source is used
(torchvision's downloader, cached under ``~/.cache/nfnzoo``). The validation hold-out and the
subsets are drawn with the spec's seed, never with global random state.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from zoo.registry import Registry
from zoo.spec import DatasetSpec

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("NFNZOO_CACHE", Path.home() / ".cache" / "nfnzoo"))


@dataclasses.dataclass(frozen=True)
class ImageData:
    x: torch.Tensor  # (N, C, H, W) float32 in [0, 1]
    y: torch.Tensor  # (N,) int64 class labels

    def __len__(self) -> int:
        return self.x.shape[0]

    def subset(self, index: np.ndarray | torch.Tensor) -> "ImageData":
        index = torch.as_tensor(index, dtype=torch.long)
        return ImageData(self.x[index], self.y[index])


@dataclasses.dataclass(frozen=True)
class TaskData:
    """The three example sets every run of a zoo config shares."""

    train: ImageData  # the training pool; each run draws its own train_fraction of it
    validation: ImageData  # held out of the training data, for picking checkpoints
    test: ImageData
    num_classes: int


def data_roots() -> list[Path]:
    """Local data folders, in lookup order."""
    roots = []
    if os.environ.get("NFNZOO_DATA"):
        roots.append(Path(os.environ["NFNZOO_DATA"]))
    for base in (PROJECT_ROOT, Path.cwd()):
        candidate = base.parent / "shared" / "data"
        if candidate.is_dir() and candidate not in roots:
            roots.append(candidate)
    return roots


def find_local(relative: str) -> Path | None:
    for root in data_roots():
        if (root / relative).exists():
            return root / relative
    return None


SOURCES: Registry[Callable[[], tuple[ImageData, ImageData, int]]] = Registry("data source")


def _to_image_data(images: np.ndarray, labels: np.ndarray) -> ImageData:
    x = torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0)
    if x.ndim == 3:
        x = x.unsqueeze(1)  # (N, 1, H, W)
    return ImageData(x.contiguous(), torch.from_numpy(labels.astype(np.int64)))


def _torchvision(name: str, train: bool):
    import torchvision

    dataset = getattr(torchvision.datasets, name)(root=str(CACHE_DIR / "torchvision"), train=train, download=True)
    return np.asarray(dataset.data), np.asarray(dataset.targets)


@SOURCES.register("mnist")
def mnist() -> tuple[ImageData, ImageData, int]:
    """MNIST: 60,000 train / 10,000 test, the original order (LeCun, Cortes, Burges)."""
    local = find_local("mnist/mnist.npz")
    if local is not None:
        with np.load(local) as arrays:
            train = _to_image_data(arrays["x_train"], arrays["y_train"])
            test = _to_image_data(arrays["x_test"], arrays["y_test"])
    else:
        train = _to_image_data(*_torchvision("MNIST", True))
        test = _to_image_data(*_torchvision("MNIST", False))
    return train, test, 10


def load_task_data(spec: DatasetSpec) -> TaskData:
    """Loads the data source and makes the seeded validation hold-out and subsets."""
    train_pool, test, num_classes = SOURCES.get(spec.name)()
    if spec.validation_size >= len(train_pool):
        raise ValueError(f"dataset.validation_size={spec.validation_size} leaves no training data "
                         f"({spec.name} has {len(train_pool)} training examples)")
    rng = np.random.default_rng(spec.seed)
    order = rng.permutation(len(train_pool))
    validation = train_pool.subset(order[:spec.validation_size])
    rest = order[spec.validation_size:]
    if spec.train_size is not None:
        rest = rest[:spec.train_size]
    train = train_pool.subset(np.sort(rest))
    if spec.test_size is not None and spec.test_size < len(test):
        test = test.subset(np.sort(rng.permutation(len(test))[:spec.test_size]))
    return TaskData(train, validation, test, num_classes)
