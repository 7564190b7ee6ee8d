"""The leaderboard's checks of a results file on its own (without the board's state).

A submission is a results JSON written by `benchmarks.harness`. Its schema is `benchmarks.results.Results`,
documented in SCHEMA.md. Beyond the schema we require the following.

(1) A registered task whose metrics are all reported (its `required_metrics` where it names them).

(2) At least `MIN_SEEDS` unique seeds that match the per-seed entries, and the same metrics for every seed.

(3) A summary whose mean and std agree with the per-seed metrics to `TOLERANCE`.

(4) A parameter count from 1 to `MAX_PARAMS`, and a sha256 dataset hash.

(5) A model name of the board's names' characters, a built-in model's own or looking like none
(`leaderboards.names`).

(6) A `claims` block as `benchmarks.claims` writes it (`block_problem`). Every verdict is from its set and
agrees with its check's numbers. "holds" comes only with a passing check of each claimed group.

(7) A `task_config` that is the task's own. That is its `Config` dataclass
(`zoo.validation.schema.from_data`): no unknown key, every value of its declared type. For a track's task it
is the fields `benchmarks.tracks.reporting` writes (`TrackResultsConfig`).

The schema's value checks hold for every field: finite numbers, 64-bit integers, plain bounded text. Every
problem found is reported, not just the first. A file that does not match the schema reports that alone,
since the other checks need its structure.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Literal

from benchmarks.claims import block_problem
from benchmarks.results import Results, summarize
from benchmarks.tasks import get_task_class
from benchmarks.tasks.track_task import TrackTask
from leaderboards.names import MODEL_NAME, builtin_model_problem, config_key_problem, model_name_problem
from zoo.registry import UnknownNameError
from zoo.validation.schema import SchemaError, from_data

MIN_SEEDS = 3
TOLERANCE = 1e-6
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")  # a sidecar: a bare name beside the results
SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_PARAMS = 10**13  # ten trillion: past any model a zoo benchmark trains, and exact as a float


@dataclasses.dataclass(frozen=True)
class TrackResultsConfig:
    """A track's results' `task_config`, as `benchmarks.tracks.reporting` writes it."""
    track: str  # the track's registered name
    profile: str  # its profile
    benchmark: dict[str, Any]  # the definition's benchmark block, copied for the board's protocol line
    definition: dict[str, Any]  # the benchmark's definition: the dataset (its hash is the dataset hash)
    evaluation: Literal["every-stage", "final"] = "every-stage"  # continual learning: when a learner is evaluated

    def validate(self, where: str, key: str) -> None:
        for field in ("track", "profile"):
            if not MODEL_NAME.fullmatch(getattr(self, field)):
                raise SchemaError(where, f"{key}.{field}", "expected 1-64 letters, digits or ._+-")


def task_config_problems(task_class: type, task_config: dict[str, Any], where: str) -> list[str]:
    """Whether a results file's `task_config` is its task's (see the module docstring)."""
    schema = TrackResultsConfig if issubclass(task_class, TrackTask) else task_class.Config
    try:
        from_data(schema, task_config, where, "task_config")
    except SchemaError as error:
        return [str(error)]
    return []


def _close(claimed: float, actual: float) -> bool:
    return abs(claimed - actual) <= TOLERANCE  # False for NaN, as it should be


def check_results(data: Any, where: str) -> tuple[Results | None, list[str]]:
    """Validates results data; returns the parsed results (None if unparseable) and the problems."""
    try:
        results = from_data(Results, data, where)
    except SchemaError as error:
        return None, [str(error)]
    problems: list[str] = []

    try:
        task_class = get_task_class(results.task)
        task_metrics = set(task_class.required_metrics or task_class.metrics)
        problems += task_config_problems(task_class, results.task_config, where)
    except UnknownNameError as error:
        problems.append(str(error))
        task_metrics = set()
    for problem in (model_name_problem(results.model) or builtin_model_problem(results.model),
                    config_key_problem(results.model_config)):
        if problem is not None:
            problems.append(problem)
    claims = block_problem(results.claims) if results.claims is not None else None
    if claims is not None:  # as a schema error: one line naming the file and the key
        problems.append(str(SchemaError(where, f"claims.{claims[0]}", claims[1])))
    for field in ("predictions", "examples"):
        name = getattr(results, field)
        if name is not None and (not FILE_NAME.fullmatch(name) or ".." in name):
            problems.append(f"{field} {name!r} must be a bare file name beside the results (1-128 letters, digits "
                            "or ._+-, no folders)")
    if not SHA256.fullmatch(results.dataset.dataset_hash):
        problems.append(f"dataset.dataset_hash {results.dataset.dataset_hash!r} is not a sha256 hex digest")
    if not 0 < results.num_params <= MAX_PARAMS:
        problems.append(f"num_params must be from 1 to {MAX_PARAMS:,}, got {results.num_params:,}")

    seeds = list(results.seeds)
    if len(seeds) < MIN_SEEDS:
        problems.append(f"at least {MIN_SEEDS} seeds are required, got {len(seeds)}: {seeds}")
    if len(set(seeds)) != len(seeds):
        problems.append(f"seeds must be unique, got {seeds}")
    per_seed_seeds = [entry.seed for entry in results.per_seed]
    if per_seed_seeds != seeds:
        problems.append(f"per_seed covers the seeds {per_seed_seeds}, but seeds lists {seeds}")

    metric_sets = {frozenset(entry.metrics) for entry in results.per_seed}
    if len(metric_sets) > 1:
        problems.append(f"per_seed entries report different metrics: {sorted(sorted(s) for s in metric_sets)}")
    reported = set().union(*metric_sets) if metric_sets else set()
    if task_metrics - reported:
        problems.append(f"task {results.task!r} requires the metrics {sorted(task_metrics)}; "
                        f"missing {sorted(task_metrics - reported)}")

    if len(metric_sets) == 1:
        if set(results.summary) != reported:
            problems.append(f"summary lists the metrics {sorted(results.summary)}, per_seed reports {sorted(reported)}")
        expected = summarize([entry.metrics for entry in results.per_seed])
        for name in sorted(set(results.summary) & reported):
            claimed = results.summary[name]
            for statistic in ("mean", "std"):
                actual = expected[name][statistic]
                if not _close(getattr(claimed, statistic), actual):
                    problems.append(f"summary.{name}.{statistic} is {getattr(claimed, statistic)!r}, but the "
                                    f"per-seed metrics give {actual!r} (tolerance {TOLERANCE})")
    return results, problems
