"""The prompt-based baselines, each from its paper's equations, on the same frozen prompted ViT.

The query q(x) of every method is the frozen backbone's own feature, without prompts. Below,
gamma(a, b) is the cosine similarity.

L2P: Wang et al., CVPR 2022, Sec. 4.2-4.3, Eq. 5. It keeps a pool of M prompts P_j of L_p tokens
each, with keys k_j (`common.prompt_pool`). Each input takes the N prompts whose keys are most
similar to q(x). They are prepended to its tokens (prompt tuning). The feature is the mean of the
prompts' outputs. The loss is the masked cross-entropy plus a "pull". The pull is lambda times the
sum, over the chosen keys, of (1 - gamma(q, k)).

DualPrompt: Wang et al., ECCV 2022, Sec. 4, Eq. 3-4. A shared G-prompt (prefix) sits in the first
layers. One E-prompt (prefix) per task sits in the next, each with a key. Training uses the true
task's E-prompt, and pulls its key to q(x) with weight lambda. Testing takes the E-prompt whose key
is most similar to q(x). That is also the predicted task.

CODA-Prompt: Smith et al., CVPR 2023, Sec. 4, Eq. 3-7. Each prompted layer has M components P_m
with keys K_m and attention vectors A_m. The prompt is sum_m alpha_m P_m, with
alpha_m = gamma(q * A_m, K_m). It is split into prefix keys and values. Task t trains its own M/T
components. Earlier ones are frozen, and later ones unused. They start orthogonal to the earlier
ones (Gram-Schmidt, Eq. 7).

Hyperparameters come from the papers and the authors' code, via MoE_PromptCL's configs. L2P: pool
10, length 5, top 5, lambda 0.1. DualPrompt: G-prompt in layers 0-1 with length 5, E-prompts in
layers 2-4 with length 20, lambda 1. CODA-Prompt: 100 components of length 8 in layers 0-4. The
track's profiles may shorten the lengths for its small ViT, and record it."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.tracks.common.incremental import Task
from benchmarks.tracks.common.prompt_pool import PromptPool
from benchmarks.tracks.common.prompted_vit import PromptedViT
from benchmarks.tracks.common.learners import Base, Training, freeze, masked


def _uniform(shape, generator) -> nn.Parameter:
    return nn.Parameter(torch.rand(shape, generator=generator) * 2 - 1)


class _PromptLearner(Base):
    def __init__(self, backbone: nn.Module, classes: int, seed: int, training: Training):
        super().__init__(classes, seed)
        self.vit, self.training = PromptedViT(freeze(backbone)), training
        self.dim, self.heads, self.head_dim = backbone.num_features, self.vit.heads, self.vit.head_dim
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.head = nn.Linear(self.dim, classes)

    def query(self, images: torch.Tensor) -> torch.Tensor:
        return self.frozen(self.vit.features, images)

    def _prefix(self, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A (B, L, D) prompt as prefix keys (first half) and values (second half).

        Each is (B, H, L/2, d)."""
        batch, length, _ = prompt.shape
        halves = prompt.reshape(batch, 2, length // 2, self.heads, self.head_dim).permute(1, 0, 3, 2, 4)
        return halves[0], halves[1]


@dataclasses.dataclass(frozen=True)
class L2PConfig:
    pool_size: int = 10
    length: int = 5
    top_k: int = 5
    pull: float = 0.1
    training: Training = Training()


class L2P(_PromptLearner):
    def __init__(self, backbone: nn.Module, classes: int, tasks: int, config: L2PConfig, seed: int):
        super().__init__(backbone, classes, seed, config.training)
        self.config = config
        self.pool = PromptPool(config.pool_size, config.length, self.dim, self.dim,
                               torch.Generator().manual_seed(seed + 1))

    def _features(self, images: torch.Tensor, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, pull = self.pool.prompt(queries, self.config.top_k)  # (B, N * L_p, D), sum of N similarities
        return self.vit.features(images, prompt_tokens=tokens), pull

    def learn(self, task_index: int, task: Task) -> None:
        self.begin(task_index, task)
        queries = self.query(task.train.x)
        positions = torch.arange(len(queries))

        def batch_loss(index, labels):
            features, pull = self._features(task.train.x[index], queries[index])
            ce = F.cross_entropy(masked(self.head(features), task.classes), labels)
            return ce + self.config.pull * (self.config.top_k - pull).mean()

        groups = [{"params": self.pool.parameters()}, {"params": self.head.parameters()}]
        self.fit(groups, self.training, positions, task.train.y, batch_loss)

    def predict(self, images: torch.Tensor) -> tuple[torch.Tensor, None]:
        queries = self.query(images)
        features = self.no_grad_batched(lambda x, q: self._features(x, q)[0], images, queries)
        with torch.no_grad():
            return masked(self.head(features), self.seen).argmax(1), None


@dataclasses.dataclass(frozen=True)
class DualPromptConfig:
    g_layers: tuple[int, ...] = (0, 1)
    g_length: int = 5
    e_layers: tuple[int, ...] = (2, 3, 4)
    e_length: int = 20
    pull: float = 1.0
    training: Training = Training()


class DualPrompt(_PromptLearner):
    def __init__(self, backbone: nn.Module, classes: int, tasks: int, config: DualPromptConfig, seed: int):
        super().__init__(backbone, classes, seed, config.training)
        self.config, self.tasks = config, tasks
        generator = torch.Generator().manual_seed(seed + 1)
        self.g_prompt = _uniform((len(config.g_layers), 2 * config.g_length, self.dim), generator)
        self.e_prompts = _uniform((tasks, len(config.e_layers), 2 * config.e_length, self.dim), generator)
        self.keys = _uniform((tasks, self.dim), generator)

    def _prefixes(self, task_ids: torch.Tensor) -> dict:
        batch = len(task_ids)
        prefixes = {layer: self._prefix(self.g_prompt[i].expand(batch, -1, -1))
                    for i, layer in enumerate(self.config.g_layers)}
        chosen = self.e_prompts[task_ids]  # (B, layers, 2L, D)
        prefixes.update({layer: self._prefix(chosen[:, i]) for i, layer in enumerate(self.config.e_layers)})
        return prefixes

    def tasks_of(self, queries: torch.Tensor) -> torch.Tensor:
        similarity = F.normalize(queries, dim=1) @ F.normalize(self.keys[: self.learned], dim=1).T
        return similarity.argmax(1)

    def learn(self, task_index: int, task: Task) -> None:
        self.begin(task_index, task)
        queries = self.query(task.train.x)
        ids = torch.full((len(queries),), task_index, dtype=torch.long)

        def batch_loss(index, labels):
            features = self.vit.features(task.train.x[index], self._prefixes(ids[index]))
            ce = F.cross_entropy(masked(self.head(features), task.classes), labels)
            pull = 1 - F.cosine_similarity(queries[index], self.keys[task_index].expand(len(index), -1), dim=1)
            return ce + self.config.pull * pull.mean()

        def keep_other_tasks():  # only task t's E-prompt and key learn
            for tensor in (self.e_prompts, self.keys):
                grad = tensor.grad
                keep = torch.zeros(self.tasks, dtype=torch.bool, device=grad.device)
                keep[task_index] = True
                grad[~keep] = 0

        groups = [{"params": [self.g_prompt, self.e_prompts, self.keys]}, {"params": self.head.parameters()}]
        self.fit(groups, self.training, torch.arange(len(queries)), task.train.y, batch_loss, keep_other_tasks)

    def predict(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tasks = self.tasks_of(self.query(images))
        features = self.no_grad_batched(lambda x, t: self.vit.features(x, self._prefixes(t)), images, tasks)
        with torch.no_grad():
            return masked(self.head(features), self.seen).argmax(1), tasks


@dataclasses.dataclass(frozen=True)
class CodaConfig:
    layers: tuple[int, ...] = (0, 1, 2, 3, 4)
    components: int = 100
    length: int = 8
    training: Training = Training()


def _orthogonal_rows(rows: int, dim: int, earlier: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """`rows` random unit vectors, orthogonal to each other and to the span of `earlier`'s rows.

    Gram-Schmidt runs against an orthonormal basis of that span. Trained earlier rows are no longer
    orthogonal to each other."""
    basis = list(torch.linalg.qr(earlier.T.to(torch.float64)).Q.T.to(torch.float32)) if len(earlier) else []
    out = []
    for _ in range(rows):
        vector = torch.randn(dim, generator=generator).to(earlier.device)  # drawn on the CPU
        for other in basis + out:
            vector = vector - (vector @ other) * other
        vector = vector / vector.norm()
        out.append(vector)
    return torch.stack(out)


class CodaPrompt(_PromptLearner):
    def __init__(self, backbone: nn.Module, classes: int, tasks: int, config: CodaConfig, seed: int):
        super().__init__(backbone, classes, seed, config.training)
        if config.components % tasks:
            raise ValueError(f"{config.components} components do not split over {tasks} tasks")
        self.config, self.per_task = config, config.components // tasks
        if self.per_task * tasks > self.dim:
            raise ValueError(f"{config.components} orthogonal components do not fit a {self.dim}-dimensional feature")
        self.init_generator = torch.Generator().manual_seed(seed + 1)
        layers, m = len(config.layers), config.components
        self.components = nn.Parameter(torch.zeros(layers, m, config.length * self.dim))
        self.keys = nn.Parameter(torch.zeros(layers, m, self.dim))
        self.attention = nn.Parameter(torch.zeros(layers, m, self.dim))

    def _initialise(self, task_index: int) -> None:
        low, high = task_index * self.per_task, (task_index + 1) * self.per_task
        with torch.no_grad():
            for tensor in (self.components, self.keys, self.attention):
                for layer in range(tensor.shape[0]):
                    tensor[layer, low:high] = _orthogonal_rows(high - low, tensor.shape[2], tensor[layer, :low],
                                                               self.init_generator)

    def _prefixes(self, queries: torch.Tensor) -> dict:
        used = self.learned * self.per_task  # the components of the tasks learned so far
        prefixes = {}
        for i, layer in enumerate(self.config.layers):
            weighted = queries[:, None, :] * self.attention[i, :used][None]  # (B, used, D)
            alpha = F.cosine_similarity(weighted, self.keys[i, :used][None], dim=2)  # (B, used)
            prompt = (alpha @ self.components[i, :used]).reshape(len(queries), self.config.length, self.dim)
            prefixes[layer] = self._prefix(prompt)
        return prefixes

    def learn(self, task_index: int, task: Task) -> None:
        self.begin(task_index, task)
        self._initialise(task_index)
        queries = self.query(task.train.x)
        low = task_index * self.per_task

        def batch_loss(index, labels):
            features = self.vit.features(task.train.x[index], self._prefixes(queries[index]))
            return F.cross_entropy(masked(self.head(features), task.classes), labels)

        def freeze_earlier():
            for tensor in (self.components, self.keys, self.attention):
                tensor.grad[:, :low] = 0

        groups = [{"params": [self.components, self.keys, self.attention]}, {"params": self.head.parameters()}]
        self.fit(groups, self.training, torch.arange(len(queries)), task.train.y, batch_loss, freeze_earlier)

    def predict(self, images: torch.Tensor) -> tuple[torch.Tensor, None]:
        queries = self.query(images)
        features = self.no_grad_batched(lambda x, q: self.vit.features(x, self._prefixes(q)), images, queries)
        with torch.no_grad():
            return masked(self.head(features), self.seen).argmax(1), None
