"""Class-incremental task sequences: the classes split into tasks, each with its train and test images.

A sequence's class order is a seeded permutation (the prompt-based continual-learning code
shuffles the classes with the run's seed), cut into equal tasks; every class keeps one global
label. Two offline sources:

- `glyph_sequence`: held-out letters of `benchmarks.tracks.common.glyphs`, training images drawn
  (augmented) from 9 of the 12 faces and test images from the other 3 (`TEST_FACES`), so the
  test asks for letters in styles never seen in training;
- `mnist_sequence`: MNIST (`zoo.data.mnist`: `../shared/data` or `$NFNZOO_DATA`, else the
  usual download), 5 tasks of 2 digits by default, padded from 28 to 32 pixels, a seeded
  subset of each class's training images and its first test images.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from zoo.data import ImageData


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


def mnist_sequence(tasks: int, train_per_class: int, test_per_class: int, seed: int) -> TaskSequence:
    from zoo.data import mnist

    train_all, test_all, classes = mnist()
    rng = np.random.default_rng(seed)

    def pick(data: ImageData, per_class: int, shuffle: bool) -> ImageData:
        index = []
        for label in range(classes):
            members = np.flatnonzero(data.y.numpy() == label)
            index.append((rng.permutation(members) if shuffle else members)[:per_class])
        chosen = data.subset(np.concatenate(index))
        return ImageData(torch.nn.functional.pad(chosen.x, (2, 2, 2, 2)), chosen.y)

    train, test = pick(train_all, train_per_class, True), pick(test_all, test_per_class, False)
    order = class_order(classes, tasks, seed)
    return TaskSequence(f"mnist-{tasks}", tuple(str(c) for c in range(classes)),
                        tuple(Task(c, _by_class(train, c), _by_class(test, c)) for c in order))
