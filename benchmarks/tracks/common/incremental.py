"""Class-incremental task sequences: the classes split into tasks, each with its train and test images.

A sequence's class order is a seeded permutation, cut into equal tasks. The prompt-based
continual-learning code likewise shuffles the classes with the run's seed. Every class keeps one
global label.

Two offline sources:

`glyph_sequence` takes held-out letters of `benchmarks.tracks.common.glyphs`. Training images are
drawn (augmented) from 9 of the 12 faces, and test images from the other 3 (`TEST_FACES`). So the
test asks for letters in styles never seen in training.

`source_sequence` takes an image source of `zoo.data.images`. It reads `../shared/data` or
`$NFNZOO_DATA`, else the usual download. MNIST makes 5 tasks of 2 digits, padded from 28 to 32
pixels. CIFAR-100 makes 10 tasks of 10, the paper's Split CIFAR-100. Each class keeps a seeded
subset of its training images (all of them with `train_per_class=None`), and its first test images.

`folder_sequence` takes a folder of class folders of images, such as ImageNet-R (200 classes, the
paper's Split ImageNet-R). Each class is split 80/20 with the seed, once, as the authors' code
splits it. Each image is resized (shorter side) and centre-cropped to a stored size."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from zoo.data.images import ImageData


@dataclasses.dataclass(frozen=True)
class Task:
    classes: tuple[int, ...]  # global labels
    train: ImageData
    test: ImageData


@dataclasses.dataclass(frozen=True)
class TaskSequence:
    name: str
    class_names: tuple[str, ...]  # by global label
    tasks: tuple[Task, ...]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def to(self, device: torch.device | str) -> "TaskSequence":
        """The sequence with every task's images and labels on `device` (moved once, before learning)."""
        from zoo.training.device import to_device

        return dataclasses.replace(self, tasks=tuple(
            dataclasses.replace(task, train=to_device(task.train, device), test=to_device(task.test, device))
            for task in self.tasks))


def class_order(num_classes: int, tasks: int, seed: int) -> list[tuple[int, ...]]:
    """A seeded permutation of the classes cut into `tasks` equal tasks."""
    if tasks < 1 or num_classes % tasks:
        raise ValueError(f"{num_classes} classes do not split into {tasks} equal tasks")
    order = np.random.default_rng(seed).permutation(num_classes)
    size = num_classes // tasks
    return [tuple(int(c) for c in order[t * size:(t + 1) * size]) for t in range(tasks)]


def _by_class(data: ImageData, classes: tuple[int, ...]) -> ImageData:
    keep = torch.isin(data.y, torch.tensor(classes))
    return ImageData(data.x[keep], data.y[keep])


def glyph_sequence(letters: tuple[str, ...], tasks: int, train_per_class: int, test_per_class: int, seed: int,
                   size: int = 32) -> TaskSequence:
    from benchmarks.tracks.common.glyphs import TEST_FACES, TRAIN_FACES, GlyphRenders

    generator = torch.Generator().manual_seed(seed)
    train = ImageData(*GlyphRenders.of(letters, size, TRAIN_FACES).sample(train_per_class, generator))
    test = ImageData(*GlyphRenders.of(letters, size, TEST_FACES).sample(test_per_class, generator))
    order = class_order(len(letters), tasks, seed)
    return TaskSequence(f"glyphs-{len(letters)}x{tasks}", tuple(letters),
                        tuple(Task(c, _by_class(train, c), _by_class(test, c)) for c in order))


def _per_class(data: ImageData, classes: int, count: int | None, rng: np.random.Generator | None) -> ImageData:
    index = []
    for label in range(classes):
        members = np.flatnonzero(data.y.numpy() == label)
        index.append((rng.permutation(members) if rng is not None else members)[:count])
    return data.subset(np.concatenate(index))


def source_sequence(source: str, tasks: int, train_per_class: int | None, test_per_class: int | None, seed: int,
                    pad_to: int | None = None) -> TaskSequence:
    """A `zoo.data.images` image source (e.g. "mnist", "cifar100") split into `tasks` class-incremental tasks."""
    from zoo.data.images import SOURCES

    train_all, test_all, classes = SOURCES.get(source)()
    rng = np.random.default_rng(seed)
    train = _per_class(train_all, classes, train_per_class, rng)
    test = _per_class(test_all, classes, test_per_class, None)
    if pad_to is not None:
        pad = (pad_to - train.x.shape[-1]) // 2
        train, test = (ImageData(torch.nn.functional.pad(d.x, (pad,) * 4), d.y) for d in (train, test))
    order = class_order(classes, tasks, seed)
    return TaskSequence(f"{source}-{tasks}", tuple(str(c) for c in range(classes)),
                        tuple(Task(c, _by_class(train, c), _by_class(test, c)) for c in order))


def mnist_sequence(tasks: int, train_per_class: int, test_per_class: int, seed: int) -> TaskSequence:
    return source_sequence("mnist", tasks, train_per_class, test_per_class, seed, pad_to=32)


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def _load_image(path, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        scale = size / min(image.size)
        image = image.resize((max(size, round(image.width * scale)), max(size, round(image.height * scale))),
                             Image.Resampling.BICUBIC)
        left, top = (image.width - size) // 2, (image.height - size) // 2
        return np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.uint8)


def folder_sequence(root, tasks: int, seed: int, size: int = 224, train_fraction: float = 0.8,
                    limit_per_class: int | None = None, split_seed: int = 0) -> TaskSequence:
    """Class folders of images under `root`; the sorted names are the labels.

    `split_seed` fixes a per-class train/test split, the same for every run. `seed` sets the class
    order."""
    from pathlib import Path

    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder; expected one folder of images per class (e.g. ImageNet-R)")
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    if len(names) < tasks:
        raise ValueError(f"{root}: {len(names)} class folder(s); {tasks} tasks need at least {tasks}")
    rng = np.random.default_rng(split_seed)
    parts = {"train": ([], []), "test": ([], [])}
    for label, name in enumerate(names):
        files = sorted(p for p in (root / name).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if len(files) < 2:
            raise ValueError(f"{root / name}: {len(files)} image(s); each class needs at least 2 (train and test)")
        files = [files[i] for i in rng.permutation(len(files))][:limit_per_class]
        cut = min(len(files) - 1, max(1, round(train_fraction * len(files))))
        for part, chosen in (("train", files[:cut]), ("test", files[cut:])):
            parts[part][0].extend(_load_image(f, size) for f in chosen)
            parts[part][1].extend([label] * len(chosen))
    train, test = (ImageData(torch.from_numpy(np.stack(x)).permute(0, 3, 1, 2).float().div_(255.0),
                             torch.tensor(y, dtype=torch.long)) for x, y in parts.values())
    try:
        order = class_order(len(names), tasks, seed)
    except ValueError as error:
        raise ValueError(f"{root}: {error}") from None
    return TaskSequence(f"{root.name}-{tasks}", tuple(names),
                        tuple(Task(c, _by_class(train, c), _by_class(test, c)) for c in order))
