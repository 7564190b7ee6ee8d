"""The distributed generation driver: planned runs -> Ray Tune trials -> staging folder.

One trial trains a batch of runs (many models per trial: Tune's per-trial actor start costs
about a second, more than a tiny run). A local Ray instance is started with ``num_cpus``
unless ``address`` (or ``RAY_ADDRESS``) names a cluster to join. Failed trials are retried by
Tune (`FailureConfig`); an interrupted job is resumed by running it again, which skips every
checkpoint already staged. Ray is imported here and nowhere else in `zoo`.

Stopping is part of the contract: a SIGINT or SIGTERM ends the fit with
`GenerationInterrupted` (Tune's own SIGINT handler, which returned as if finished, is kept
out), `ray.init` and `ray.shutdown` are never cut in half by a signal, and a local instance
started here is marked and watched (`zoo.ray_cleanup`) so none of its processes outlives
the driver, even one killed by SIGKILL.

A full disk is part of it too: a trial whose staging write fails with ENOSPC (or a quota,
EDQUOT) reports it and ends instead of failing (a retry would only fail again), the fit
stops, and `generate` raises an `OSError` naming the staging folder and "No space left on
device" with what is staged (kept: every staged file is whole, `zoo.staging`), so that the
command ends in one line and a rerun after freeing space resumes. Tune's own bookkeeping goes
to a temporary folder, not the output folder: on a full output disk Tune failed writing it
and ended with an `EOFError` reading it back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from zoo.device import training_device
from zoo.families import create_family
from zoo.plan import Run, plan_runs
from zoo.population import populations
from zoo.folder import SPECS_FOLDER, STAGING_FOLDER, check_writable, save_spec
from zoo.ray_session import Signalled, connected, interruptible
from zoo.spec import ZooSpec, spec_from_data
from zoo.staging import Staging

DATA_FOLDER = "data"  # where `zoo.pack` writes the shards
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # a trial that meets these reports and ends: retrying cannot help

@dataclasses.dataclass(frozen=True)
class GenerateReport:
    runs: int  # planned
    checkpoints: int  # planned
    already_staged: int  # checkpoints found before training
    written: int  # checkpoints written by this invocation
    trials: int
    failed_trials: tuple[str, ...]  # error messages of trials that failed after their retries
    wall_time_s: float
    workers: int = 0  # CPUs of the Ray cluster
    fit_time_s: float = 0.0  # Tune's fit, start to end (the Ray instance's start-up excluded)
    busy_time_s: float = 0.0  # trials' own time (data, training, writing), summed over trials
    missing: int = 0  # planned checkpoints still not staged after the fit (failed trials): do not pack

    @property
    def scheduling_overhead(self) -> float:
        """The share of the workers' time during the fit not spent inside trials."""
        capacity = self.fit_time_s * min(self.workers, self.trials)
        return 1.0 - self.busy_time_s / capacity if capacity else 0.0


def default_runs_per_trial(num_runs: int, num_workers: int) -> int:
    """One trial per worker for small jobs (a trial costs seconds to start: an actor, torch,
    the data set); trials of at most 256 runs for large ones, so work balances and a retry
    repeats little."""
    return max(1, min(256, math.ceil(num_runs / max(1, num_workers))))


def pack_trials(runs: list[Run], family, spec: ZooSpec, trials: int, population_size: int) -> list[list[Run]]:
    """Whole populations dealt into `trials` trials of about equal work.

    Runs that can share a population (equal `population_key`) are cut, in plan order, into
    populations as the worker will form them; each goes, largest first, to the trial with the
    least work so far (the family's `run_flops`), so that no worker idles while another
    finishes: sorting alone left one demo trial with 40% more work than the other.
    """
    ordered = sorted(runs, key=family.population_key)  # stable: plan order within a key
    units = [(sum(family.run_flops(spec, r.hparams) for r in unit), unit)
             for unit in populations(ordered, population_size, family.population_key)]
    units.sort(key=lambda weighed: -weighed[0])
    bins: list[list[Run]] = [[] for _ in range(max(1, min(trials, len(units))))]
    loads = [0.0] * len(bins)
    for work, unit in units:
        least = loads.index(min(loads))
        bins[least] += unit
        loads[least] += work
    return [sorted(b, key=family.population_key) for b in bins]


