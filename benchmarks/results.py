"""The results file of a benchmark run: its schema, its summary statistics, and loading.

A results JSON is what `run_benchmark` writes and what the leaderboard validates; it is
documented field by field in `leaderboards/SCHEMA.md`. The dataclasses here are the one
definition of its structure: `load_results` checks a file against them with `zoo.schema`
(unknown, missing or mistyped keys are errors naming the file and the key).
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from benchmarks.files import read_json
from zoo.schema import SchemaError, from_data

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    path: str  # the dataset folder (or Hub repo ORG/NAME[@REVISION]) the run read, as given on the command line
    config: str  # the dataset config (e.g. "cnn-mnist")
    dataset_hash: str  # sha256 of the config's data, from its manifest.json
    family: str  # the zoo family of the checkpoints (e.g. "cnn")
    repo: str | None = None  # the Hub dataset repo the data came from; null for a local folder
    revision: str | None = None  # the commit sha the repo's revision resolved to; set exactly when `repo` is

    def validate(self, where: str, key: str) -> None:
        prefix = f"{key}." if key else ""
        if (self.repo is None) != (self.revision is None):
            raise SchemaError(where, f"{prefix}{'revision' if self.repo else 'repo'}",
                              "expected `repo` and `revision` together (a Hub dataset) or neither (a local folder)")
        if self.repo is not None and not re.fullmatch(r"[^/\s]+/[^/\s]+", self.repo):
            raise SchemaError(where, f"{prefix}repo", f"expected a Hub repo id ORG/NAME, got {self.repo!r}")
        if self.revision is not None and not re.fullmatch(r"[0-9a-f]{40}", self.revision):
            raise SchemaError(where, f"{prefix}revision",
                              f"expected the 40-hex commit sha the revision resolved to, got {self.revision!r}")


@dataclasses.dataclass(frozen=True)
class SeedResult:
    seed: int
    metrics: dict[str, float]  # the task's test metrics at the selected model
    train_time_s: float  # wall-clock seconds of the task's run for this seed
    peak_memory_mb: float | None  # peak RSS (CPU) or peak allocated memory (CUDA); null if unknown
    selection: dict[str, float] = dataclasses.field(default_factory=dict)  # how the reported model was chosen
    # what the test split allows a ranking to reach (benchmarks.ranking); absent in older files
    ranking: dict[str, float] = dataclasses.field(default_factory=dict)

    def validate(self, where: str, key: str) -> None:
        for block in ("metrics", "ranking"):
            for name, value in getattr(self, block).items():
                if not math.isfinite(value):
                    raise SchemaError(where, f"{key}.{block}.{name}", f"expected a finite number, got {value}")
        if self.train_time_s < 0:
            raise SchemaError(where, f"{key}.train_time_s", f"expected a non-negative time, got {self.train_time_s}")


@dataclasses.dataclass(frozen=True)
class MetricSummary:
    mean: float
    std: float  # sample standard deviation (ddof=1) over seeds; 0 for a single seed


@dataclasses.dataclass(frozen=True)
class Hardware:
    platform: str
    python: str
    torch: str
    device: str


@dataclasses.dataclass(frozen=True)
class Results:
    schema_version: int
    task: str
    model: str
    model_config: dict[str, Any]
    task_config: dict[str, Any]
    dataset: DatasetInfo
    seeds: tuple[int, ...]
    per_seed: tuple[SeedResult, ...]
    summary: dict[str, MetricSummary]
    num_params: int
    package_version: str
    created: str  # UTC time in ISO 8601
    hardware: Hardware
    predictions: str | None = None  # file name of the predictions sidecar, beside the results file
    examples: str | None = None  # file name of the first seed's figure arrays (.examples.npz), if the task has any

    def validate(self, where: str, key: str) -> None:
        if self.schema_version != SCHEMA_VERSION:
            raise SchemaError(where, "schema_version", f"expected {SCHEMA_VERSION}, got {self.schema_version}")
        if not self.seeds:
            raise SchemaError(where, "seeds", "expected at least one seed")


def summarize(per_seed: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Mean and sample standard deviation (ddof=1; 0 for one seed) of each metric over seeds."""
    names = list(per_seed[0]) if per_seed else []
    summary = {}
    for name in names:
        values = [metrics[name] for metrics in per_seed]
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        summary[name] = {"mean": statistics.fmean(values), "std": std}
    return summary


def load_results(path: str | Path) -> Results:
    """Reads and validates a results JSON; errors name the file and the offending key."""
    return from_data(Results, read_json(path), where=str(path))
