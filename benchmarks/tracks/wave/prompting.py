"""WAVE-CRE and the prompt-based baselines of the `wave-cre` track, on one frozen encoder.

WAVE-CRE: Le et al., "Adaptive Prompting for Continual Relation Extraction: A Within-Task Variance
Perspective" (AAAI 2025), Sec. 4. Per task t there is a pool of M prompts of length L, with keys
(`common.prompt_pool`). A sentence of task t takes the top N prompts, by the cosine similarity of
its query with the pool's keys. That is the paper's rule. The public code's softmax mixture of the
whole pool is `selection="mixture"`. Prompts are prepended after the embedding layer.

While learning task t, the loss is the cross-entropy of a throwaway classifier over task t's
relations, minus lambda times the pull. The pull is the sum of the chosen keys' similarities
(lambda = 0.1). After the task, it fits per relation one Gaussian of the unprompted queries and one
of the prompted features (`replay`). It then retrains two heads from scratch on pseudo-features of
every seen relation. The task predictor is an MLP over relations on queries; its predicted relation
names the task. The relation classifier is the same MLP on prompted features.

At test time the task predictor picks the pool. The pool's selection picks the prompts, and the
classifier the relation. Pools are frozen after their task. So a sentence's prompted feature under
a pool is computed once (`_prompted`).

Baselines sharing its parts:

`hide` is HiDe-Prompt (Wang et al., NeurIPS 2023, Sec. 4), in this setting. It keeps one prompt
per task. That is WAVE with M = N = 1, with the same task predictor and generative replay.

`eoe` is an EoE-style task identity (Zhou et al., Findings of ACL 2024, Sec. 3.3). It keeps WAVE's
per-task pools, and each task's classifier as that task's expert. The task is the one with the
smallest squared Mahalanobis distance of the query to its relation means. The covariance is
shared: the mean of the per-relation covariances, pseudo-inverted. This is how the EoE code
routes. It has no replay.

`l2p` is L2P (Wang et al., CVPR 2022). One pool is shared by every task, with top-N selection and
the pull. A shared classifier trains on each task, with its logits masked to the task's
relations."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torch.nn import functional as F

from benchmarks.tracks.common.learners import masked
from benchmarks.tracks.common.prompt_pool import PromptPool
from benchmarks.tracks.wave.learners import Classifier, Optimisation, RelationData, RelationLearner
from benchmarks.tracks.wave.relations import RelationTask
from benchmarks.tracks.wave.replay import RelationGaussians


@dataclasses.dataclass(frozen=True)
class PoolConfig:
    pool_size: int = 20  # M (the public code's README: 20 per task, length 8, top 4)
    length: int = 8  # L
    top_n: int = 4  # N
    selection: str = "top-n"  # or "mixture"
    pull: float = 0.1  # lambda
    prompt: Optimisation = Optimisation(epochs=25, lr=1e-4, batch_size=16)  # prompts, keys, task classifier
    replay: Optimisation = Optimisation(epochs=250, lr=5e-5, batch_size=16)  # the shared heads on pseudo-features
    pseudo_per_relation: int = 100  # pseudo-features per relation per replay epoch
    reg_covar: float = 1e-6


class _PerTaskPools(RelationLearner):
    """A pool per task, trained with a throwaway classifier; prompted features are cached.

    EoE keeps the classifier as the task's expert."""

    keeps_task_heads = False

    def __init__(self, data: RelationData, config: PoolConfig, seed: int):
        super().__init__(data, seed)
        self.config = config
        self.pools: list[PromptPool] = []
        self.task_heads: list[Classifier] = []
        self.cache: dict[tuple[int, int], torch.Tensor] = {}  # (sentence, pool) -> prompted feature

    def _pool_prompt(self, pool: PromptPool, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return pool.prompt(queries, self.config.top_n, self.config.selection)

    def _train_pool(self, task_index: int, task: RelationTask) -> None:
        data, config = self.data, self.config
        with torch.random.fork_rng():
            torch.manual_seed(self.seed * 1000 + task_index)
            head = Classifier(data.feature_dim, data.relations).to(self.device)
        pool = PromptPool(config.pool_size, config.length, data.encoder.dim, data.feature_dim,
                          self.generator).to(self.device)

        def loss(batch: np.ndarray) -> torch.Tensor:
            tokens, pull = self._pool_prompt(pool, data.queries[batch])
            features = data.encoder(*self.tokens(batch), tokens)
            ce = F.cross_entropy(masked(head(features), task.classes), data.labels[batch])
            return ce - config.pull * pull.mean()

        self.train_steps(list(pool.parameters()) + list(head.parameters()), config.prompt, task.train, loss)
        pool.requires_grad_(False)
        head.requires_grad_(False)
        self.pools.append(pool)
        if self.keeps_task_heads:
            self.task_heads.append(head)

    def _prompted(self, index: np.ndarray, tasks: np.ndarray) -> torch.Tensor:
        """Each sentence's feature under its given task's pool (computed once per pair)."""
        for task in np.unique(tasks):
            missing = [int(s) for s, t in zip(index, tasks) if t == task and (int(s), int(task)) not in self.cache]
            if missing:
                pool = self.pools[int(task)]
                features = self.encode(missing, lambda b: self._pool_prompt(pool, self.data.queries[b])[0])
                self.cache.update({(s, int(task)): f for s, f in zip(missing, features)})
        return torch.stack([self.cache[(int(s), int(t))] for s, t in zip(index, tasks)])


class Wave(_PerTaskPools):
    """WAVE-CRE; with pool_size = top_n = 1, the HiDe-style baseline."""

    def __init__(self, data: RelationData, config: PoolConfig, seed: int):
        super().__init__(data, config, seed)
        self.query_stats = RelationGaussians(config.reg_covar)
        self.feature_stats = RelationGaussians(config.reg_covar)
        self.task_predictor = self.classifier = None

    def learn(self, task_index: int, task: RelationTask) -> None:
        self.begin(task_index, task)
        self._train_pool(task_index, task)
        train = np.asarray(task.train)
        labels = self.data.labels[train]
        self.query_stats.add(self.data.queries[train], labels)
        self.feature_stats.add(self._prompted(train, np.full(len(train), task_index)), labels)
        self.task_predictor = self._retrained(self.query_stats, 1)
        self.classifier = self._retrained(self.feature_stats, 2)

    def _retrained(self, stats: RelationGaussians, salt: int) -> Classifier:
        with torch.random.fork_rng():
            torch.manual_seed(self.seed * 1000 + 100 * salt + self.learned)
            head = Classifier(self.data.feature_dim, self.data.relations).to(self.device)
        self.fit_pseudo(head, lambda: stats.sample(self.config.pseudo_per_relation, self.generator), self.config.replay)
        return head.requires_grad_(False)

    def predict(self, index) -> tuple[torch.Tensor, torch.Tensor]:
        index = np.asarray(index)
        with torch.no_grad():
            identity = masked(self.task_predictor(self.data.queries[index]), self.seen).argmax(1)
            tasks = self.task_of_class[identity]
            features = self._prompted(index, tasks.cpu().numpy())
            return masked(self.classifier(features), self.seen).argmax(1), tasks

    def kept(self) -> dict[str, int]:
        return {"gaussian_statistics": self.query_stats.stored_bytes() + self.feature_stats.stored_bytes(),
                "gaussian_statistics_float64_full": (self.query_stats.float64_full_bytes()
                                                     + self.feature_stats.float64_full_bytes())}


class EoEStyle(_PerTaskPools):
    """Per-task pools and experts; the task by Mahalanobis distance of the query (no replay)."""

    keeps_task_heads = True

    def __init__(self, data: RelationData, config: PoolConfig, seed: int):
        super().__init__(data, config, seed)
        self.means: dict[int, torch.Tensor] = {}
        self.covariance_sum = torch.zeros((data.feature_dim, data.feature_dim), dtype=torch.float64)
        self.precision: torch.Tensor | None = None

    def learn(self, task_index: int, task: RelationTask) -> None:
        self.begin(task_index, task)
        self._train_pool(task_index, task)
        train = np.asarray(task.train)
        queries, labels = self.data.queries[train].double(), self.data.labels[train]
        for relation in task.classes:
            members = queries[labels == relation]
            self.means[relation] = members.mean(0)
            self.covariance_sum += torch.cov(members.T)
        self.precision = torch.linalg.pinv(self.covariance_sum / len(self.means), hermitian=True)

    def tasks_of(self, queries: torch.Tensor) -> torch.Tensor:
        relations = sorted(self.means)
        differences = queries.double()[:, None, :] - torch.stack([self.means[r] for r in relations])[None]
        distances = torch.einsum("bri,ij,brj->br", differences, self.precision, differences)  # (B, R)
        owner = self.task_of_class[relations]
        by_task = torch.stack([distances[:, owner == t].min(1).values for t in range(self.learned)], dim=1)
        return by_task.argmin(1)

    def predict(self, index) -> tuple[torch.Tensor, torch.Tensor]:
        index = np.asarray(index)
        with torch.no_grad():
            tasks = self.tasks_of(self.data.queries[index])
            features = self._prompted(index, tasks.cpu().numpy())
            predicted = torch.empty(len(index), dtype=torch.long, device=tasks.device)
            for t in tasks.unique().tolist():
                rows = tasks == t
                classes = [r for r in self.seen if self.task_of_class[r] == t]
                predicted[rows] = masked(self.task_heads[t](features[rows]), classes).argmax(1)
            return predicted, tasks

    def kept(self) -> dict[str, int]:
        dim = self.data.feature_dim
        return {"gaussian_statistics": 4 * (len(self.means) * dim + dim * (dim + 1) // 2)}


class L2PStyle(RelationLearner):
    """One pool for every task, a shared classifier trained with the task's logits masked."""

    def __init__(self, data: RelationData, config: PoolConfig, seed: int):
        super().__init__(data, seed)
        self.config = config
        self.pool = PromptPool(config.pool_size, config.length, data.encoder.dim, data.feature_dim, self.generator)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.classifier = Classifier(data.feature_dim, data.relations)

    def _tokens(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        return self.pool.prompt(self.data.queries[batch], self.config.top_n, self.config.selection)

    def learn(self, task_index: int, task: RelationTask) -> None:
        self.begin(task_index, task)
        data, config = self.data, self.config

        def loss(batch: np.ndarray) -> torch.Tensor:
            tokens, pull = self._tokens(batch)
            features = data.encoder(*self.tokens(batch), tokens)
            ce = F.cross_entropy(masked(self.classifier(features), task.classes), data.labels[batch])
            return ce - config.pull * pull.mean()

        self.train_steps(list(self.pool.parameters()) + list(self.classifier.parameters()), config.prompt,
                         task.train, loss)

    def predict(self, index) -> tuple[torch.Tensor, None]:
        features = self.encode(index, lambda b: self._tokens(b)[0])
        with torch.no_grad():
            return masked(self.classifier(features), self.seen).argmax(1), None
