"""The results file of a benchmark run: its schema, its summary statistics, and loading.

It also holds the skip record a suite writes for a run its data cannot serve:
`<out>/<name>.skipped`, with its reason.

A results JSON is what `run_benchmark` writes and what the leaderboard validates.
`leaderboards/SCHEMA.md` documents it field by field. The dataclasses here are the one definition of
its structure. `load_results` checks a file against them with `zoo.validation.schema`. Unknown,
missing or mistyped keys are errors naming the file and the key.

Beyond types, every field is bounded where a board shows it. A `ranking` block holds all of
`benchmarks.ranking`'s tau-ceiling statistics or none of them, each in its range. The hardware and
version strings are one line of at most `MAX_LINE` characters. `created` is an ISO 8601 time. The
dataset's config and family are names (`zoo.validation.inputs.NAME`)."""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from benchmarks.files import read_json, write_text_atomic
from zoo.validation.inputs import name_problem, read_capped, text_problem
from zoo.validation.schema import SchemaError, from_data

SCHEMA_VERSION = 1
MAX_LINE = 200  # characters of a one-line string a board shows (a device, a platform, a version)
MAX_THREADS = 8_192  # Linux's most CPUs (NR_CPUS)
MAX_PATH = 4_096  # characters of a dataset's source (or of the path older results recorded)
MAX_CURVE = 100_000  # epochs of a seed's learning curve
# what `benchmarks.ranking.ranking_ceiling` writes into a seed's `ranking`, and each value's range
RANKING_RANGES = {"kendall_tau_ceiling": (0.0, 1.0), "distinct_targets": (1.0, 2.0**53),
                  "tied_pair_fraction": (0.0, 1.0), "num_targets": (2.0, 2.0**53)}


def line_problem(value: str, limit: int = MAX_LINE) -> str | None:
    """Why `value` is not one line of at most `limit` characters, or None."""
    if len(value) > limit:
        return f"{len(value):,} characters; at most {limit:,}"
    if "\n" in value or "\t" in value:
        return "expected one line (no newline or tab)"
    return None


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """The data a run read: its hash and where anyone gets those bytes, never where this machine keeps them."""
    config: str  # the dataset config (e.g. "cnn-mnist")
    dataset_hash: str  # sha256 of the config's data, from its manifest.json
    family: str  # the zoo family of the checkpoints (e.g. "cnn")
    repo: str | None = None  # the Hub dataset repo the data came from; null for a local folder
    revision: str | None = None  # the commit sha the repo's revision resolved to; set exactly when `repo` is
    # sha256 of the split set's file the run read (its task_config.splits, checked against the manifest);
    # null on the zoo's own split, which the dataset hash covers
    split_set_sha256: str | None = None
    # how anyone gets the bytes (`zoo.reader.config_source`: ORG/NAME@<commit>, "regenerated from spec SPEC (PROFILE)",
    # "imported from URL"); null where the zoo's manifest records none
    source: str | None = None
    # read only: the folder older results recorded (nothing writes one now; a board never stores it), or a
    # track's benchmark id `track:<track>/<benchmark>` (`benchmarks.tracks.reporting`)
    path: str | None = None

    def validate(self, where: str, key: str) -> None:
        prefix = f"{key}." if key else ""
        for field in ("config", "family"):
            problem = name_problem(getattr(self, field))
            if problem is not None:
                raise SchemaError(where, f"{prefix}{field}", problem)
        for field in ("source", "path"):
            value = getattr(self, field)
            problem = line_problem(value, MAX_PATH) if value is not None else None
            if problem is not None:
                raise SchemaError(where, f"{prefix}{field}", problem)
        if (self.repo is None) != (self.revision is None):
            raise SchemaError(where, f"{prefix}{'revision' if self.repo else 'repo'}",
                              "expected `repo` and `revision` together (a Hub dataset) or neither (a local folder)")
        if self.repo is not None and not re.fullmatch(r"[^/\s]+/[^/\s]+", self.repo):
            raise SchemaError(where, f"{prefix}repo", f"expected a Hub repo id ORG/NAME, got {self.repo!r}")
        if self.split_set_sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", self.split_set_sha256):
            raise SchemaError(where, f"{prefix}split_set_sha256", "expected a sha256 hex digest")
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
    # the validation score after each training epoch, null where it was not finite (a learning curve);
    # empty for a fitted model and absent in older files
    curve: tuple[float | None, ...] = ()

    def validate(self, where: str, key: str) -> None:
        for block in ("metrics", "ranking"):
            for name, value in getattr(self, block).items():
                if not math.isfinite(value):
                    raise SchemaError(where, f"{key}.{block}.{name}", f"expected a finite number, got {value}")
        if len(self.curve) > MAX_CURVE:
            raise SchemaError(where, f"{key}.curve", f"{len(self.curve):,} epochs; at most {MAX_CURVE:,}")
        if self.train_time_s < 0:
            raise SchemaError(where, f"{key}.train_time_s", f"expected a non-negative time, got {self.train_time_s}")
        if self.peak_memory_mb is not None and self.peak_memory_mb < 0:
            raise SchemaError(where, f"{key}.peak_memory_mb",
                              f"expected a non-negative size, got {self.peak_memory_mb}")
        ceiling = set(self.ranking) & set(RANKING_RANGES)  # beside them, a task's own (majority_class_accuracy)
        if ceiling and ceiling != set(RANKING_RANGES):
            raise SchemaError(where, f"{key}.ranking", f"expected all of {sorted(RANKING_RANGES)} (as "
                              f"benchmarks.ranking writes them) or none, got {sorted(ceiling)}")
        for name in sorted(ceiling):
            value, (low, high) = self.ranking[name], RANKING_RANGES[name]
            if not low <= value <= high:
                raise SchemaError(where, f"{key}.ranking.{name}", f"expected a number from {low:g} to {high:g}, "
                                  f"got {value!r}")


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
    # where the numbers came from (`zoo.distributed.machine`); absent from results written before them
    cpu_model: str | None = None  # /proc/cpuinfo's model name (else platform.processor())
    aten_isa: str | None = None  # torch.backends.cpu.get_cpu_capability(): AVX2, AVX512, ...
    onednn_isa: str | None = None  # the ISA of oneDNN's kernels: avx2, avx512_core, ...
    gpu_model: str | None = None  # the CUDA device the run used; null on the CPU
    # torch's intra-op threads the first seed ran on (`benchmarks.threads`); absent from older results
    threads: int | None = None

    def validate(self, where: str, key: str) -> None:
        for field in ("platform", "python", "torch", "device", "cpu_model", "aten_isa", "onednn_isa", "gpu_model"):
            value = getattr(self, field)
            problem = line_problem(value) if value is not None else None
            if problem is not None:
                raise SchemaError(where, f"{key}.{field}", problem)
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise SchemaError(where, f"{key}.threads", f"expected 1 to {MAX_THREADS:,} threads, got {self.threads:,}")


