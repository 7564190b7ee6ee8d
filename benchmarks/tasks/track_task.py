"""What the tracks' board tasks share: results written by `nfnzoo track run`, a definition as the dataset.

A track runs its study itself, so its task has no `run` and no hyperparameters; its results'
dataset is the benchmark's definition (`task_config["definition"]`), one hash per benchmark, and
the board pins, as that dataset's test metadata, the cells the definition allows
(`definition_cells`, a subclass's), which `test_targets` and `score_rows` then read.
"""

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
    def evaluation_protocol(cls, task_config: Mapping[str, Any]) -> dict[str, Any]:
        return {"track": task_config.get("track")}  # the dataset hash fixes the benchmark

    @classmethod
    def score(cls, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        raise NotImplementedError(f"{cls.__name__} is scored from its cells: use score_rows")

    def run(self, splits, model, model_overrides, seed, device="cpu"):
        raise ValueError(f"this task is run by its tracks (`nfnzoo track run {self.TRACKS}`; see `nfnzoo track "
                         "list`), not on a zoo")
