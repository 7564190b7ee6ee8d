"""Data sources for zoo training: where the real data sets are and how they are split.

Local copies are looked up first in the folder named by ``NFNZOO_DATA``. It is laid out like
``../shared/data`` (``mnist/mnist.npz``, ...). Next comes ``../shared/data`` beside the project or the
working directory, when it exists. Otherwise the usual online source is used: torchvision's downloader,
cached under ``~/.cache/nfnzoo``.

The validation hold-out and the subsets are drawn with the spec's seed, never with global random state.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from zoo.registry import Registry
from zoo.planning.spec import DatasetSpec

PROJECT_ROOT = Path(__file__).resolve().parents[2]
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


def _data_candidates() -> list[tuple[str, Path | None]]:
    """Every place a local data file is looked for, in order.

    Each is (how a user names it, its folder or None).
    """
    variable = os.environ.get("NFNZOO_DATA")
    candidates: list[tuple[str, Path | None]] = [(f"$NFNZOO_DATA ({variable})" if variable else "$NFNZOO_DATA (unset)",
                                                  Path(variable) if variable else None)]
    for base in (PROJECT_ROOT, Path.cwd()):
        folder = base.parent / "shared" / "data"
        if all(folder != known for _, known in candidates):
            candidates.append((str(folder) if folder.is_dir() else f"{folder} (absent)", folder))
    return candidates


def data_roots() -> list[Path]:
    """Local data folders that exist, in lookup order."""
    return [folder for _, folder in _data_candidates() if folder is not None and folder.is_dir()]


def find_local(relative: str) -> Path | None:
    for root in data_roots():
        if (root / relative).exists():
            return root / relative
    return None


def missing_data(what: str, relative: str, online: str) -> str:
    """One line: `what` is in none of the places looked in, and `online` failed.

    It names each place and says how to provide the data.
    """
    places = ", ".join(label for label, _ in _data_candidates())
    return (f"{what} is not here: no {relative} in {places}, and {online}; put the file at "
            f"$NFNZOO_DATA/{relative} (or at shared/data/{relative} beside the checkout)")


def local_folder(variable: str, relative: str, what: str) -> Path:
    """The folder `$variable` names, else `relative` in a data root; a clear error naming both otherwise."""
    if os.environ.get(variable):
        return Path(os.environ[variable])
    local = find_local(relative)
    if local is None:
        raise ValueError(missing_data(what, f"{relative}/", f"${variable} is unset (set it to the folder)"))
    return local


SOURCES: Registry[Callable[[], tuple[ImageData, ImageData, int]]] = Registry("data source")


@dataclasses.dataclass(frozen=True)
class SourceInfo:
    """What planning needs to know of a source without loading it."""

    train_size: int
    test_size: int
    image_shape: tuple[int, int, int]  # (C, H, W)
    num_classes: int


SOURCE_INFO = {
    "mnist": SourceInfo(60000, 10000, (1, 28, 28), 10),
    "fashion_mnist": SourceInfo(60000, 10000, (1, 28, 28), 10),
    "cifar10": SourceInfo(50000, 10000, (3, 32, 32), 10),
    "cifar10_gs": SourceInfo(50000, 10000, (1, 32, 32), 10),
    "cifar100": SourceInfo(50000, 10000, (3, 32, 32), 100),
    "svhn_gs": SourceInfo(73257, 26032, (1, 32, 32), 10),
}


def image_source_names() -> list[str]:
    """The image data sets `load_task_data` can load (`dataset.name`)."""
    return SOURCES.names()


def split_sizes(spec: DatasetSpec) -> tuple[int, int, int]:
    """(train pool, validation, test) sizes `load_task_data(spec)` gives, without loading."""
    info = SOURCE_INFO[spec.name]
    train = info.train_size - spec.validation_size
    if spec.train_size is not None:
        train = min(train, spec.train_size)
    test = min(info.test_size, spec.test_size) if spec.test_size is not None else info.test_size
    return train, spec.validation_size, test


def _to_image_data(images: np.ndarray, labels: np.ndarray) -> ImageData:
    x = torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0)
    if x.ndim == 3:
        x = x.unsqueeze(1)  # (N, 1, H, W)
    else:
        x = x.permute(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
    return ImageData(x.contiguous(), torch.from_numpy(labels.astype(np.int64)))


def _torchvision(name: str, train: bool, relative: str) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, H, W) or (N, H, W, C) uint8 and labels, through torchvision's downloader."""
    import torchvision

    root = str(CACHE_DIR / "torchvision")
    try:
        if name == "SVHN":  # SVHN names its splits and stores channels first
            dataset = torchvision.datasets.SVHN(root=root, split="train" if train else "test", download=True)
            return np.asarray(dataset.data).transpose(0, 2, 3, 1), np.asarray(dataset.labels)
        dataset = getattr(torchvision.datasets, name)(root=root, train=train, download=True)
    except (OSError, RuntimeError) as error:  # offline, or the mirror is down
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise DataUnavailable(missing_data(name, relative, f"torchvision could not download it into {root} "
                                                           f"({reason})")) from None
    return np.asarray(dataset.data), np.asarray(dataset.targets)


class DataUnavailable(FileNotFoundError):
    """No local copy and no reachable online source: a user's error, one line from the CLI."""