def describe_hardware(device: str, gpu_model: str | None = None) -> dict[str, str | None]:
    """The `hardware` block of a results file for a run on `device` (a CUDA device's name in `gpu_model`)."""
    import platform

    from zoo.distributed.machine import describe_machine

    machine = describe_machine()
    return {"platform": machine["platform"], "python": platform.python_version(), "torch": machine["torch"],
            "device": device, "cpu_model": machine["cpu_model"], "aten_isa": machine["aten_isa"],
            "onednn_isa": machine["onednn_isa"], "gpu_model": gpu_model}


MODEL_ORIGINS = ("built-in", "import path", "entry point", "object")
CLAIM_VERDICTS = ("holds", "false claim", "unmeasured", "not checked")  # benchmarks.claims


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """Where the model's code came from (`benchmarks.model_identity.model_source`)."""
    kind: str  # how it was loaded: one of MODEL_ORIGINS
    loaded_as: str  # what the run was given: a name, an import path MODULE:ATTR, an entry point's name
    import_path: str  # MODULE:QUALNAME of its class (a factory's: the factory's)
    distribution: str | None = None  # the installed distribution providing its top-level package
    version: str | None = None  # that distribution's version, else the package's __version__
    commit: str | None = None  # the code's commit (40 hex): pip's record of a VCS install, else its git checkout's
    dirty: bool | None = None  # that checkout had uncommitted changes to tracked files; null where unknown

    def validate(self, where: str, key: str) -> None:
        if self.kind not in MODEL_ORIGINS:
            raise SchemaError(where, f"{key}.kind", f"expected one of {', '.join(MODEL_ORIGINS)}, got {self.kind!r}")
        for field in ("loaded_as", "import_path", "distribution", "version"):
            value = getattr(self, field)
            problem = line_problem(value) if value is not None else None
            if problem is not None:
                raise SchemaError(where, f"{key}.{field}", problem)
        if self.commit is not None and not re.fullmatch(r"[0-9a-f]{40}", self.commit):
            raise SchemaError(where, f"{key}.commit", f"expected a 40-hex commit, got {ascii(self.commit[:60])}")


