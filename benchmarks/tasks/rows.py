"""Which rows of a split a task uses, and their group-augmented copies: what every task shares.

`select_rows` keeps the rows with status "ok", the protocol's checkpoints
(`benchmarks.protocol.checkpoint_mask`) and its metadata subset. Its errors name the split and the
choice that emptied it.

`augment_rows` adds K copies of each kept row, under random elements of the row's weight-space
group (`benchmarks.protocol.augment`). They are seeded per run and split. It returns which kept row
each output row came from, and its model_id: `<id>~k` for the k-th copy.

Memory: where every row is kept and none is augmented, `augment_rows` returns the loaded split's
own arrays. A task's `kept_rows` lets `benchmarks.harness.load_splits` decode only the rows the
task keeps. So a run's weights are one copy of the rows it trains on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pandas
import torch

from benchmarks import protocol
from benchmarks.tasks.limits import augmented_bytes_problem
from zoo.weightspace import WeightBatch

if TYPE_CHECKING:
    from benchmarks.tasks.base import Task
    from zoo.loader import ZooSplit

SPLITS = ("train", "validation", "test")


def select_rows(metadata: pandas.DataFrame, name: str, required: Sequence[str], checkpoints: str = "all",
                checkpoint_epochs: Sequence[int] = (), checkpoint_fraction: float = 0.75,
                subset: Mapping[str, Any] | None = None) -> np.ndarray:
    """The boolean mask of a split's usable rows, from its metadata alone (see the module docstring).

    So a leaderboard can list a test split's rows without its weights."""
    metadata = metadata.reset_index(drop=True)
    where = f"{name} split"
    missing = {"model_id", "status", *required} - set(metadata.columns)
    if missing:
        raise ValueError(f"{where}: metadata lacks the columns {sorted(missing)}")
    keep = np.array(metadata["status"] == "ok", dtype=bool)  # a writable copy (pandas' copy-on-write)
    keep &= protocol.checkpoint_mask(metadata, checkpoints, checkpoint_epochs, where, checkpoint_fraction)
    if not keep.any():
        raise ValueError(f"{where}: 0 checkpoints with status 'ok'" if checkpoints == "all" else
                         f"{where}: no checkpoints left after keeping the {checkpoints} checkpoints with status 'ok'")
    if subset:
        chosen = protocol.subset_mask(metadata, subset, where)
        if not (keep & chosen).any():
            present = {column: sorted(map(str, metadata.loc[keep, column].unique())) for column in sorted(subset)}
            raise ValueError(f"{where}: the subset {dict(subset)} leaves no checkpoints; the kept rows hold {present}")
        keep &= chosen
    return keep


def augment_rows(split: "ZooSplit", keep: np.ndarray, name: str, seed: int, copies: int, *,
                 keep_original: bool = True, scale_range: tuple[float, float] | None = None
                 ) -> tuple[WeightBatch, np.ndarray, list[str]]:
    """The kept rows' weights (float32), with `copies` group-augmented copies when copies > 0.

    Returns the weights, per output row the position among the kept rows it came from, and its
    model_id.
    """
    rows = kept_metadata(split, keep)
    problem = copies and augmented_bytes_problem(len(rows), copies, keep_original, split.weights.space.num_params)
    if problem:  # before a row is copied
        raise ValueError(f"{name} split: task.augment_copies={copies}: {problem}")
    # every row kept: the loaded arrays themselves (a float32 zoo's `.to` is the same tensors), never a copy;
    # a subset is one copy of the kept rows (`benchmarks.harness.load_splits` decodes only those in a run)
    weights = split.weights if bool(np.all(keep)) else split.weights[torch.as_tensor(keep)]
    weights = weights.to(dtype=torch.float32)
    model_ids = rows["model_id"].astype(str).tolist()
    if copies == 0:
        return weights, np.arange(len(rows)), model_ids
    rows.attrs = dict(split.metadata.attrs)
    groups = protocol.symmetry_groups(rows, weights, f"{name} split")
    generator = torch.Generator().manual_seed(seed * len(SPLITS) + SPLITS.index(name))  # per run and split
    weights, source, number = protocol.augment(weights, groups, copies, generator, keep_original=keep_original,
                                               scale_range=scale_range)
    return weights, source, copy_ids(model_ids, source, number)


def copy_ids(model_ids: Sequence[str], source: Sequence[int], number: Sequence[int]) -> list[str]:
    """The model_id of each augmented row: its source's, with `~k` for the k-th copy."""
    return [model_ids[s] if n == 0 else f"{model_ids[s]}~{n}" for s, n in zip(source, number)]


def augmented_order(count: int, copies: int, keep_original: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The (source, copy number) of each row `protocol.augment` returns for `count` rows.

    The originals come first (when kept), then each copy of every row. No weights are needed."""
    numbers = ([0] if keep_original else []) + list(range(1, copies + 1))
    return np.tile(np.arange(count), len(numbers)), np.repeat(np.array(numbers, dtype=np.int64), count)


def kept_metadata(split: "ZooSplit", keep: np.ndarray) -> pandas.DataFrame:
    """The metadata of the kept rows, renumbered from 0 (the order of `augment_rows`' sources)."""
    return split.metadata.reset_index(drop=True)[keep].reset_index(drop=True)


def kept_by(task: "Task") -> Callable[[str, pandas.DataFrame], np.ndarray | None]:
    """(split, metadata) -> the mask of the rows `task` reads, so `load_splits` decodes only those.

    `load_splits` is `benchmarks.harness.load_splits`. The mask is None (every row) in three cases: the
    task says nothing, its selection fails, or selecting again on the kept rows would drop some. A
    failing task says why when it runs. A `fraction` checkpoint is relative to a run's last epoch, so
    it can drop rows. So the task sees exactly the rows it would pick."""

    def mask(split: str, metadata: pandas.DataFrame) -> np.ndarray | None:
        try:
            keep = task.kept_rows(split, metadata)
            if keep is None or bool(np.all(keep)) or not bool(np.any(keep)):
                return None
            keep = np.asarray(keep, dtype=bool)
            again = task.kept_rows(split, metadata.reset_index(drop=True)[keep].reset_index(drop=True))
        except ValueError:
            return None
        return keep if again is None or bool(np.all(again)) else None

    return mask
