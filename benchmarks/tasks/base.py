"""What a benchmark task is: its interface, its result, and seeded isolation of randomness.

A task is constructed as `Task(**hparams)` from its `Config` dataclass. It runs as
`task.run(splits, model, model_overrides, seed, device)`. `splits` maps "train", "validation" and
"test" to `zoo.loader.ZooSplit`s. Everything random in a run follows from `seed` alone: model
initialisation, shuffling, dropout. A run leaves torch's global random state as it found it."""

from __future__ import annotations

import abc
import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Mapping

import numpy as np
import pandas
import torch

if TYPE_CHECKING:  # the loader is only needed for the annotation
    from zoo.loader import ZooSplit

SPLITS = ("train", "validation", "test")


@dataclasses.dataclass(frozen=True)
class TaskResult:
    metrics: dict[str, float]  # test-split metrics of the selected model
    predictions: pandas.DataFrame  # one row per test checkpoint: model_id, target, prediction
    num_params: int  # trainable parameters of the NFN model
    selection: dict[str, float]  # how the reported model was chosen, e.g. {"epoch": 12, ...}
    # what the test split allows a ranking to reach, e.g. {"kendall_tau_ceiling": 0.98, ...}
    ranking: dict[str, float] = dataclasses.field(default_factory=dict)
    # arrays for a task's figure (e.g. INR editing's renders), saved beside the results (.examples.npz)
    examples: dict[str, Any] = dataclasses.field(default_factory=dict)
    # the validation score after each training epoch (`Learned.curve`); empty for a fitted model
    curve: tuple[float | None, ...] = ()


class Task(abc.ABC):
    """A benchmark task; subclasses set `Config`, `metrics` and `main_metric` and implement `run`."""

    Config: ClassVar[type]  # frozen dataclass of the task's hyperparameters
    metrics: ClassVar[dict[str, bool]]  # metric name -> higher is better
    main_metric: ClassVar[str]  # the metric leaderboards rank by
    # what a leaderboard recomputes from a submission's predictions and the pinned test metadata
    # (`test_targets`, `score`); "" when the task cannot be re-scored
    RESCORING: ClassVar[str] = ""
    required_metrics: ClassVar[tuple[str, ...] | None] = None  # what every results file must report; None: all

    def __init__(self, **hparams: Any):
        self.config = self.Config(**hparams)

    @classmethod
    def evaluation_protocol(cls, task_config: Mapping[str, Any]) -> dict[str, Any]:
        """The config choices that define the test set; results differing in them rank apart."""
        return {}

    @classmethod
    def describe_protocol(cls, task_config: Mapping[str, Any]) -> str:
        """A one-line description of the protocol a results file's `task_config` ran ("" if none)."""
        return ""

    @classmethod
    def test_targets(cls, metadata: pandas.DataFrame, task_config: Mapping[str, Any]) -> pandas.DataFrame:
        """The test rows a run with `task_config` predicts, from the test split's metadata alone.

        The protocol's filters apply, and the ids of any test augmentation. Returns a frame of `model_id`
        and `target`, NaN where the target is not metadata. Raises ValueError when the protocol leaves
        nothing to score."""
        raise NotImplementedError(f"the {cls.__name__} task cannot list its test rows from metadata")

    @classmethod
    def score(cls, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        """The task's test metrics from the rows' targets and predictions (what `run` reports)."""
        raise NotImplementedError(f"the {cls.__name__} task cannot score predictions")

    @classmethod
    def score_rows(cls, expected: pandas.DataFrame, predictions: np.ndarray) -> dict[str, float]:
        """`score` on the rows `test_targets` listed.

        A task whose metrics need more of a row than its target overrides this. Continual learning's
        (task, stage) cells are an example."""
        return cls.score(expected["target"].to_numpy(dtype=np.float64), predictions)

    @classmethod
    def model_problem(cls, model: str) -> str | None:
        """Why this task cannot take registered model `model` at all, or None.

        The reason is how the model learns, or what it outputs. `model_overrides` raises it. The suite
        tables read it to tell a cell a model cannot run from one it did not enter
        (`leaderboards.cell_reads`)."""
        return None

    def model_overrides(self, model: str, overrides: Mapping[str, Any],
                        splits: Mapping[str, "ZooSplit"]) -> dict[str, Any]:
        """The hyperparameters this task runs `model` with, so results record what ran.

        They are `overrides` plus what the task fixes, such as an output size or a weight-space output. It
        raises before any training when the model cannot serve the task. The harness records its result.
        `run` applies it too; it is idempotent."""
        return dict(overrides)

    def kept_rows(self, split: str, metadata: pandas.DataFrame) -> np.ndarray | None:
        """The boolean mask of the rows of `split` that `run` reads, from the split's metadata alone.

        None means it reads every row. `benchmarks.harness.load_splits` then decodes only those rows
        (`benchmarks.tasks.rows.kept_by`). A task's own selection on the kept rows must keep them all."""
        return None

    def driver_inputs(self, splits: Mapping[str, "ZooSplit"]) -> Mapping[str, "ZooSplit"]:
        """The splits with whatever else `run` reads attached, read here on the driver.

        A job may run on a node that has none of the driver's files (`benchmarks.jobs`). Nothing by
        default."""
        return splits

    @abc.abstractmethod
    def run(self, splits: Mapping[str, "ZooSplit"], model: str, model_overrides: Mapping[str, Any],
            seed: int, device: str | torch.device = "cpu",
            report: Callable[[str], None] | None = None) -> TaskResult:
        """Trains model `model` on the splits with `seed`, and evaluates it on the test split.

        `report`, when given, gets progress lines on long training (`benchmarks.tasks.learners`)."""


def require_splits(task: str, splits: Mapping[str, Any]) -> None:
    """The train, validation and test splits must all be there."""
    missing = [name for name in SPLITS if name not in splits]
    if missing:
        raise ValueError(f"the {task} task needs the splits {list(SPLITS)}; missing {missing}")


def require_invariant_output(task: str, model: str, overrides: Mapping[str, Any]) -> None:
    """Refuses a model configured for a weight-space output (e.g. an `inr-editing` preset)."""
    from nfn_models import model_config

    output = getattr(model_config(model, **dict(overrides)), "output", "invariant")
    if output != "invariant":
        raise ValueError(f"the {task} task reads a model's invariant output; model {model!r} is configured with "
                         f"output={output!r} (its preset or model.output): use an invariant preset")


@contextlib.contextmanager
def isolated_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Seeds torch's default generators for the duration of the block, then restores them.

    Layer constructors and dropout draw from the default generators. Forking them keeps a run
    reproducible from `seed`, without leaking state into the caller."""
    cuda_devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda_devices):
        torch.default_generator.manual_seed(seed)
        if device.type == "cuda":
            with torch.cuda.device(device):
                torch.cuda.manual_seed(seed)
        yield