@dataclasses.dataclass(frozen=True)
class ClaimCheck:
    """One check of the claims block: a group on a weight space at a magnitude (`benchmarks.check_model.Check`)."""
    space: str
    group: str
    test: str  # "output", "invariance", "denormal" or "equivariance"
    magnitude: str
    claimed: bool
    deviation: float | None  # the largest over the seeds; null where nothing was measured
    tolerance: float | None  # a claim holds at or below it
    verdict: str

    def validate(self, where: str, key: str) -> None:
        for field in ("space", "group", "test", "magnitude", "verdict"):
            problem = line_problem(getattr(self, field))
            if problem is not None:
                raise SchemaError(where, f"{key}.{field}", problem)
        for field in ("deviation", "tolerance"):
            value = getattr(self, field)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise SchemaError(where, f"{key}.{field}", f"expected a finite non-negative number, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Claims:
    """The model's symmetry claims, checked before training (`benchmarks.claims`)."""
    groups: tuple[str, ...]  # the groups it claims on the checked spaces
    verdict: str  # one of CLAIM_VERDICTS
    spaces: tuple[str, ...]  # the weight spaces checked (`benchmarks.check_model.SPACES`)
    seeds: tuple[int, ...]
    model_config: dict[str, Any]  # the run's model hyperparameters the check kept (sizes shrunk)
    check_time_s: float
    checks: tuple[ClaimCheck, ...]
    error: str | None = None  # why the claims could not be checked ("not checked")

    def validate(self, where: str, key: str) -> None:
        if self.verdict not in CLAIM_VERDICTS:
            raise SchemaError(where, f"{key}.verdict", f"expected one of {', '.join(CLAIM_VERDICTS)}, "
                                                       f"got {ascii(self.verdict[:60])}")
        for field in ("groups", "spaces"):
            for value in getattr(self, field):
                problem = name_problem(value)
                if problem is not None:
                    raise SchemaError(where, f"{key}.{field}", problem)
        problem = line_problem(self.error) if self.error is not None else None
        if problem is not None:
            raise SchemaError(where, f"{key}.error", problem)
        if not (math.isfinite(self.check_time_s) and self.check_time_s >= 0):
            raise SchemaError(where, f"{key}.check_time_s", f"expected a non-negative time, got {self.check_time_s!r}")
        if (self.verdict == "false claim") != any(c.claimed and c.deviation is not None and c.tolerance is not None
                                                  and c.deviation > c.tolerance for c in self.checks):
            raise SchemaError(where, f"{key}.verdict", f"{self.verdict!r} disagrees with the checks' deviations "
                                                       "and tolerances")
        if self.verdict == "not checked" and self.error is None:
            raise SchemaError(where, f"{key}.error", "a claims block that was not checked says why")


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
    # how the model was loaded and whose code it is; absent from results written before them
    model_source: ModelSource | None = None
    # the model's symmetry claims and their check before training; absent from older results
    claims: Claims | None = None

    def validate(self, where: str, key: str) -> None:
        if self.schema_version != SCHEMA_VERSION:
            raise SchemaError(where, "schema_version", f"expected {SCHEMA_VERSION}, got {self.schema_version}")
        if not self.seeds:
            raise SchemaError(where, "seeds", "expected at least one seed")
        problem = line_problem(self.package_version)
        if problem is not None:
            raise SchemaError(where, "package_version", problem)
        try:
            datetime.datetime.fromisoformat(self.created)
        except ValueError:
            raise SchemaError(where, "created", f"expected an ISO 8601 time, got {ascii(self.created[:60])}") from None
        for field in ("predictions", "examples"):  # a sidecar is a file beside the results, never a path
            value = getattr(self, field)
            if value is not None and (value in ("", ".", "..") or any(c in value for c in "/\\\0")
                                      or len(value.encode()) > 255 or text_problem(value, 255) is not None):
                raise SchemaError(where, field, f"expected a file name beside the results file, got "
                                  f"{ascii(value)[:80]} (at most 255 bytes, no control characters)")


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


def read_results(path: str | Path) -> dict:
    """A results file as plain data, read bounded and checked against the schema.

    A hand-edited or damaged file is an error naming it and the key, not a KeyError later."""
    data = read_json(path)
    from_data(Results, data, where=str(path))
    return data


def skip_path(out_dir: str | Path, name: str) -> Path:
    """Where a suite records why its run `name` could not run on its data (kept across resumes)."""
    return Path(out_dir) / f"{name}.skipped"


def write_skip(out_dir: str | Path, name: str, error: BaseException) -> Path:
    """Records why the run `name` cannot run on this data; returns the record's path."""
    return write_text_atomic(skip_path(out_dir, name), f"{error}\n")


def skip_reason(path: str | Path) -> str:
    """The first line of a skip record, bounded and printable."""
    text = read_capped(Path(path), 64 * 2**10, "skip record").decode("utf-8", errors="replace")
    line = (text.strip().splitlines() or [""])[0]
    return line if line.isprintable() and len(line) <= 500 else ascii(line[:500])
