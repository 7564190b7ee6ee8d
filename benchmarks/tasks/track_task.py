"""What the tracks' board tasks share: results written by `nfnzoo track run`, a definition as the dataset.

A track runs its study itself, so its task has no `run` and no hyperparameters. Its results'
dataset is the benchmark's definition (`task_config["definition"]`), one hash per benchmark. The
board pins, as that dataset's test metadata, the cells the definition allows. A subclass's
`definition_cells` lists them, and `test_targets` and `score_rows` read them.

A definition declares its size: the number of tasks, or of test examples. `cell_count` checks that
declaration against the subclass's documented limit. It returns the number of cells without
building any. `predicted_cells` returns the number a results file's predictions hold per seed. So
a board refuses an oversized or inconsistent definition before allocating its cells."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

import numpy as np
import pandas

from benchmarks.tasks.base import Task


class TrackTask(Task):
    TRACKS: ClassVar[str]  # e.g. "norga, wave-cre": for the error a `bench run` gets

    @dataclasses.dataclass(frozen=True)
    class Config:  # no hyperparameters: the tracks' profiles hold them
        pass

    @classmethod
    def definition_cells(cls, definition: Mapping) -> pandas.DataFrame:
        """The cells (model_id and what scoring needs) a results file reports for this definition."""
        raise NotImplementedError

    @classmethod
    def cell_count(cls, definition: Mapping) -> int:
        """How many cells `definition_cells` would build, computed without building them.

        Raises ValueError when the definition's declared size is missing, not positive or past the limit."""
        raise NotImplementedError

    @classmethod
    def predicted_cells(cls, definition: Mapping, task_config: Mapping[str, Any]) -> int:
        """How many prediction rows a results file with `task_config` holds per seed (default: every cell)."""
        return cls.cell_count(definition)

    @classmethod
    def evaluation_protocol(cls, task_config: Mapping[str, Any]) -> dict[str, Any]:
        return {"track": task_config.get("track")}  # the dataset hash fixes the benchmark

    @classmethod
    def score(cls, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        raise NotImplementedError(f"{cls.__name__} is scored from its cells: use score_rows")

    def run(self, splits, model, model_overrides, seed, device="cpu", report=None):
        raise ValueError(f"this task is run by its tracks (`nfnzoo track run {self.TRACKS}`; see `nfnzoo track "
                         "list`), not on a zoo")
