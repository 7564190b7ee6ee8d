"""WAVE-CRE's parts and its baselines: the pool's two selections, the Gaussians, the learners' invariants."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from benchmarks.tracks.common.prompt_pool import PromptPool
from benchmarks.tracks.wave.encoder import load_encoder, tokenize
from benchmarks.tracks.wave.evaluate import run_relations
from benchmarks.tracks.wave.finetuning import Joint, Rehearsal, nearest_to_centroids
from benchmarks.tracks.wave.learners import RelationData, RelationLearner
from benchmarks.tracks.wave.prompting import EoEStyle, L2PStyle, Wave
from benchmarks.tracks.wave.replay import RelationGaussians
from benchmarks.tracks.wave.track import PROFILES, learned_parameters, sequence_of


def test_top_n_selection_takes_the_most_similar_keys_and_the_mixture_weighs_the_whole_pool():
    generator = torch.Generator().manual_seed(0)
    pool = PromptPool(5, 2, 3, 4, generator)
    queries = torch.randn((6, 4), generator=generator)
    tokens, pull = pool.prompt(queries, 2)
    cosine = torch.nn.functional.cosine_similarity(queries[:, None, :], pool.keys[None], dim=2)  # (6, 5)
    best = cosine.argsort(dim=1, descending=True)[:, :2]
    assert torch.allclose(tokens, torch.cat([pool.prompts[best[:, 0]], pool.prompts[best[:, 1]]], dim=1))
    assert torch.allclose(pull, cosine.gather(1, best).sum(1), atol=1e-6)
    mixed, mixed_pull = pool.prompt(queries, 2, "mixture")
    weights = cosine.softmax(1)
    assert mixed.shape == (6, 2, 3) and torch.allclose(mixed_pull, pull)
    assert torch.allclose(mixed[3], sum(weights[3, j] * pool.prompts[j] for j in range(5)) / 5, atol=1e-6)
    with pytest.raises(ValueError, match="cannot choose 6 of a pool of 5"):
        pool.prompt(queries, 6)
    with pytest.raises(ValueError, match="unknown prompt selection 'best'"):
        pool.prompt(queries, 2, "best")


@pytest.mark.parametrize("rows", [(15, 25), (40, 60)])  # fewer sentences than dimensions (low-rank), and more
def test_the_closed_form_gaussian_is_scikit_learns_one_component_mixture(rows):
    from sklearn.mixture import GaussianMixture

    rng = np.random.default_rng(0)
    dim = 24
    features = torch.from_numpy(rng.normal(size=(sum(rows), dim)) @ rng.normal(size=(dim, dim)) + 3.0).float()
    labels = torch.tensor([0] * rows[0] + [3] * rows[1])
    stats = RelationGaussians(reg_covar=1e-6)
    stats.add(features, labels)
    for k, label in enumerate(stats.labels):
        members = features[labels == label].double().numpy()
        mixture = GaussianMixture(n_components=1, covariance_type="full", reg_covar=1e-6, random_state=0).fit(members)
        assert np.allclose(stats.means[k], mixture.means_[0], atol=1e-4)
        assert np.allclose(stats.covariance(k), mixture.covariances_[0], atol=1e-3 * np.abs(mixture.covariances_).max())
        low_rank = len(members) - 1 < (dim + 1) / 2
        assert stats.factors[k].shape == ((dim, len(members) - 1) if low_rank else (dim * (dim + 1) // 2,))
    expected = sum(4 * (dim + 1 + (dim * (n - 1) if n - 1 < (dim + 1) / 2 else dim * (dim + 1) // 2)) for n in rows)
    assert stats.stored_bytes() == expected and stats.float64_full_bytes() == 2 * 8 * (dim + dim * dim)
    sample, sample_labels = stats.sample(40000, torch.Generator().manual_seed(1))
    assert sorted(set(sample_labels.tolist())) == [0, 3]
    drawn = sample[sample_labels == 3].double().numpy()
    assert np.allclose(drawn.mean(0), stats.means[1], atol=0.2)
    scale = np.abs(stats.covariance(1)).max()
    assert np.abs(np.cov(drawn.T, bias=True) - stats.covariance(1)).max() < 0.05 * scale
    with pytest.raises(ValueError, match="relation 0 already has a Gaussian"):
        stats.add(features[:5], torch.zeros(5, dtype=torch.long))


@pytest.fixture(scope="module")
def run_data():
    settings = PROFILES["tiny"]
    sequence = sequence_of(settings, 2021)
    tokenizer, encoder, _ = load_encoder(settings.encoder)
    bank = tokenize(tokenizer, sequence.sentences, settings.encoder.max_length)
    data = RelationData(encoder, bank, torch.empty(0), torch.as_tensor(sequence.labels), sequence.num_relations,
                        len(sequence.tasks))
    data.queries = RelationLearner(data, 0).encode(np.arange(len(bank)))
    return settings, sequence, data


def test_wave_freezes_each_pool_after_its_task_and_caches_exact_features(run_data):
    settings, sequence, data = run_data
    learner = Wave(data, settings.pool, 0)
    learner.learn(0, sequence.tasks[0])
    first = [p.detach().clone() for p in learner.pools[0].parameters()]
    for t in (1, 2):
        learner.learn(t, sequence.tasks[t])
    assert all(torch.equal(a, b) for a, b in zip(first, learner.pools[0].parameters()))
    assert len(learner.pools) == 3 and not torch.equal(learner.pools[0].keys, learner.pools[1].keys)
    test = np.asarray(sequence.tasks[1].test)
    cached = learner._prompted(test, np.full(len(test), 1))
    fresh = learner.encode(test, lambda b: learner._pool_prompt(learner.pools[1], data.queries[b])[0])
    assert torch.allclose(cached, fresh, atol=1e-5)
    relations, tasks = learner.predict(test)
    assert set(relations.tolist()) <= set(learner.seen) and set(tasks.tolist()) <= {0, 1, 2}
    stored = learner.query_stats.stored_bytes() + learner.feature_stats.stored_bytes()
    assert learner.kept()["gaussian_statistics"] == stored
    dim, train = data.feature_dim, settings.train_per_relation  # low-rank: 6 sentences in 2d = 64 dimensions
    assert learner.query_stats.stored_bytes() == len(learner.seen) * 4 * (dim + 1 + dim * (train - 1))
    mixture = Wave(data, dataclasses.replace(settings.pool, selection="mixture"), 0)
    mixture.learn(0, sequence.tasks[0])
    index = np.asarray(sequence.tasks[0].test)
    assert not torch.allclose(mixture._prompted(index, np.zeros(len(index))),
                              learner._prompted(index, np.zeros(len(index))), atol=1e-4)
    assert learned_parameters(learner) > 0


def test_eoe_routes_a_relations_mean_to_its_own_task_and_keeps_only_statistics(run_data):
    settings, sequence, data = run_data
    learner = EoEStyle(data, settings.pool, 0)
    for t, task in enumerate(sequence.tasks):
        learner.learn(t, task)
    means = torch.stack([learner.means[r] for r in sorted(learner.means)]).float()
    assert torch.equal(learner.tasks_of(means), learner.task_of_class[sorted(learner.means)])
    dim = data.feature_dim
    assert learner.kept() == {"gaussian_statistics": 4 * (6 * dim + dim * (dim + 1) // 2)}


def test_l2p_shares_one_pool_and_infers_no_task(run_data):
    settings, sequence, data = run_data
    learner = L2PStyle(data, settings.l2p, 0)
    before = learner.pool.keys.detach().clone()
    outcome = run_relations(learner, sequence)
    assert not torch.equal(before, learner.pool.keys) and "task_identity_accuracy" not in outcome["metrics"]
    assert outcome["kept_bytes"][-1] == {}


def test_rehearsal_keeps_k_real_sentences_per_relation_and_joint_is_evaluated_once(run_data):
    settings, sequence, data = run_data
    learner = Rehearsal(data, settings.finetune, 0)
    frozen = [p.detach().clone() for p in data.encoder.parameters()]
    outcome = run_relations(learner, sequence)
    k = settings.finetune.memory_per_relation
    assert len(learner.memory) == k * 6 and len(set(learner.memory)) == k * 6
    train = {i for task in sequence.tasks for i in task.train}
    assert set(learner.memory) <= train
    assert outcome["kept_bytes"][-1] == {"stored_sentences": data.bank.stored_bytes(learner.memory)}
    assert all(torch.equal(a, b) for a, b in zip(frozen, data.encoder.parameters()))  # the copy was trained
    assert not all(torch.equal(a, b) for a, b in zip(frozen, learner.encoder.parameters()))
    joint = run_relations(Joint(data, settings.joint, 0), sequence)
    matrix = np.array([[np.nan if v is None else v for v in row] for row in joint["accuracy_matrix"]])
    assert np.isnan(matrix[:, :-1]).all() and np.isfinite(matrix[:, -1]).all()
    assert joint["seen_accuracy"][:-1] == [None, None] and "cumulative_average_accuracy" not in joint["metrics"]


def test_memory_selection_takes_the_sentence_nearest_each_centroid():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    points = np.concatenate([c + rng.normal(scale=0.1, size=(8, 2)) for c in centres])
    chosen = nearest_to_centroids(points, 3)
    assert sorted(i // 8 for i in chosen) == [0, 1, 2] and len(set(chosen)) == 3
    assert nearest_to_centroids(points[:2], 3) == [0, 1]


def test_wave_discards_its_per_task_classifiers_and_eoe_keeps_them_as_experts(run_data):
    settings, sequence, data = run_data
    wave, eoe = Wave(data, settings.pool, 0), EoEStyle(data, settings.pool, 0)
    for learner in (wave, eoe):
        learner.learn(0, sequence.tasks[0])
    assert wave.task_heads == [] and len(eoe.task_heads) == 1
    pools = sum(p.numel() for p in wave.pools[0].parameters())
    heads = sum(p.numel() for head in (wave.task_predictor, wave.classifier) for p in head.parameters())
    assert learned_parameters(wave) == pools + heads
