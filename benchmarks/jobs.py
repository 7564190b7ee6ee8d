"""Resumable jobs: one JSON record per finished job, run as Ray tasks (or in this process).

A long study is split into jobs. A job is a track's method on one benchmark with one seed, a
benchmark run's seed (`benchmarks.harness`), or one seed of a suite's entry. Each is a module-level
function and its arguments, with a fingerprint. The fingerprint hashes everything that decides the
outcome: the settings, the data's or the backbone's checksum, the seed, the device type.

`run_jobs` writes each finished job's record to `<folder>/<job key>.json` at once, atomically. On a
re-run, it takes a record whose fingerprint matches instead of running the job again. A record with
another fingerprint (the settings changed) is run again and replaced. So an interrupted study loses
at most the jobs in flight, and the same command on the same folder resumes. Without a folder
nothing is recorded.

Where the jobs run:

With `workers == 1` and no `address`, they run one after another in this process. No Ray is
started, which saves its start on every small run. A debugger and a profiler see the job. The first
error is chained to `JobsFailed` with its traceback. A test can patch a job function.

Otherwise each job is a Ray task (`num_cpus=1`, `num_gpus=gpus_per_job`, one torch thread). It runs
on a local instance with `workers` CPUs (`zoo.distributed.ray_session.connected`). Or it runs on
the cluster at `address`, whose resources then decide how many run at once. The driver gathers each
outcome as it finishes (`ray.wait`), and writes its record itself. So a worker node writes nothing,
and needs none of the driver's folders. Arguments travel through Ray's object store. An object
shared by several jobs, such as a dataset's splits or a track's data, travels once. So a job's
function must take its data as arguments, never as a path only the driver can read. Each task runs
in a fresh worker process (`max_calls=1`). So the job's peak memory is its own (`benchmarks.memory`).
Nothing cached by an earlier job leaks into it; docs/cluster.md has what that costs. Ray retries a
worker lost with its node.

Either way a failed job does not stop the others. They finish and are kept. Then `JobsFailed` is
raised, with the finished outcomes, and the first error as its cause. The outcomes do not depend on
where a job ran, beyond float summation order. Every job runs on one torch thread on Ray; in this
process, on the caller's."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.files import read_json  # bounded: a regular file, capped, nesting depth limited
from benchmarks.memory import keep_freed_memory, peak_mb, reset_peak
from zoo.storage.atomic import write_json_atomic

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")
MAX_GPUS_PER_JOB = 64
_INLINE = (str, int, float, bool, type(None))  # arguments passed by value; anything else goes through the object store


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
    """Some jobs failed (the others' records are kept); `errors` holds (key, exception) pairs."""

    def __init__(self, message: str, errors: list[tuple[str, BaseException]], outcomes: dict | None = None):
        super().__init__(message)
        self.errors = errors
        self.outcomes = dict(outcomes or {})  # the finished jobs' outcomes by key


class UnrecordableOutcome(ValueError):
    """A job's outcome that JSON cannot hold (a NaN, an object): that job failed, the others go on."""


def fingerprint(*parts: Any) -> str:
    """The sha256 of the parts as canonical JSON (dataclasses, tuples and paths become plain data)."""
    from zoo.validation.schema import to_data

    text = json.dumps([to_data(part) for part in parts], sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def uses_ray(workers: int, address: str | None) -> bool:
    """Whether `run_jobs` runs the jobs as Ray tasks (else in this process, one after another)."""
    return workers > 1 or bool(address)


def check_gpus_per_job(gpus_per_job: float) -> float:
    """`gpus_per_job` if it is a finite number from 0 to `MAX_GPUS_PER_JOB` (a fraction shares a GPU)."""
    if not isinstance(gpus_per_job, (int, float)) or not math.isfinite(gpus_per_job) or \
            not 0 <= gpus_per_job <= MAX_GPUS_PER_JOB:
        raise ValueError(f"gpus per job must be a number from 0 to {MAX_GPUS_PER_JOB} (a fraction shares a GPU), "
                         f"got {gpus_per_job!r}")
    return float(gpus_per_job)


def job_device(device: str | None, workers: int, address: str | None, gpus_per_job: float) -> str:
    """The torch device type the jobs run on, decided on the driver; it is part of every fingerprint.

    On Ray a job sees the GPUs Ray gives it (`gpus_per_job`), and no other. That is "cuda" with GPUs,
    and "cpu" without. Asking for CUDA without GPUs per job is an error, and so is asking GPUs for a CPU
    run. In this process, it is `device`, else CUDA when this machine has it. GPUs per job need CUDA
    here."""
    gpus_per_job = check_gpus_per_job(gpus_per_job)
    wanted = None if device is None else str(device).split(":")[0]
    if wanted not in (None, "cpu", "cuda"):
        raise ValueError(f"device {device!r}: expected cpu or cuda")
    if uses_ray(workers, address):
        if wanted == "cuda" and not gpus_per_job:
            raise ValueError("device cuda on Ray needs GPUs per job (--gpus-per-job 1): a job sees only the GPUs "
                             "Ray gives it")
        if wanted == "cpu" and gpus_per_job:
            raise ValueError(f"--gpus-per-job {gpus_per_job:g} reserves GPUs that device cpu would not use; "
                             "leave one of them out")
        return "cuda" if gpus_per_job else "cpu"
    import torch

    if (gpus_per_job or wanted == "cuda") and not torch.cuda.is_available():
        raise ValueError("no CUDA GPU on this machine: leave out --gpus-per-job and --device cuda, or give a "
                         "cluster with GPUs with --address")
    if wanted is not None:
        return str(device)
    return "cuda" if gpus_per_job or torch.cuda.is_available() else "cpu"


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


def _execute(function: Callable[..., dict], arguments: tuple) -> dict:
    """Runs one job here: its outcome, wall time and peak memory (the resident set's, from its start)."""
    keep_freed_memory()
    reset_peak()
    start = time.perf_counter()
    outcome = function(*arguments)
    return {"outcome": outcome, "seconds": time.perf_counter() - start, "peak_memory_mb": peak_mb(),
            "pid": os.getpid()}


def _remote_job(function: Callable[..., dict], *arguments: Any) -> dict:
    """A Ray task's body: the job on one torch thread.

    An error comes back as a value, with its own type and message, not Ray's wrapper with a remote
    traceback. So the driver reports it in one line."""
    import ray
    import torch

    torch.set_num_threads(1)  # num_cpus=1: more threads only contend, and change float summation order
    try:
        result = _execute(function, arguments)
    except Exception as error:  # noqa: BLE001 (returned to the driver, which raises it or JobsFailed)
        try:
            import pickle

            pickle.dumps(error)
        except Exception:  # noqa: BLE001 (an exception that does not pickle travels as its text)
            error = RuntimeError(f"{type(error).__name__}: {error}")
        return {"error": error}
    result["node_id"] = ray.get_runtime_context().get_node_id()
    return result


def _check_gpus(gpus_per_job: float, address: str | None) -> None:
    import ray

    if not gpus_per_job:
        return
    largest = max((node.get("Resources", {}).get("GPU", 0.0) for node in ray.nodes() if node.get("Alive")),
                  default=0.0)
    if largest < gpus_per_job:
        where = f"the Ray cluster at {address}" if address else "this machine's Ray instance"
        raise ValueError(f"--gpus-per-job {gpus_per_job:g}: {where} has no node with that many GPUs "
                         f"(the most on one node: {largest:g}); nothing was run")


def stderr_printer(label: str) -> Callable[[str], None]:
    """A `progress` callback: each message to stderr as `<label>: <message>`, flushed.

    It writes above any progress bar on the terminal. The bars are cleared and redrawn after, by
    tqdm's external write mode. So a seed's epoch lines printed in-process do not run into `run_jobs`' bar."""
    def say(message: str) -> None:
        from tqdm import tqdm

        with tqdm.external_write_mode(file=sys.stderr):
            print(f"{label}: {message}", file=sys.stderr, flush=True)

    return say


def _progress_bar(total: int, done: int, enabled: bool):
    from tqdm import tqdm

    # on a terminal only: a log (CI, a pipe) gets the `progress` lines, not a bar's redraws
    return tqdm(total=total, initial=done, unit="job", file=sys.stderr, disable=not enabled or not sys.stderr.isatty(),
                dynamic_ncols=True, smoothing=0.1, leave=False)


def run_jobs(jobs: Sequence[Job], folder: str | Path | None, workers: int = 1,
             progress: Callable[[str], None] | None = None,
             describe: Callable[[dict], str] | None = None, *,
             address: str | None = None, gpus_per_job: float = 0.0) -> dict[str, dict]:
    """Every job's outcome by key: stored records whose fingerprint matches, the rest run now.

    With `folder` None, nothing is read or written. `workers == 1` without `address` runs the jobs in
    this process. Otherwise they are Ray tasks on a local instance of `workers` CPUs, or on the cluster
    at `address`. Each gets `gpus_per_job` GPUs (see the module docstring). `progress` gets a line per
    finished job. While it is given, a progress bar shows on stderr."""
    folder = None if folder is None else Path(folder)
    keys = [job.key for job in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("job keys must be distinct")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    gpus_per_job = check_gpus_per_job(gpus_per_job)
    outcomes: dict[str, dict] = {}
    pending = []
    for job in jobs:
        stored = None if folder is None else _stored(folder, job)
        if stored is None:
            pending.append(job)
        else:
            outcomes[job.key] = stored
    bar = _progress_bar(len(jobs), len(outcomes), progress is not None and bool(pending))

    def say(message: str) -> None:
        if progress is not None:
            with bar.external_write_mode(file=sys.stderr):
                progress(message)

    if outcomes:
        say(f"{len(outcomes)} of {len(jobs)} job(s) already done in {folder}; running {len(pending)}")
    start = time.perf_counter()

    def finished(job: Job, result: dict) -> None:
        try:
            json.dumps(result["outcome"], allow_nan=False)
        except (TypeError, ValueError) as error:  # a NaN metric: this job failed (its record would be refused)
            raise UnrecordableOutcome(f"{job.key}: its outcome cannot be recorded as JSON ({error})") from None
        if folder is not None:
            write_json_atomic(_record_path(folder, job), {
                "key": job.key, "fingerprint": job.fingerprint, "seconds": result["seconds"],
                "peak_memory_mb": result["peak_memory_mb"], "node_id": result.get("node_id"),
                "outcome": result["outcome"]})
        outcomes[job.key] = result["outcome"]
        bar.update(1)
        done = len(outcomes)
        ran = done - (len(jobs) - len(pending))
        left = (time.perf_counter() - start) / ran * (len(jobs) - done) if ran else 0.0
        detail = f": {describe(result['outcome'])}" if describe else ""
        node = f" on node {result['node_id'][:12]}" if result.get("node_id") else ""  # which machine, on Ray
        say(f"[{done}/{len(jobs)}] {job.key}{detail} ({result['seconds']:.0f} s{node}; about {left / 60:.0f} min left)")

    failures: list[tuple[str, BaseException]] = []
    try:
        if not pending:
            return outcomes
        if not uses_ray(workers, address):
            for job in pending:  # in this process, one after another
                try:
                    result = _execute(job.function, job.arguments)
                except Exception as error:  # noqa: BLE001 (the others run and are kept; then it is raised)
                    failures.append((job.key, error))
                    if len(pending) > 1:  # the others go on; a lone job's error is the command's one line
                        say(f"{job.key} failed: {type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}")
                    continue
                _record(finished, job, result, failures, say, len(pending))
        else:
            _run_on_ray(pending, workers, address, gpus_per_job, finished, failures, say)
    finally:
        bar.close()
    if failures:
        key, error = failures[0]
        kept = f"the {len(outcomes)} finished are kept in {folder}" if folder is not None else \
            f"{len(outcomes)} finished (nothing recorded)"
        raise JobsFailed(f"{len(failures)} job(s) failed ({', '.join(k for k, _ in failures)}); {kept}. "
                         f"First: {key}: {error}", failures, outcomes) from error
    return outcomes


def _record(finished: Callable[[Job, dict], None], job: Job, result: dict, failures: list,
            say: Callable[[str], None], pending: int) -> None:
    """`finished(job, result)`; an outcome no record can hold (a NaN) fails that job only, as its error would."""
    try:
        finished(job, result)
    except UnrecordableOutcome as error:
        failures.append((job.key, error))
        if pending > 1:
            say(f"{job.key} failed: {error}")


def _run_on_ray(pending: Sequence[Job], workers: int, address: str | None, gpus_per_job: float,
                finished: Callable[[Job, dict], None], failures: list, say: Callable[[str], None]) -> None:
    """Submits the jobs as Ray tasks, and hands each result to `finished` as it comes.

    A failure goes to `failures`. An interruption cancels what is in flight; its records were never
    written."""
    import ray
    from ray.exceptions import RayError

    from zoo.distributed.ray_session import connected, interruptible
    from zoo.named_import import worker_environment

    with interruptible(), connected(address, num_cpus=workers):
        _check_gpus(gpus_per_job, address)
        options: dict[str, Any] = {"num_gpus": gpus_per_job}
        named = worker_environment()  # a model imported from the working folder: the workers look there too
        if named:
            options["runtime_env"] = {"env_vars": named}
        remote = ray.remote(num_cpus=1, max_calls=1)(_remote_job).options(**options)
        stored: dict[int, Any] = {}  # id(argument) -> ObjectRef: an object shared by jobs is put once

        def by_reference(value: Any) -> Any:
            if isinstance(value, _INLINE):
                return value
            if id(value) not in stored:
                stored[id(value)] = ray.put(value)
            return stored[id(value)]

        in_flight = {remote.remote(job.function, *map(by_reference, job.arguments)): job for job in pending}
        try:
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                job = in_flight.pop(ready[0])
                try:
                    result = ray.get(ready[0])
                except RayError as error:  # the task could not run (its worker or node lost past Ray's retries)
                    result = {"error": error}
                if "error" in result:
                    error = result["error"]
                    failures.append((job.key, error))
                    if len(pending) > 1:  # the others go on; a lone job's error is the command's one line
                        say(f"{job.key} failed: {type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}")
                    continue
                _record(finished, job, result, failures, say, len(pending))
        except BaseException:
            for reference in in_flight:  # an interruption: what runs now is lost, a re-run resumes
                ray.cancel(reference, force=True)
            raise
