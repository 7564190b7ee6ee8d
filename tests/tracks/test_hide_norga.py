"""HiDe-Prompt and NoRGa on a tiny random ViT and a tiny glyph sequence: the pipeline's invariants."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("timm")

from benchmarks.tracks.common.backbone import BackboneConfig, create_vit
from benchmarks.tracks.common.incremental import glyph_sequence
from benchmarks.tracks.norga.evaluate import run_sequence
from benchmarks.tracks.norga.gaussians import ClassGaussians
from benchmarks.tracks.norga.hide import HiDeConfig, HiDePrompt

LETTERS = ("A", "B", "D", "\u0416", "\u03a8", "\u044f")
FAST = HiDeConfig(layers=(0, 1), length=2, batch_size=8, tii_epochs=2, align_epochs=1, prompt_epochs=1,
                  head_epochs=1, pseudo_per_class=8)


@pytest.fixture(scope="module")
def sequence():
    return glyph_sequence(LETTERS, tasks=3, train_per_class=8, test_per_class=4, seed=0)


def _backbone(seed=0):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return create_vit(BackboneConfig(embed_dim=16, depth=2, num_heads=2))


@pytest.mark.parametrize("gate", ["tanh", None])
def test_a_run_gives_a_valid_matrix_and_is_seeded(sequence, gate):
    config = HiDeConfig(**{**FAST.__dict__, "gate": gate})
    first = run_sequence(HiDePrompt(_backbone(), 6, 3, config, seed=1), sequence)
    again = run_sequence(HiDePrompt(_backbone(), 6, 3, config, seed=1), sequence)
    matrix = first["accuracy_matrix"]
    assert all(matrix[i][t] is None for t in range(3) for i in range(t + 1, 3))
    assert all(0 <= matrix[i][t] <= 1 for t in range(3) for i in range(t + 1))
    assert first["accuracy_matrix"] == again["accuracy_matrix"] and 0 <= first["task_identity_accuracy"] <= 1
    assert set(first["metrics"]) == {"final_average_accuracy", "cumulative_average_accuracy", "final_forgetting"}


def test_earlier_prompts_stay_and_the_gate_trains_on_the_first_task_only(sequence):
    method = HiDePrompt(_backbone(), 6, 3, FAST, seed=1)
    initial_alpha = method.gate.alpha.detach().clone()
    method.learn(0, sequence.tasks[0])
    after_first = method.prompts.detach().clone()
    alpha_after_first = method.gate.alpha.detach().clone()
    assert not torch.equal(alpha_after_first, initial_alpha)  # (alpha, tau) learned on task 0
    method.learn(1, sequence.tasks[1])
    assert torch.equal(method.prompts[:, :, 0], after_first[:, :, 0])  # task 0's prompt is never touched again
    assert not torch.equal(method.prompts[:, :, 1], after_first[:, :, 0])  # task 1's moved from its initialisation
    assert torch.equal(method.gate.alpha, alpha_after_first)
    with pytest.raises(ValueError, match="in order"):
        method.learn(0, sequence.tasks[0])


def test_prediction_is_limited_to_seen_classes(sequence):
    method = HiDePrompt(_backbone(), 6, 3, FAST, seed=2)
    method.learn(0, sequence.tasks[0])
    classes, tasks = method.predict(torch.cat([t.test.x for t in sequence.tasks]))
    assert set(classes.tolist()) <= set(sequence.tasks[0].classes) and set(tasks.tolist()) == {0}


def test_gaussian_pseudo_features_have_the_class_statistics():
    generator = torch.Generator().manual_seed(0)
    features = (torch.randn(4000, 3, generator=generator) * torch.tensor([1.0, 2.0, 0.5])
                + torch.tensor([1.0, -1.0, 3.0]))
    stats = ClassGaussians()
    stats.add(features, torch.zeros(4000, dtype=torch.long))
    sampled, labels = stats.sample(20000, generator)
    assert labels.unique().tolist() == [0]
    torch.testing.assert_close(sampled.mean(0), features.mean(0), atol=0.05, rtol=0)
    assert math.isclose(float(sampled[:, 1].std()), float(features[:, 1].std()), rel_tol=0.03)
    with pytest.raises(ValueError, match="already has statistics"):
        stats.add(features, torch.zeros(4000, dtype=torch.long))
