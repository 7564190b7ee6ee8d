"""Resumable jobs: one JSON record per finished job, run in a pool of worker processes.

A long study is split into jobs (a track's method on one benchmark with one seed; a benchmark
run's seed, `benchmarks.harness`), each a top-level function and its arguments, with a
fingerprint: the hash of everything that decides the outcome (the settings, the data's or the
backbone's checksum, the seed). `run_jobs` writes each finished job's record to
`<folder>/<job key>.json` at once (atomically) and, on a re-run, takes a record whose
fingerprint matches instead of running the job again; a record with another fingerprint (the
settings changed) is run again and replaced. So an interrupted study loses at most the jobs in
flight, and the same command on the same folder resumes. Without a folder nothing is recorded.

With `workers > 1` the jobs run in that many spawned processes, one torch thread each (the
small models here use a core better one per process than two threads per model); the records
do not depend on the worker count except through float summation order.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import multiprocessing
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.files import read_json  # bounded: a regular file, capped, nesting depth limited
from zoo.atomic import write_json_atomic

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")


@dataclasses.dataclass(frozen=True)
class Job:
    key: str  # "benchmark/method/seed42": the record's path under the folder, without ".json"
    function: Callable[..., dict]  # a module-level function (picklable), returning a JSON-able dict
    arguments: tuple
    fingerprint: str

    def __post_init__(self):
        if not _KEY.match(self.key) or ".." in self.key:
            raise ValueError(f"job key {self.key!r}: expected names of letters, digits, '.', '_', '-' joined by '/'")


class JobsFailed(RuntimeError):
    """Some jobs of a pool failed (the others' records are kept); `errors` holds (key, exception) pairs."""

    def __init__(self, message: str, errors: list[tuple[str, BaseException]]):
        super().__init__(message)
        self.errors = errors


def fingerprint(*parts: Any) -> str:
    """The sha256 of the parts as canonical JSON (dataclasses, tuples and paths become plain data)."""
    from zoo.schema import to_data

    text = json.dumps([to_data(part) for part in parts], sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _record_path(folder: Path, job: Job) -> Path:
    return folder / f"{job.key}.json"


def _stored(folder: Path, job: Job) -> dict | None:
    path = _record_path(folder, job)
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None  # a missing, damaged or hostile record (a FIFO, a gigabyte, deep nesting) is run again
    if not isinstance(record, dict) or record.get("fingerprint") != job.fingerprint:
        return None
    return record.get("outcome")


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _timed(function: Callable[..., dict], arguments: tuple) -> tuple[dict, float]:
    start = time.perf_counter()
    outcome = function(*arguments)
    return outcome, time.perf_counter() - start


def run_jobs(jobs: Sequence[Job], folder: str | Path | None, workers: int = 1,
             progress: Callable[[str], None] | None = None,
             describe: Callable[[dict], str] | None = None) -> dict[str, dict]:
    """Every job's outcome by key: stored records whose fingerprint matches, the rest run now.

    `folder` None: nothing is read or written (the jobs only run, in the pool with `workers > 1`).
    """
    folder = None if folder is None else Path(folder)
    keys = [job.key for job in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("job keys must be distinct")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    say = progress or (lambda message: None)
    outcomes: dict[str, dict] = {}
    pending = []
    for job in jobs:
        stored = None if folder is None else _stored(folder, job)
        if stored is None:
            pending.append(job)
        else:
            outcomes[job.key] = stored
    if outcomes:
        say(f"{len(outcomes)} of {len(jobs)} job(s) already done in {folder}; running {len(pending)}")
    start = time.perf_counter()

    def finished(job: Job, outcome: dict, seconds: float) -> None:
        if folder is not None:
            write_json_atomic(_record_path(folder, job), {"key": job.key, "fingerprint": job.fingerprint,
                                                          "seconds": seconds, "outcome": outcome})
        outcomes[job.key] = outcome
        done = len(outcomes)
        elapsed = time.perf_counter() - start
        ran = done - (len(jobs) - len(pending))
        left = elapsed / ran * (len(jobs) - done) if ran else 0.0
        detail = f": {describe(outcome)}" if describe else ""
        say(f"[{done}/{len(jobs)}] {job.key}{detail} ({seconds:.0f} s; about {left / 60:.0f} min left)")

    if workers == 1 or len(pending) <= 1:
        for job in pending:  # in this process: an error stops the run, the finished records stay
            outcome, seconds = _timed(job.function, job.arguments)
            finished(job, outcome, seconds)
        return outcomes
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=context,
                                                initializer=_one_thread) as pool:
        futures = {pool.submit(_timed, job.function, job.arguments): job for job in pending}
        failures = []
        for future in concurrent.futures.as_completed(futures):
            try:
                outcome, seconds = future.result()
            except Exception as error:  # noqa: BLE001 (the others finish and are kept; then it is raised)
                failures.append((futures[future].key, error))
                say(f"{futures[future].key} failed: {type(error).__name__}: {error}")
                continue
            finished(futures[future], outcome, seconds)
    if failures:
        key, error = failures[0]
        kept = f"the {len(outcomes)} finished are kept in {folder}" if folder is not None else \
            f"{len(outcomes)} finished (nothing recorded)"
        raise JobsFailed(f"{len(failures)} job(s) failed ({', '.join(k for k, _ in failures)}); {kept}. "
                         f"First: {key}: {error}", failures) from error
    return outcomes
