"""What the relation-extraction learners share: the run's data, length-bucketed batches, the MLP head.

Every learner of the `wave-cre` track sees one `RelationData`. It holds the frozen encoder and
every sentence's tokens (`encoder.TokenBank`). It holds their frozen queries, computed once per run
and cached. Every method and every task order uses the same sentences. It also holds their
relation labels.

A learner is class-incremental over relations. It is called as `learn(t, task)` for the tasks in
order. Then `predict(sentence indices)` returns the relations (among those seen) and the inferred
task, or None. `kept()` gives, by kind, the bytes it keeps between tasks besides its parameters.
Those are stored sentences and Gaussian statistics.

The relation classifier and WAVE's task predictor are the public code's MLP (`Classifier`). It maps
2d -> d -> d -> relations, with ReLUs."""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.tracks.common.learners import Base, masked
from benchmarks.tracks.wave.encoder import RelationEncoder, TokenBank


@dataclasses.dataclass
class RelationData:
    encoder: RelationEncoder  # frozen
    bank: TokenBank
    queries: torch.Tensor  # (N, 2d): every sentence's unprompted representation
    labels: torch.Tensor  # (N,) relation labels
    relations: int
    tasks: int

    @property
    def feature_dim(self) -> int:
        return self.queries.shape[1]


@dataclasses.dataclass(frozen=True)
class Optimisation:
    epochs: int = 10
    lr: float = 1e-3
    batch_size: int = 16


class Classifier(nn.Module):
    """The public WAVE code's head: Linear(2d, d), ReLU, Linear(d, d), ReLU, Linear(d, relations)."""

    def __init__(self, dim: int, relations: int):
        super().__init__()
        hidden = dim // 2
        self.layers = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                    nn.Linear(hidden, relations))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)


def length_batches(bank: TokenBank, index: Sequence[int], size: int,
                   generator: torch.Generator | None = None) -> list[np.ndarray]:
    """`index` in batches of `size` of similar lengths, for less padding.

    Without a generator, it sorts by length. With one, it shuffles, sorts within runs of 8 batches,
    and shuffles the batches."""
    index = np.asarray(index)
    lengths = np.array([len(bank.ids[i]) for i in index])
    if generator is None:
        order = index[np.argsort(lengths, kind="stable")]
        return [order[i:i + size] for i in range(0, len(order), size)]
    shuffled = torch.randperm(len(index), generator=generator).numpy()
    batches = []
    run = 8 * size
    for start in range(0, len(shuffled), run):
        chunk = shuffled[start:start + run]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [index[chunk[i:i + size]] for i in range(0, len(chunk), size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


class RelationLearner(Base):
    """Seen relations, the relation -> task map, the seeded generator, and encoding helpers."""

    final_only = False

    def __init__(self, data: RelationData, seed: int, features_batch: int = 64):
        super().__init__(data.relations, seed, features_batch)
        self.data = data
        self.seed = seed

    def tokens(self, index: Sequence[int]) -> tuple[torch.Tensor, ...]:
        """The sentences' padded batch (`TokenBank.batch`) on the learner's device."""
        return tuple(tensor.to(self.device) for tensor in self.data.bank.batch(index))

    def encode(self, index: Sequence[int], prompts: Callable[[np.ndarray], torch.Tensor | None] | None = None,
               encoder: RelationEncoder | None = None) -> torch.Tensor:
        """Features (len(index), 2d) of the sentences, in `index`'s order, without gradients.

        `prompts(batch)` gives each batch's prompt tokens."""
        encoder = encoder or self.data.encoder
        index = np.asarray(index)
        out = torch.empty((len(index), 2 * encoder.dim), device=self.device)
        position = {int(s): k for k, s in enumerate(index)}
        with torch.no_grad():
            for batch in length_batches(self.data.bank, index, self.features_batch):
                features = encoder(*self.tokens(batch), prompts(batch) if prompts else None)
                out[[position[int(s)] for s in batch]] = features
        return out

    def train_steps(self, parameters, optimisation: Optimisation, index: Sequence[int],
                    loss: Callable[[np.ndarray], torch.Tensor]) -> None:
        """Adam for `optimisation.epochs` over length-bucketed seeded batches of the sentences."""
        parameters = list(parameters)
        optimizer = torch.optim.Adam(parameters, lr=optimisation.lr)
        for _ in range(optimisation.epochs):
            for batch in length_batches(self.data.bank, index, optimisation.batch_size, self.generator):
                value = loss(batch)
                optimizer.zero_grad(set_to_none=True)
                value.backward()
                optimizer.step()

    def fit_pseudo(self, head: nn.Module, sample: Callable[[], tuple[torch.Tensor, torch.Tensor]],
                   optimisation: Optimisation) -> None:
        """Adam on pseudo-features, with cross-entropy over the seen relations.

        Each epoch draws fresh pseudo-features on the CPU, then moves them to the learner's device."""
        optimizer = torch.optim.Adam(head.parameters(), lr=optimisation.lr)
        for _ in range(optimisation.epochs):
            features, labels = (tensor.to(self.device) for tensor in sample())
            for batch in self.batches(len(labels), optimisation.batch_size):
                loss = F.cross_entropy(masked(head(features[batch]), self.seen), labels[batch])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(head.parameters(), 10.0)
                optimizer.step()

    def kept(self) -> dict[str, int]:
        """Bytes kept between tasks besides the parameters, by kind (none by default)."""
        return {}