def _trial(config: dict, spec_data: dict, batches: list[list[Run]], staging_dir: str, device: str | None,
           population_size: int | None) -> None:
    from ray import tune

    from zoo.worker import train_runs

    start = time.perf_counter()
    spec = spec_from_data(spec_data)
    done = {"runs": 0, "written": 0}

    def report(run: Run | None = None, written: int = 0) -> None:
        done["runs"] += run is not None
        done["written"] += written
        tune.report({"runs_done": done["runs"], "checkpoints_written": done["written"],
                     "busy_s": time.perf_counter() - start})

    try:
        train_runs(spec, batches[config["batch"]], Staging(staging_dir), on_run_done=report, device=device,
                   population_size=population_size)
    except OSError as error:
        if error.errno not in DISK_FULL:
            raise
        tune.report({"runs_done": done["runs"], "checkpoints_written": done["written"],
                     "busy_s": time.perf_counter() - start, "disk_full": error.strerror or "No space left on device"})
        return
    report()  # the trial's whole busy time, writing included


def _progress_callback(total_runs: int, show: bool):
    from ray import tune
    from tqdm import tqdm

    class Progress(tune.Callback):
        def __init__(self) -> None:
            self.bar = tqdm(total=total_runs, unit="run", desc="training", file=sys.stderr, dynamic_ncols=True,
                            disable=not show)
            self.seen: dict[str, int] = {}
            self.busy: dict[str, float] = {}  # each trial's latest busy time
            self.disk_full: str | None = None  # the reason a trial gave up writing, if any

        def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
            runs_done = int(result.get("runs_done", 0))
            self.bar.update(runs_done - self.seen.get(trial.trial_id, 0))
            self.seen[trial.trial_id] = runs_done
            self.busy[trial.trial_id] = float(result.get("busy_s", 0.0))
            if result.get("disk_full") and self.disk_full is None:
                self.disk_full = str(result["disk_full"])
                self.bar.write(f"the output folder is full ({self.disk_full}); stopping")

        def on_trial_error(self, iteration, trials, trial, **info) -> None:
            self.bar.write(f"trial {trial.trial_id} failed; Tune retries it (staged checkpoints are kept)")
            # a retried trial starts again from runs_done=0 and skips what it already wrote
            self.seen[trial.trial_id] = 0

        def on_experiment_end(self, trials, **info) -> None:
            self.bar.close()

    return Progress()


def _stop_when_disk_full(progress_callback):
    """A Tune stopper that ends the whole fit once a trial reported a full disk."""
    from ray import tune

    class StopWhenDiskFull(tune.Stopper):
        def __call__(self, trial_id, result) -> bool:
            return bool(result.get("disk_full"))

        def stop_all(self) -> bool:
            return progress_callback.disk_full is not None

    return StopWhenDiskFull()


class GenerationInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM ended the fit; what is staged stays staged, nothing was packed.

    A `KeyboardInterrupt`, so that no `except Exception` in Ray or Tune swallows it on the
    way out of the fit.
    """

    def __init__(self, signal_name: str, staged: int, planned: int) -> None:
        super().__init__(f"{signal_name}: {staged:,} of {planned:,} planned checkpoints are staged")
        self.signal_name, self.staged, self.planned = signal_name, staged, planned


def generate(spec: ZooSpec, out_dir: str | Path, *, num_cpus: int | None = None, address: str | None = None,
             runs_per_trial: int | None = None, max_failures: int = 2, progress: bool = True,
             device: str | None = None, population_size: int | None = None) -> GenerateReport:
    """Trains every planned checkpoint of `spec` not yet staged under `out_dir`/staging.

    `device` (default: $NFNZOO_DEVICE, else CUDA when the driver sees it) is where each trial
    trains its populations; on CUDA every trial asks Ray for an equal share of the GPUs.
    `population_size` overrides the family's members per population. The output folders are
    checked writable before Ray starts (`ValueError` naming the path). A SIGINT or SIGTERM
    raises `GenerationInterrupted` once the Ray instance is down; checkpoints that are still
    missing after the fit (failed trials) are counted in `GenerateReport.missing`.
    """
    start = time.perf_counter()
    family = create_family(spec.family, population_size=population_size)  # checks the size
    on_gpu = training_device(device).type == "cuda"  # checks the device, before Ray starts
    out_dir = Path(out_dir).resolve()
    check_writable(out_dir)
    for part in (SPECS_FOLDER, STAGING_FOLDER, DATA_FOLDER):
        if (out_dir / part).exists():
            check_writable(out_dir / part)
    save_spec(spec, out_dir)
    staging = Staging(out_dir / STAGING_FOLDER)
    runs = plan_runs(spec)
    total = sum(len(r.checkpoints) for r in runs)
    missing = {r.run_id: len(staging.missing(r.model_ids)) for r in runs}
    todo = [r for r in runs if missing[r.run_id]]
    already = total - sum(missing.values())
    if not todo:
        return GenerateReport(len(runs), total, already, 0, 0, (), time.perf_counter() - start)

    def still_missing() -> int:
        return sum(len(staging.missing(r.model_ids)) for r in todo)

    # Tune's rich console tables and its CSV/JSON/TensorBoard result loggers are noise and
    # overhead here: progress is our own bar, and the results are the staging folder.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    address = address or os.environ.get("RAY_ADDRESS")
    received: list[int] = []
    try:
        with interruptible() as received, connected(address, num_cpus):
            workers, batches, fit_time, failed, busy, disk_full = _fit(
                spec, family, todo, staging, runs_per_trial, max_failures, progress, device, population_size, on_gpu)
    except KeyboardInterrupt as interrupt:  # ours (`Signalled`), or Ray's rewrapping of it
        signum = interrupt.signum if isinstance(interrupt, Signalled) else (received or [signal.SIGINT])[0]
        raise GenerationInterrupted(signal.Signals(signum).name, total - still_missing(), total) from None
    left = still_missing()
    if disk_full is not None:
        raise OSError(errno.ENOSPC, f"{disk_full}; {total - left:,} of {total:,} planned checkpoints are staged and "
                                    "kept (nothing was packed): free some space and run the same command again "
                                    "to resume", str(staging.root))
    return GenerateReport(len(runs), total, already, total - already - left, batches, failed,
                          time.perf_counter() - start, workers, fit_time, busy, left)


def _fit(spec: ZooSpec, family, todo: list[Run], staging: Staging, runs_per_trial: int | None,
         max_failures: int, progress: bool, device: str | None, population_size: int | None,
         on_gpu: bool) -> tuple[int, int, float, tuple[str, ...], float, str | None]:
    """Tune's fit over `todo` on the connected Ray: (workers, trials, fit s, failures, busy s, and
    the reason the disk was full, if a trial met one)."""
    import ray
    from ray import tune

    workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = runs_per_trial or default_runs_per_trial(len(todo), workers)
    device_type = "cuda" if on_gpu else "cpu"
    batches = pack_trials(todo, family, spec, math.ceil(len(todo) / size), family.population_size_on(device_type))
    resources = {"cpu": 1}
    if on_gpu:
        gpus = ray.cluster_resources().get("GPU", 0)
        if not gpus:
            raise ValueError("device cuda requested, but the Ray cluster has no GPU resources")
        resources["gpu"] = min(1.0, gpus / workers)
        device = device or "cuda"
    # Tune's bookkeeping only (our state is the staging folder), kept off the output folder's disk
    storage = Path(tempfile.mkdtemp(prefix="nfnzoo-tune-"))
    progress_callback = _progress_callback(len(todo), progress)
    trainable = tune.with_resources(
        tune.with_parameters(_trial, spec_data=spec.to_data(), batches=batches, staging_dir=str(staging.root),
                             device=device, population_size=population_size),
        resources)
    tuner = tune.Tuner(
        trainable,
        param_space={"batch": tune.grid_search(list(range(len(batches))))},
        run_config=tune.RunConfig(
            name=f"generate-{spec.name}", storage_path=str(storage), verbose=0,
            failure_config=tune.FailureConfig(max_failures=max_failures),
            callbacks=[progress_callback], stop=_stop_when_disk_full(progress_callback),
        ),
    )
    fit_start = time.perf_counter()
    try:
        results = tuner.fit()
    finally:
        progress_callback.bar.close()  # also when interrupted: the message goes below the bar
        shutil.rmtree(storage, ignore_errors=True)
    fit_time = time.perf_counter() - fit_start
    failed = tuple(str(error).strip().splitlines()[-1] if str(error).strip() else repr(error)
                   for error in results.errors)
    return workers, len(batches), fit_time, failed, sum(progress_callback.busy.values()), progress_callback.disk_full