# ITU-R BT.601 luma weights in thousandths: Y = (299 R + 587 G + 114 B) / 1000
LUMA_WEIGHTS = (299, 587, 114)
LUMA_SCALE = 1000


def _grayscale(images: np.ndarray) -> np.ndarray:
    """(..., 3) uint8 -> (...) uint8: ITU-R BT.601 luma, computed exactly in integers.

    The grey level is (299 R + 587 G + 114 B) / 1000, rounded to the nearest integer. A tie (a remainder
    of exactly 500) rounds to the even one, as `np.rint` does. Integer sums are exact whatever the
    kernel, so every processor gives the same grey images. A float product would run in OpenBLAS, whose
    kernels differ by processor and round some colours apart. This matters for the portable mode
    (`zoo.training.reproducibility`).
    """
    if images.dtype != np.uint8 or images.shape[-1:] != (3,):
        raise ValueError(f"grayscale conversion expects uint8 colour images (..., 3); got {images.dtype} "
                         f"{tuple(images.shape)}")
    weights = [weight * np.arange(256, dtype=np.int32) for weight in LUMA_WEIGHTS]  # a table per channel
    total = weights[0][images[..., 0]]
    total += weights[1][images[..., 1]]
    total += weights[2][images[..., 2]]  # at most 255,000: exact in int32
    grey, remainder = np.divmod(total, LUMA_SCALE)
    grey += (remainder > LUMA_SCALE // 2) | ((remainder == LUMA_SCALE // 2) & (grey % 2 == 1))
    return grey.astype(np.uint8)


@SOURCES.register("mnist")
def mnist() -> tuple[ImageData, ImageData, int]:
    """MNIST: 60,000 train / 10,000 test, the original order (LeCun, Cortes, Burges)."""
    return _local_npz("mnist/mnist.npz") or _online("MNIST", "mnist/mnist.npz")


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


def load_classifier_data(spec, in_channels: int, num_classes: int) -> TaskData:
    """`load_task_data` of a zoo spec whose members classify `in_channels`-channel images into `num_classes` classes.

    A data set of other images or classes is an error naming the spec.
    """
    data = load_task_data(spec.dataset)
    channels = data.test.x.shape[1]
    if channels != in_channels or data.num_classes != num_classes:
        raise ValueError(f"{spec.name}: architecture expects {in_channels} input channels and {num_classes} classes; "
                         f"{spec.dataset.name} has {channels} and {data.num_classes}")
    return data


def _online(name: str, relative: str, transform=lambda images: images,
            classes: int = 10) -> tuple[ImageData, ImageData, int]:
    train_images, train_labels = _torchvision(name, True, relative)
    test_images, test_labels = _torchvision(name, False, relative)
    return (_to_image_data(transform(train_images), train_labels),
            _to_image_data(transform(test_images), test_labels), classes)


@SOURCES.register("fashion_mnist")
def fashion_mnist() -> tuple[ImageData, ImageData, int]:
    """Fashion-MNIST: 60,000 / 10,000 grayscale 28x28 (Xiao, Rasul, Vollgraf 2017)."""
    return _local_npz("fashion_mnist/fashion_mnist.npz") or _online("FashionMNIST", "fashion_mnist/fashion_mnist.npz")


@SOURCES.register("cifar10")
def cifar10() -> tuple[ImageData, ImageData, int]:
    """CIFAR-10 in color: 50,000 / 10,000 32x32x3 (Krizhevsky 2009)."""
    return _local_npz("cifar10/cifar10.npz") or _online("CIFAR10", "cifar10/cifar10.npz")


@SOURCES.register("cifar100")
def cifar100() -> tuple[ImageData, ImageData, int]:
    """CIFAR-100 in color, the 100 fine labels: 50,000 / 10,000 32x32x3 (Krizhevsky 2009)."""
    return _local_npz("cifar100/cifar100.npz", classes=100) or _online("CIFAR100", "cifar100/cifar100.npz", classes=100)


@SOURCES.register("cifar10_gs")
def cifar10_grayscale() -> tuple[ImageData, ImageData, int]:
    """CIFAR-10 in grayscale, as in the Small CNN Zoo's CIFAR10-GS."""
    return _local_npz("cifar10/cifar10.npz", _grayscale) or _online("CIFAR10", "cifar10/cifar10.npz", _grayscale)


@SOURCES.register("svhn_gs")
def svhn_grayscale() -> tuple[ImageData, ImageData, int]:
    """SVHN (cropped digits) in grayscale: 73,257 / 26,032 32x32, as in the Small CNN Zoo's SVHN-GS."""
    return _local_npz("svhn/svhn.npz", _grayscale) or _online("SVHN", "svhn/svhn.npz", _grayscale)


def _local_npz(relative: str, transform=lambda images: images,
               classes: int = 10) -> tuple[ImageData, ImageData, int] | None:
    """A local copy laid out like mnist.npz: x_train, y_train, x_test, y_test (channels last)."""
    local = find_local(relative)
    if local is None:
        return None
    with np.load(local) as arrays:
        return (_to_image_data(transform(arrays["x_train"]), arrays["y_train"].reshape(-1)),
                _to_image_data(transform(arrays["x_test"]), arrays["y_test"].reshape(-1)), classes)
