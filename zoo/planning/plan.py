"""Planning: a spec expands deterministically into runs and their checkpoints.

Runs are the cross product of three things.
They are the grid axes (value lists or integer ranges), the sampled configurations and the training seeds.
The sampled configurations are drawn with the sampled space's own seed.
With a union of grids (``search_space.grids``), the plan is each sub-grid's cross product in turn.

A run's id is a content hash of what defines its training.
It is ``content_hash({"definition": D, "hparams": ..., "seed": ...})``.
Here D is the 64-digit hash of (family, data set, architecture, training recipe).
A checkpoint's id is ``sha256("<run_id>/<epoch>")[:20]``.
A ``training.keep_best`` spec also plans a best-validation checkpoint, ``sha256("<run_id>/best")[:20]``.
It comes after the run's regular checkpoints, with the sentinel epoch `BEST_EPOCH`.
Its real epoch is known only after training, and is recorded in its row.
Planning twice gives the same ids, so a re-run skips what exists and never duplicates rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from typing import Any, Iterator, Sequence

import numpy as np

from zoo.families import get_family
from zoo.validation.schema import from_data, to_data
from zoo.planning.spec import ZooSpec, axis_values, content_hash, hashed_training


BEST_EPOCH = -1  # the planned epoch of a best checkpoint: a sentinel, the real epoch is in its row


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    model_id: str
    epoch: int  # the epoch whose weights it holds; BEST_EPOCH for the best checkpoint
    best: bool = False  # the weights of the best validation epoch (training.keep_best)


@dataclasses.dataclass(frozen=True)
class Run:
    run_id: str
    index: int  # position in the plan, for progress and stable ordering
    hparams: dict[str, Any]
    seed: int
    checkpoints: tuple[Checkpoint, ...]

    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(c.model_id for c in self.checkpoints)


def run_definition(spec: ZooSpec) -> dict:
    """The part of a spec that determines how a run trains (not its search space or splits)."""
    training = hashed_training(to_data(spec.training))  # later options left out at their old values
    return {
        "family": spec.family,
        "dataset": to_data(spec.dataset),
        "architecture": spec.architecture,
        "training": training,
    }


def configurations(spec: ZooSpec) -> Iterator[dict[str, Any]]:
    """Hyperparameter dicts in plan order.

    Sub-grids come in turn; without `grids` there is one empty sub-grid.
    Each gives the points of `grid` + that sub-grid, axes crossed in sorted-name order.
    They are crossed with the sampled draws, the same draws for every sub-grid.
    """
    space = spec.search_space
    if space.sampled is not None:
        rng = np.random.default_rng(space.sampled.seed)
        axes = sorted(space.sampled.axes)
        draws = [{name: space.sampled.axes[name].sample(rng) for name in axes} for _ in range(space.sampled.count)]
    else:
        draws = [{}]
    for subgrid in space.grids or ({},):
        grid = {**space.grid, **subgrid}
        grid_names = sorted(grid)
        for point in itertools.product(*(axis_values(grid[name]) for name in grid_names)):
            for draw in draws:
                yield {**space.fixed, **dict(zip(grid_names, point)), **draw}


def checkpoint_id(run_id: str, epoch: int | str) -> str:
    """``sha256("<run_id>/<epoch>")[:20]``; ``epoch="best"`` for the best-validation checkpoint."""
    return hashlib.sha256(f"{run_id}/{epoch}".encode()).hexdigest()[:20]


def plan_runs(spec: ZooSpec) -> list[Run]:
    definition = content_hash(run_definition(spec), 64)  # hashed once; each run id hashes this digest
    hparams_cls = get_family(spec.family).HParams
    runs: list[Run] = []
    seen: set[str] = set()
    for raw in configurations(spec):
        # typed as the family declares (YAML's `1` for a float is 1.0), so equal values hash equally
        hparams = to_data(from_data(hparams_cls, raw, f"spec {spec.name}", "hyperparameters"))
        for seed in spec.seeds:
            run_id = content_hash({"definition": definition, "hparams": hparams, "seed": seed})
            if run_id in seen:  # a sampled axis can repeat a configuration; train it once
                continue
            seen.add(run_id)
            checkpoints = tuple(Checkpoint(checkpoint_id(run_id, epoch), epoch)
                                for epoch in sorted(spec.training.checkpoint_epochs))
            if spec.training.keep_best:
                checkpoints += (Checkpoint(checkpoint_id(run_id, "best"), BEST_EPOCH, best=True),)
            runs.append(Run(run_id, len(runs), dict(sorted(hparams.items())), seed, checkpoints))
    return runs


def assign_splits(run_ids: list[str], spec: ZooSpec, runs: Sequence[Run] | None = None) -> dict[str, str]:
    """Run id -> split: by the spec's index ranges (`splits.by`) or its seeded fractions.

    Every checkpoint of a run lands in its run's split, so no run crosses splits.
    Index ranges read each run's hyperparameters from `runs`, planned here when not given.
    """
    if spec.splits.by is None:
        return _split_by_fractions(run_ids, spec)
    by = spec.splits.by
    hparams = {run.run_id: run.hparams for run in (runs if runs is not None else plan_runs(spec))}
    assignment: dict[str, str] = {}
    for run_id in run_ids:
        if run_id not in hparams:
            raise ValueError(f"run {run_id} is not in the plan of spec {spec.name!r}")
        split = by.split_of(hparams[run_id][by.key])
        if split is None:  # load_spec rejects such plans; a hand-built spec can still have one
            raise ValueError(f"run {run_id}: {by.key}={hparams[run_id][by.key]} falls in no split of "
                             f"{spec.name!r} (splits.by.ranges: {dict(by.ranges)})")
        assignment[run_id] = split
    return assignment


def _split_by_fractions(run_ids: list[str], spec: ZooSpec) -> dict[str, str]:
    """Seeded split of runs: sort by a keyed hash, cut by the fractions.

    Each split with a positive fraction gets at least one run when there are enough runs.
    """
    order = sorted(run_ids, key=lambda r: content_hash({"split_seed": spec.splits.seed, "run_id": r}))
    names = [s for s in ("train", "validation", "test") if s in spec.splits.fractions]
    counts = [int(round(spec.splits.fractions[s] * len(order))) for s in names]
    if len(order) >= len(names):
        for i in range(len(names)):
            if counts[i] == 0:
                counts[i] = 1
    # the first split (train) absorbs rounding, never below one run
    counts[0] = len(order) - sum(counts[1:])
    while counts[0] < 1 and max(counts[1:], default=0) > 1:
        largest = 1 + counts[1:].index(max(counts[1:]))
        counts[largest] -= 1
        counts[0] += 1
    counts[0] = max(counts[0], 0)
    assignment: dict[str, str] = {}
    start = 0
    for name, count in zip(names, counts):
        for run_id in order[start:start + count]:
            assignment[run_id] = name
        start += count
    return assignment
