"""The `bench` and `track` commands' arguments, read and bounded before anything runs.

Seeds, worker counts, Ray addresses, GPUs per job and figure rows are argparse types or checks. A
bad value is a one-line error naming the option. `--set` assignments are routed to the model's or
the task's hyperparameters here. Both command modules share these parsers, so they live apart
from either command's handlers."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from typing import Any

from benchmarks.seeds import MAX_SEED, MAX_SEEDS
from zoo.cli import CommandError


# bounds on what the command line declares, checked before anything is allocated: seeds
# (`benchmarks.seeds`), and worker processes, which beyond the machine's cores only contend
# (each is a Python process with torch loaded)
MAX_WORKERS = max(64, os.cpu_count() or 1)
_SEED_PART = re.compile(r"(\d{1,20})(?:\s*-\s*(\d{1,20}))?")


def parse_seeds(text: str, option: str = "--seeds") -> list[int]:
    """"0,1,2" -> [0, 1, 2]; also accepts ranges like "0-4".

    It takes at most `MAX_SEEDS` distinct seeds, each in 0..`MAX_SEED`. A range's length is computed
    before its seeds are listed. So `0-1000000000` is an error, not a list of a billion integers."""
    shown = ascii(text[:60]) + ("…" if len(text) > 60 else "")
    spans, count = [], 0
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = _SEED_PART.fullmatch(part)
        if match is None:
            raise CommandError(f"{option}: expected non-negative integers like 0,1,2 or 0-4, got {shown}")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if first > last:
            raise CommandError(f"{option}: the range {part} is empty ({first} > {last}); write {last}-{first}")
        if last > MAX_SEED:
            raise CommandError(f"{option}: the seed {last} is too large; seeds are 0 to {MAX_SEED:,}")
        count += last - first + 1
        if count > MAX_SEEDS:
            raise CommandError(f"{option}: {shown} names more than {MAX_SEEDS:,} seeds; at most {MAX_SEEDS:,} per run")
        spans.append((first, last))
    seeds = [seed for first, last in spans for seed in range(first, last + 1)]
    if not seeds:
        raise CommandError(f"{option}: no seed in {shown}; give at least one, like 0,1,2 or 0-4")
    if len(set(seeds)) != len(seeds):
        repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
        raise CommandError(f"{option}: the seeds {repeated[:5]} appear twice in {shown}; each seed runs once")
    return seeds


def check_workers(workers: int) -> int:
    """`--workers`, if it is 1 to `MAX_WORKERS` processes; else a `CommandError`."""
    if workers < 1:
        raise CommandError(f"--workers must be at least 1, got {workers}")
    if workers > MAX_WORKERS:
        raise CommandError(f"--workers must be at most {MAX_WORKERS} (processes, each with torch loaded), "
                           f"got {workers:,}")
    return workers


_ADDRESS = re.compile(r"(?:ray://)?[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?:\d{1,5}")


def ray_address(text: str) -> str:
    """An argparse type: `--address`, a Ray cluster's HOST:PORT, ray://HOST:PORT or auto."""
    if text == "auto" or (_ADDRESS.fullmatch(text) and 0 < int(text.rsplit(":", 1)[1]) < 65536):
        return text
    raise argparse.ArgumentTypeError(f"expected a Ray cluster's HOST:PORT, ray://HOST:PORT or auto, got "
                                     f"{ascii(text[:60])}{'…' if len(text) > 60 else ''}")


def gpus_per_job(text: str) -> float:
    """An argparse type: `--gpus-per-job`, 0 to `MAX_GPUS_PER_JOB` GPUs (a fraction shares one)."""
    from benchmarks.jobs import MAX_GPUS_PER_JOB

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GPUs like 1 or 0.5, got {ascii(text[:40])}") from None
    if not 0 <= value <= MAX_GPUS_PER_JOB:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"expected 0 to {MAX_GPUS_PER_JOB} GPUs per job, got {ascii(text[:40])}")
    return value


