"""The prompt baselines and the bounds on a tiny random ViT: what each keeps fixed, what it learns."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("timm")

from benchmarks.tracks.common.backbone import BackboneConfig, create_vit
from benchmarks.tracks.common.incremental import glyph_sequence
from benchmarks.tracks.norga.bounds import JointTraining, LinearProbe, SequentialFineTuning
from benchmarks.tracks.norga.evaluate import run_sequence
from benchmarks.tracks.common.learners import Training
from benchmarks.tracks.norga.prompt_baselines import (
    CodaConfig, CodaPrompt, DualPrompt, DualPromptConfig, L2P, L2PConfig)

LETTERS = ("A", "B", "D", "\u0416", "\u03a8", "\u044f")
FAST = Training(epochs=1, lr=1e-3, batch_size=8)
BUILD = {
    "l2p": lambda b: L2P(b, 6, 3, L2PConfig(pool_size=4, length=2, top_k=2, training=FAST), seed=1),
    "dualprompt": lambda b: DualPrompt(b, 6, 3, DualPromptConfig(g_layers=(0,), g_length=2, e_layers=(1,), e_length=2,
                                                                 training=FAST), seed=1),
    "coda": lambda b: CodaPrompt(b, 6, 3, CodaConfig(layers=(0, 1), components=6, length=2, training=FAST), seed=1),
    "probe": lambda b: LinearProbe(b, 6, 3, FAST, seed=1),
    "sequential": lambda b: SequentialFineTuning(b, 6, 3, FAST, seed=1),
    "joint": lambda b: JointTraining(b, 6, 3, FAST, seed=1),
}


@pytest.fixture(scope="module")
def sequence():
    return glyph_sequence(LETTERS, tasks=3, train_per_class=8, test_per_class=4, seed=0)


def _backbone():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return create_vit(BackboneConfig(embed_dim=16, depth=2, num_heads=2))


@pytest.mark.parametrize("name", list(BUILD))
def test_each_learner_runs_seeded_over_the_sequence(sequence, name):
    first = run_sequence(BUILD[name](_backbone()), sequence)
    again = run_sequence(BUILD[name](_backbone()), sequence)
    assert first["accuracy_matrix"] == again["accuracy_matrix"]
    stages = [2] if name == "joint" else range(3)  # joint training is evaluated after the last task only
    assert all(0 <= first["accuracy_matrix"][i][t] <= 1 for t in stages for i in range(t + 1))
    assert (first["task_identity_accuracy"] is None) == (name != "dualprompt")
    if name == "joint":
        assert all(v is None for row in first["accuracy_matrix"] for v in row[:2])
        assert set(first["metrics"]) == {"final_average_accuracy"}
    else:
        assert set(first["metrics"]) == {"final_average_accuracy", "cumulative_average_accuracy", "final_forgetting"}


def test_joint_training_trains_once_after_the_last_task(sequence):
    method = BUILD["joint"](_backbone())
    before = copy.deepcopy(method.model.vit.state_dict())
    method.learn(0, sequence.tasks[0])
    method.learn(1, sequence.tasks[1])
    assert all(torch.equal(before[k], v) for k, v in method.model.vit.state_dict().items())  # nothing trained yet
    method.learn(2, sequence.tasks[2])
    assert not all(torch.equal(before[k], v) for k, v in method.model.vit.state_dict().items())
    assert method.seen == [c for task in sequence.tasks for c in task.classes]


def test_dualprompt_keeps_earlier_e_prompts_and_keys(sequence):
    method = BUILD["dualprompt"](_backbone())
    method.learn(0, sequence.tasks[0])
    e_prompt, key = method.e_prompts[0].detach().clone(), method.keys[0].detach().clone()
    untouched = method.e_prompts[2].detach().clone()
    method.learn(1, sequence.tasks[1])
    assert torch.equal(method.e_prompts[0], e_prompt) and torch.equal(method.keys[0], key)
    assert torch.equal(method.e_prompts[2], untouched)  # a task not yet learned
    assert not torch.equal(method.keys[1], key)


def test_coda_initialises_new_components_orthogonal_and_freezes_old_ones(sequence):
    method = BUILD["coda"](_backbone())
    method.learn(0, sequence.tasks[0])
    old = method.components[:, :2].detach().clone()
    method.begin(1, sequence.tasks[1])
    method._initialise(1)
    for layer in range(2):
        rows = method.keys[layer, :4]
        gram = rows @ rows.T
        torch.testing.assert_close(gram[2:, :2], torch.zeros(2, 2), atol=1e-5, rtol=0)  # new vs earlier
    with pytest.raises(ValueError, match="do not fit a 16-dimensional feature"):
        CodaPrompt(_backbone(), 6, 3, CodaConfig(components=60), seed=0)
    fresh = BUILD["coda"](_backbone())
    fresh.learn(0, sequence.tasks[0])
    fresh.learn(1, sequence.tasks[1])
    assert torch.equal(fresh.components[:, :2], old)  # task 0's components stay as learned


def test_fine_tuning_trains_a_copy_and_the_probe_keeps_the_backbone(sequence):
    backbone = _backbone()
    original = copy.deepcopy(backbone.state_dict())
    method = BUILD["sequential"](backbone)
    method.learn(0, sequence.tasks[0])
    assert all(torch.equal(backbone.state_dict()[k], v) for k, v in original.items())
    assert not all(torch.equal(method.model.vit.state_dict()[k], v) for k, v in original.items())
    probe = BUILD["probe"](_backbone())
    before = copy.deepcopy(probe.backbone.state_dict())
    probe.learn(0, sequence.tasks[0])
    assert all(torch.equal(probe.backbone.state_dict()[k], v) for k, v in before.items())
