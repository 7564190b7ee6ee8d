"""Population training of image classifiers: K runs of one family in one tensor program.

A zoo member has a few thousand parameters.
Trained one at a time, it spends the machine on per-operation overhead.
So K runs that share an optimizer and a train fraction are trained together.
The shared train fraction gives them the same number of steps per epoch.
Parameters are stacked on a leading member dimension.
The family's ``population_forward`` computes every layer for all members at once.
It uses batched matrix products, for the CNN over unfolded patches.

Everything that differs between members is a tensor or a member's own draws.
That covers learning rate, L2, dropout rate, activation, initialization and the train subset.
It also covers the batch order and the dropout masks.
These two come from the population's draws (`zoo.training.draws`, by the spec's `training.rng`).
They give each member what its solo run draws.
So a member follows its solo trajectory to float32 rounding.

The loss is the sum of the members' losses, so each member's gradient is its own.
A member whose loss turns non-finite is recorded as diverged, zeroed and frozen.
The others go on untouched.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from zoo.data.images import TaskData
from zoo.families.base import CheckpointResult
from zoo.training.optim_stacked import StackedOptimizer
from zoo.training.reproducibility import exact_sqrt
from zoo.training.draws import population_draws
from zoo.training.train import CLASSIFICATION_METRICS, batch_starts, train_subset_index


def populations(runs: Sequence, size: int, key: Callable) -> list[list]:
    """Runs grouped by `key` (what must be shared), in chunks of at most `size`, in plan order."""
    groups: dict = defaultdict(list)
    for run in runs:
        groups[key(run)].append(run)
    return [group[i:i + size] for group in groups.values() for i in range(0, len(group), size)]


class _Members:
    """Per-member settings and draws of one population."""

    def __init__(self, family, runs: Sequence, data: TaskData, rng: str = "torch-generator"):
        self.runs = list(runs)
        self.device = device = data.train.x.device  # the population trains where its data lives
        self.hparams = [family.HParams(**run.hparams) for run in runs]
        self.learning_rate = torch.tensor([h.learning_rate for h in self.hparams], dtype=torch.float64, device=device)
        self.l2 = torch.tensor([h.l2 for h in self.hparams], device=device)
        fractions = {h.train_fraction for h in self.hparams}
        if len(fractions) != 1 or len({h.optimizer for h in self.hparams}) != 1:
            raise ValueError("a population shares one optimizer and one train fraction (equal steps per epoch)")
        self.subsets = torch.stack([train_subset_index(len(data.train), h.train_fraction, r.seed)
                                    for r, h in zip(runs, self.hparams)]).to(device)  # (K, N) indices into the pool
        self.draws = population_draws(rng, [r.seed for r in runs], [h.dropout for h in self.hparams],
                                      [getattr(h, "crop_padding", 0) for h in self.hparams], device)

    def __len__(self) -> int:
        return len(self.runs)


# Population evaluation runs EVAL_MEMBERS members on EVAL_EXAMPLES examples per forward, so that
# its activations stay near the caches (the sizes measured fastest, docs/performance.md) and a
# worker's memory is bounded whatever K is. Both are fixed, so a member's metrics do not depend
# on its population.
EVAL_EXAMPLES = 128
EVAL_MEMBERS = 8


@torch.no_grad()
def _evaluate(family, spec, params, members: _Members, data: TaskData) -> list[dict[str, float]]:
    """Each member's train/val/test loss and accuracy, as its solo evaluation computes them.

    They are summed over other batch boundaries, so they are equal to float32 rounding.
    """
    K = len(members)
    results: list[dict[str, float]] = []
    for low in range(0, K, EVAL_MEMBERS):
        members_slice = slice(low, min(K, low + EVAL_MEMBERS))
        results += _evaluate_members(family, spec, {name: p[members_slice] for name, p in params.items()},
                                     [h.activation for h in members.hparams[members_slice]],
                                     members.subsets[members_slice], data)
    return results


def _evaluate_members(family, spec, params, activations: list[str], subsets: torch.Tensor,
                      data: TaskData) -> list[dict[str, float]]:
    arch, batch_size, K = spec.architecture, EVAL_EXAMPLES, len(activations)
    sums = MetricSums(K, subsets.device)
    count_train = min(subsets.shape[1], spec.dataset.eval_train_size)
    train_index = subsets[:, :count_train]  # (K, M): the first examples of each member's subset
    for start in range(0, count_train, batch_size):
        index = train_index[:, start:start + batch_size]
        logits = family.population_forward(arch, params, data.train.x[index], activations=activations)
        sums.add("train", logits, data.train.y[index])
    for prefix, examples in (("val", data.validation), ("test", data.test)):
        for start in range(0, len(examples), batch_size):
            x, y = examples.x[start:start + batch_size], examples.y[start:start + batch_size]
            logits = family.population_forward(arch, params, x, activations=activations, shared_input=True)
            sums.add(prefix, logits, y.expand(K, -1))
    return sums.means({"train": count_train, "val": len(data.validation), "test": len(data.test)})


class MetricSums:
    """Each member's summed loss (float64) and correct predictions (int64) per example set.

    The sums stay where the logits are and are read back once (`means`).
    So there is no host round trip per batch.
    They are the per-batch float32 sums, added in float64 in batch order, as a Python float would.
    """

    def __init__(self, members: int, device: torch.device):
        self.members, self.device = members, device
        self.sums: dict[str, torch.Tensor] = {}

    def add(self, prefix: str, logits: torch.Tensor, y: torch.Tensor) -> None:
        K, B, classes = logits.shape
        losses = F.cross_entropy(logits.reshape(K * B, classes), y.reshape(-1), reduction="none").view(K, B).sum(1)
        correct = (logits.argmax(dim=2) == y).sum(1)
        for name, value in ((f"{prefix}_loss", losses.double()), (f"{prefix}_accuracy", correct)):
            self.sums[name] = self.sums[name] + value if name in self.sums else value

    def means(self, sizes: dict[str, int]) -> list[dict[str, float]]:
        """Per member, every CLASSIFICATION_METRICS name: its sum over the set's size.

        It is NaN for a set in no `sizes` or never added to.
        """
        names = [name for name in CLASSIFICATION_METRICS if name in self.sums and name.split("_")[0] in sizes]
        host = {name: self.sums[name].tolist() for name in names}
        return [{name: host[name][k] / sizes[name.split("_")[0]] if name in host else math.nan
                 for name in CLASSIFICATION_METRICS} for k in range(self.members)]


def host_weights(params: dict[str, torch.Tensor], members: Sequence[int]) -> dict[int, dict[str, torch.Tensor]]:
    """The named members' weights on the CPU, each its own tensors.

    Each stacked tensor takes one gather and one device-to-host copy for all of them, not one per member.
    """
    if not members:
        return {}
    index = torch.tensor(list(members), device=next(iter(params.values())).device)
    host = {name: tensor.detach().index_select(0, index).to("cpu") for name, tensor in params.items()}
    return {k: {name: tensor[i].clone() for name, tensor in host.items()} for i, k in enumerate(members)}


def masked_step(losses: torch.Tensor, active: torch.Tensor, optimizer: StackedOptimizer) -> list[int]:
    """One update of the members whose loss is finite; returns the members that just diverged.

    The loss is the sum of the members' losses, so each gradient is the member's own.
    A member stops before the step whose loss is not finite, as it would alone.
    """
    finite = torch.isfinite(losses.detach())
    active = active.to(losses.device)
    stepping = active & finite
    optimizer.zero_grad()
    torch.where(stepping, losses, torch.zeros_like(losses)).sum().backward()
    optimizer.step(stepping)
    return torch.nonzero(active & ~finite).flatten().tolist()


def train_classifier_population(family, spec, runs: Sequence, data: TaskData,
                                emit: Callable[[object, CheckpointResult], None]) -> None:
    """Trains runs that share an optimizer and a train fraction as one population."""
    members = _Members(family, runs, data, spec.training.rng)
    K, training = len(members), spec.training
    initial = [family.initial_weights(spec, run) for run in runs]
    names = list(initial[0])
    params = {name: torch.stack([w[name] for w in initial]).to(members.device).requires_grad_() for name in names}
    weights = [params[name] for name in names if name.endswith("weight")]
    optimizer = StackedOptimizer(list(params.values()), members.learning_rate, members.hparams[0].optimizer,
                                 exact_sqrt=exact_sqrt(spec))
    active = torch.ones(K, dtype=torch.bool)
    checkpoints = sorted(training.checkpoint_epochs)
    activations = [h.activation for h in members.hparams]

    def snapshot(k: int) -> dict[str, torch.Tensor]:
        return host_weights(params, [k])[k]

    def retire(k: int, from_epoch: int, inclusive: bool) -> None:
        """Records member k as diverged from `from_epoch` on, then zeroes and freezes it."""
        nan_metrics = dict.fromkeys(CLASSIFICATION_METRICS, math.nan)
        weights_now = snapshot(k)
        for epoch in (e for e in checkpoints if e > from_epoch or (inclusive and e == from_epoch)):
            emit(members.runs[k], CheckpointResult(epoch, weights_now, nan_metrics, "diverged"))
        active[k] = False
        with torch.no_grad():
            for tensor in params.values():
                tensor[k] = 0.0

    def checkpoint(epoch: int) -> None:
        metrics = _evaluate(family, spec, params, members, data)
        alive = [k for k in range(K) if active[k]]
        weights_now = host_weights(params, alive)  # one copy to the host per tensor, not per member
        for k in alive:
            finite = all(math.isfinite(v) for v in metrics[k].values())
            emit(members.runs[k], CheckpointResult(epoch, weights_now[k], metrics[k], "ok" if finite else "diverged"))
            if not finite:
                retire(k, epoch, inclusive=False)

    if 0 in checkpoints:
        checkpoint(0)
    size, step = members.subsets.shape[1], 0
    everyone = torch.ones(K, dtype=torch.bool)
    for epoch in range(1, training.epochs + 1):
        if not active.any():
            return
        orders = members.draws.orders(epoch, size, everyone)  # (K, N)
        for start in batch_starts(size, training):
            step += 1
            index = torch.gather(members.subsets, 1, orders[:, start:start + training.batch_size])  # (K, b)
            x, y = data.train.x[index], data.train.y[index]  # (K, b, C, H, W), (K, b)
            logits = family.population_forward(spec.architecture, params, x, activations=activations,
                                                masks=members.draws.masks(step, active))  # (K, b, classes)
            _, b, classes = logits.shape
            losses = F.cross_entropy(logits.reshape(K * b, classes), y.reshape(-1), reduction="none").view(K, b).mean(1)
            losses = losses + members.l2 * sum((w * w).flatten(1).sum(1) for w in weights)
            for k in masked_step(losses, active, optimizer):
                retire(k, epoch, inclusive=True)
        if epoch in checkpoints:
            checkpoint(epoch)