def add_ray_arguments(parser: argparse.ArgumentParser, what: str, workers: int = 1) -> None:
    """--workers, --address and --gpus-per-job: where the jobs (`benchmarks.jobs`) run."""
    parser.add_argument("--workers", type=int, default=workers,
                        help=f"run the {what} as Ray tasks on a local Ray instance with this many CPUs, one job "
                             f"per CPU (default: {workers}; 1 runs them in this process, without Ray); finished "
                             "jobs are kept either way, and a re-run resumes")
    parser.add_argument("--address", type=ray_address, default=os.environ.get("RAY_ADDRESS") or None,
                        help=f"run the {what} as Ray tasks on this Ray cluster (HOST:PORT, ray://HOST:PORT or "
                             "auto; default $RAY_ADDRESS, which a Ray job sets); its nodes need share no folder with "
                             "this one: the data travels through Ray and the records are written here")
    parser.add_argument("--gpus-per-job", type=gpus_per_job, default=0.0,
                        help="GPUs Ray gives each job (a fraction shares one; default 0: the jobs run on CPUs)")


def image_rows(text: str) -> int:
    """An argparse type: rows of a figure, 1 to 100 (each row is a column of renders in one PNG)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of rows, got {ascii(text[:40])}") from None
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"expected 1 to 100 rows, got {value:,}")
    return value


def scoped_overrides(assignments: list[str], scope: str, expected: str) -> dict[str, Any]:
    """`--set SCOPE.KEY=VALUE` (or `KEY=VALUE`) for a command that takes one scope only.

    Anything else is a one-line error saying `expected`."""
    overrides: dict[str, Any] = {}
    for assignment in assignments:
        key, equals, value = assignment.partition("=")
        name = key.removeprefix(f"{scope}.")
        if not equals or not name or "." in name:
            raise CommandError(f"--set: expected {expected}, got {assignment!r}")
        overrides[name] = _parse_value(value)
    return overrides


def _parse_value(text: str, option: str = "--set") -> Any:
    """A `--set` value: JSON when it parses (bounded: nesting depth, 64-bit integers, finite
    numbers, plain text), else the text itself."""
    from zoo.validation.inputs import InputError, load_json_bytes, value_problem

    try:
        value = load_json_bytes(text, option, strict=True)
    except InputError as error:
        if "not valid JSON" in str(error):  # plain text: a name such as relu
            value = text
        else:
            raise CommandError(str(error)) from None
    problem = value_problem(value)
    if problem is not None:
        key, reason = problem
        raise CommandError(f"{option} {ascii(text[:60])}: {key + ': ' if key else ''}{reason}")
    return value


def split_overrides(assignments: list[str], model: str, task: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Routes `--set` assignments to the model's or the task's hyperparameters."""
    from benchmarks.tasks import task_config
    from nfn_models import model_config

    fields = {
        "model": {f.name for f in dataclasses.fields(model_config(model))} | {"preset"},
        "task": {f.name for f in dataclasses.fields(task_config(task))},
    }
    overrides: dict[str, dict[str, Any]] = {"model": {}, "task": {}}
    for assignment in assignments:
        key, equals, value = assignment.partition("=")
        if not equals or not key:
            raise CommandError(f"--set: expected KEY=VALUE, got {assignment!r}")
        scope, dot, name = key.partition(".")
        if dot and scope in overrides:
            targets = [scope]
        else:
            name = key
            targets = [scope for scope, names in fields.items() if name in names]
            if len(targets) != 1:
                where = "both the model and the task have it" if targets else (
                    f"model {model!r} has {sorted(fields['model'])}, task {task!r} has {sorted(fields['task'])}")
                raise CommandError(f"--set {key}: use model.{key} or task.{key} ({where})")
        overrides[targets[0]][name] = _parse_value(value)
    return overrides["model"], overrides["task"]
