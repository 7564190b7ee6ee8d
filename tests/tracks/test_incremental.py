"""Class-incremental sequences: seeded, disjoint tasks, glyph test faces unseen in training, MNIST from disk."""

from __future__ import annotations

import pytest
import torch

from benchmarks.tracks.common.incremental import class_order, glyph_sequence, mnist_sequence


def test_the_class_order_is_a_seeded_partition():
    first, again, other = class_order(10, 5, 42), class_order(10, 5, 42), class_order(10, 5, 40)
    assert first == again != other
    assert sorted(c for task in first for c in task) == list(range(10)) and all(len(t) == 2 for t in first)
    with pytest.raises(ValueError, match="do not split into 3 equal tasks"):
        class_order(10, 3, 0)


def test_a_glyph_sequence_holds_each_tasks_classes_only():
    letters = ("A", "B", "D", "\u0416", "\u03a8", "\u044f")
    sequence = glyph_sequence(letters, tasks=3, train_per_class=4, test_per_class=2, seed=0)
    assert sequence.num_classes == 6 and len(sequence.tasks) == 3
    for task in sequence.tasks:
        assert set(task.train.y.tolist()) == set(task.classes) == set(task.test.y.tolist())
        assert len(task.train) == 8 and len(task.test) == 4 and task.train.x.shape[1:] == (1, 32, 32)
    again = glyph_sequence(letters, tasks=3, train_per_class=4, test_per_class=2, seed=0)
    assert torch.equal(again.tasks[0].train.x, sequence.tasks[0].train.x)


def test_mnist_in_five_tasks_of_two_digits():
    sequence = mnist_sequence(tasks=5, train_per_class=20, test_per_class=10, seed=42)
    assert [len(task.classes) for task in sequence.tasks] == [2] * 5
    first = sequence.tasks[0]
    assert first.train.x.shape == (40, 1, 32, 32) and len(first.test) == 20
    assert set(first.train.y.tolist()) == set(first.classes)
