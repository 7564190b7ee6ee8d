"""The distributed generation driver: planned runs -> Ray tasks on any node -> the staging folder.

One trial trains a batch of runs as a Ray generator task (`zoo.distributed.trial`).
A trial holds many models, since a task's start costs about a second, more than a tiny run.
A local Ray instance is started with ``num_cpus``.
If ``address`` (or ``RAY_ADDRESS``) names a cluster, the driver joins it instead.

Nodes share nothing but Ray; no folder is assumed common to the driver and the workers.
The driver loads the training data once and puts it in Ray's object store.
Each node fetches it once, and a trial checks its SHA-256.
Every finished checkpoint comes back to the driver in its trial's stream.
It arrives as the bytes of its staging file, checksummed.
The driver writes it here, whole or not at all (`Staging.write_payload`).
So the driver's staging folder stays the single source of truth.
Ids are content hashes, and a resumed run trains only what is missing from it.
A checkpoint received twice is written once.

Ray retries nothing by itself (``max_retries=0``).
A trial can fail through an error in training, or because its node was lost.
The driver then starts it again, up to ``max_failures`` times, for the checkpoints it had not yet sent.
Its members train the same bits in a smaller population.
So the zoo does not depend on which trials failed.

Why this and not a storage URI?
It needs nothing beyond the Ray cluster itself.
At a paper-scale trial's size, the driver writes checkpoints far faster than trials make them.
See ``benchmarks/perf/staging.py`` and docs/cluster.md.

Stopping is part of the contract.
A SIGINT or SIGTERM ends the generation with `GenerationInterrupted`.
A signal never cuts `ray.init` or `ray.shutdown` in half.
A local instance started here is marked and watched, so none of its processes outlives the driver.
That holds even for a driver killed by SIGKILL (`zoo.distributed.ray_session`, `zoo.distributed.ray_cleanup`).

A full disk is handled too.
A staging write that fails with ENOSPC (or a quota, EDQUOT) stops the trials.
Then `generate` raises an `OSError` naming the staging folder and "No space left on device".
It says what is staged, which is kept, since every staged file is whole.
So a rerun after freeing space resumes.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import signal
import sys
import time
from pathlib import Path

import torch

from zoo.training.device import portable_device_problem, training_device
from zoo.families import create_family
from zoo.planning.plan import Run, plan_runs
from zoo.training.population import populations
from zoo.storage.folder import SPECS_FOLDER, STAGING_FOLDER, check_writable, save_spec
from zoo.validation.inputs import InputError
from zoo.distributed.ray_session import Signalled, connected, interruptible
from zoo.planning.spec import ZooSpec
from zoo.storage.staging import PayloadWriter, Staging

DATA_FOLDER = "data"  # where `zoo.dataset.pack` writes the shards
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # a staging write that meets these stops the generation

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
    fit_time_s: float = 0.0  # the trials, first submitted to last finished (the Ray instance's start-up excluded)
    busy_time_s: float = 0.0  # trials' own time (data, training, writing), summed over trials
    missing: int = 0  # planned checkpoints still not staged after the fit (failed trials): do not pack
    nodes: int = 0  # Ray nodes that ran trials

    @property
    def scheduling_overhead(self) -> float:
        """The share of the workers' time during the fit not spent inside trials."""
        capacity = self.fit_time_s * min(self.workers, self.trials)
        return 1.0 - self.busy_time_s / capacity if capacity else 0.0


def default_runs_per_trial(num_runs: int, num_workers: int) -> int:
    """One trial per worker for small jobs; trials of at most 256 runs for large ones.

    A trial costs seconds to start: an actor, torch, the data set.
    Capping large trials balances work, and a retry repeats little.
    """
    return max(1, min(256, math.ceil(num_runs / max(1, num_workers))))


def pack_trials(runs: list[Run], family, spec: ZooSpec, trials: int, population_size: int) -> list[list[Run]]:
    """Whole populations dealt into `trials` trials of about equal work.

    Runs that can share a population (equal `population_key`) are cut into populations, in plan order.
    The cut is the one the worker will make.
    Each population goes, largest first, to the trial with the least work so far (the family's `run_flops`).
    So no worker idles while another finishes, as happened when runs were only sorted.
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


class GenerationInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM ended the fit; what is staged stays staged, nothing was packed.

    A `KeyboardInterrupt`, so that no `except Exception` in Ray or Tune swallows it on the
    way out of the fit.
    """

    def __init__(self, signal_name: str, staged: int, planned: int) -> None:
        super().__init__(f"{signal_name}: {staged:,} of {planned:,} planned checkpoints are staged")
        self.signal_name, self.staged, self.planned = signal_name, staged, planned


def trial_resources(device: str | None, gpus_per_trial: float | None, cluster: dict[str, float],
                    workers: int) -> tuple[str, float]:
    """(the device trials train on, GPUs each trial asks Ray for), checked against the cluster.

    `device` None means $NFNZOO_DEVICE, else ``auto``: CUDA when the cluster has GPUs.
    A CUDA trial asks for `gpus_per_trial` GPUs, and fractions share a GPU.
    The default is an equal share of the cluster's GPUs among its CPUs, at most one.
    So Ray places a CUDA trial only on a node with a GPU.
    A CPU trial asks for none.
    The driver's own node need not have a GPU.
    """
    gpus = float(cluster.get("GPU", 0))
    name = device or os.environ.get("NFNZOO_DEVICE") or ("cuda" if gpus_per_trial else "auto")
    if name == "auto":
        name = "cuda" if gpus else "cpu"
    kind = name.split(":")[0]
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {name!r} (from --device or NFNZOO_DEVICE): expected cpu, cuda or cuda:N")
    if kind == "cpu":
        if gpus_per_trial:
            raise ValueError(f"--gpus-per-trial {gpus_per_trial:g} asks for GPUs, but the device is {name!r}")
        return name, 0.0
    if not gpus:
        listed = ", ".join(f"{k} {v:g}" for k, v in sorted(cluster.items()) if "." not in k and ":" not in k)
        raise ValueError(f"device {name} requested, but the Ray cluster has no GPU (its resources: {listed})")
    share = gpus_per_trial or min(1.0, gpus / max(1, workers))
    if share > gpus:
        raise ValueError(f"--gpus-per-trial {share:g} is more than the Ray cluster's {gpus:g} GPUs")
    return name, share


def generate(spec: ZooSpec, out_dir: str | Path, *, num_cpus: int | None = None, address: str | None = None,
             runs_per_trial: int | None = None, max_failures: int = 2, progress: bool = True,
             device: str | None = None, population_size: int | None = None,
             gpus_per_trial: float | None = None) -> GenerateReport:
    """Trains every planned checkpoint of `spec` not yet staged under `out_dir`/staging.

    `device` is where each trial trains its populations.
    It defaults to $NFNZOO_DEVICE, else CUDA when the Ray cluster has GPUs.
    `gpus_per_trial` is what a CUDA trial asks Ray for (`trial_resources`).
    `population_size` overrides the family's members per population.
    The output folders are checked writable before Ray starts (`ValueError` naming the path).
    A portable spec trains on the CPU only.
    A GPU device, or ``auto`` beside a GPU, is a `ValueError` before Ray starts.
    For a cluster's GPUs, the error comes before any trial.
    A SIGINT or SIGTERM raises `GenerationInterrupted` once the Ray instance is down.
    Checkpoints still missing after every retry are counted in `GenerateReport.missing`.
    """
    start = time.perf_counter()
    family = create_family(spec.family, population_size=population_size)  # checks the size
    local = not address and not os.environ.get("RAY_ADDRESS")
    if spec.training.reproducibility == "portable":  # CPU only: a local instance's GPU is this machine's
        problem = portable_device_problem(spec.name, device, local and torch.cuda.is_available())
        if problem is not None:
            raise ValueError(problem)
    if device and local:
        training_device(device)  # a local instance trains here: the device must exist, checked before Ray starts
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

    # the data, read before Ray starts: a data set found nowhere is one line (`zoo.data.images.missing_data`)
    generation = _Generation(spec, family, todo, staging, max_failures, progress, population_size,
                             family.load_data(spec))
    address = address or os.environ.get("RAY_ADDRESS")
    received: list[int] = []
    try:
        with interruptible() as received, connected(address, num_cpus):
            outcome = generation.run(runs_per_trial, device, gpus_per_trial)
    except KeyboardInterrupt as interrupt:  # ours (`Signalled`), or Ray's rewrapping of it
        signum = interrupt.signum if isinstance(interrupt, Signalled) else (received or [signal.SIGINT])[0]
        raise GenerationInterrupted(signal.Signals(signum).name, total - still_missing(), total) from None
    left = still_missing()
    if outcome.disk_full is not None:
        raise OSError(errno.ENOSPC, f"{outcome.disk_full}; {total - left:,} of {total:,} planned checkpoints are "
                                    "staged and kept (nothing was packed): free some space and run the same command "
                                    "again to resume", str(staging.root))
    if outcome.machines:
        from zoo.distributed.machine import record_machines

        record_machines(out_dir, list(outcome.machines.values()))
    return GenerateReport(len(runs), total, already, outcome.written, outcome.trials, tuple(outcome.failed),
                          time.perf_counter() - start, outcome.workers, outcome.fit_time_s, outcome.busy_s, left,
                          len(outcome.nodes))


@dataclasses.dataclass
class _Outcome:
    workers: int = 0
    trials: int = 0
    written: int = 0
    fit_time_s: float = 0.0
    busy_s: float = 0.0
    failed: list[str] = dataclasses.field(default_factory=list)  # one line per trial given up or file not staged
    disk_full: str | None = None
    machines: dict[str, dict] = dataclasses.field(default_factory=dict)  # by description: {..., "checkpoints": n}
    nodes: set[str] = dataclasses.field(default_factory=set)  # Ray nodes that ran trials


class _Generation:
    """The trials of one `generate` on the connected Ray.

    It submits them and reads their streams as events arrive (`zoo.distributed.trial`).
    It stages each checkpoint here and starts failed trials again.
    """

    def __init__(self, spec: ZooSpec, family, todo: list[Run], staging: Staging, max_failures: int,
                 progress: bool, population_size: int | None, data) -> None:
        self.spec, self.family, self.todo, self.staging = spec, family, todo, staging
        self.data = data  # read on the driver, once: no node reads a path only the driver has
        self.max_failures, self.progress, self.population_size = max_failures, progress, population_size
        self.outcome = _Outcome()
        self.runs_done: set[str] = set()
        self.machine_of: dict = {}  # stream -> key of the machine it runs on, in `outcome.machines`

    def run(self, runs_per_trial: int | None, device: str | None, gpus_per_trial: float | None) -> _Outcome:
        import ray
        from tqdm import tqdm

        from zoo.distributed.trial import data_sha256, trial

        cluster = ray.cluster_resources()
        if self.spec.training.reproducibility == "portable":  # a cluster's GPUs are known once connected
            problem = portable_device_problem(self.spec.name, device, bool(cluster.get("GPU")))
            if problem is not None:
                raise ValueError(problem)
        workers = max(1, int(cluster.get("CPU", 1)))
        device, gpus = trial_resources(device, gpus_per_trial, cluster, workers)
        size = runs_per_trial or default_runs_per_trial(len(self.todo), workers)
        batches = pack_trials(self.todo, self.family, self.spec, math.ceil(len(self.todo) / size),
                              self.family.population_size_on(device.split(":")[0]))
        self.outcome.workers, self.outcome.trials = workers, len(batches)
        data, self.data = self.data, None  # into Ray's object store; the driver keeps no copy
        digest = data_sha256(data)
        data_ref = ray.put(data)
        del data
        options = {}
        if self.spec.training.reproducibility == "portable":  # a cluster's workers start with the pinned settings
            from zoo.training.reproducibility import PORTABLE_ENV  # (the local instance's inherit them anyway)

            options["runtime_env"] = {"env_vars": dict(PORTABLE_ENV)}
        remote = ray.remote(trial).options(num_cpus=1, num_gpus=gpus, max_retries=0, num_returns="streaming",
                                           **options)
        streams: dict = {}  # ObjectRefGenerator -> (batch index, attempt)

        def submit(index: int, attempt: int) -> None:
            runs = batches[index]
            missing = [m for r in runs for m in self.staging.missing(r.model_ids)]
            if missing:
                stream = remote.remote(self.spec.to_data(), runs, missing, data_ref, digest, device,
                                       self.population_size)
                streams[stream] = (index, attempt)

        self.bar = tqdm(total=len(self.todo), unit="run", desc="training", file=sys.stderr, dynamic_ncols=True,
                        disable=not self.progress)
        self.writer = PayloadWriter(self.staging)
        fit_start = time.perf_counter()
        try:
            for index in range(len(batches)):
                submit(index, 0)
            while streams and self.outcome.disk_full is None:
                ready, _ = ray.wait(list(streams), num_returns=1, timeout=0.5)
                if ready and len(streams) > 1:  # and every other stream with an event waiting
                    ready, _ = ray.wait(list(streams), num_returns=len(streams), timeout=0)
                for stream in ready:
                    self._read(stream, streams, submit)
                self._collect()
            self._collect(wait_all=True)
        finally:
            self.bar.close()  # also when interrupted: the message goes below the bar
            for stream in streams:  # a full disk, an interrupt: nothing more is wanted from them
                ray.cancel(stream, force=True)
            self.writer.close()
        self.outcome.fit_time_s = time.perf_counter() - fit_start
        return self.outcome

    def _read(self, stream, streams: dict, submit) -> None:
        """The next event of `stream` (ready), or its end, or its failure (started again, or given up)."""
        import ray

        index, attempt = streams[stream]
        try:
            event = ray.get(next(stream))
        except StopIteration:
            del streams[stream]
            return
        except ray.exceptions.RayError as error:
            del streams[stream]
            reason = _one_line(error)
            if attempt < self.max_failures:
                self.bar.write(f"trial {index} failed ({reason}); starting it again for the checkpoints it had not "
                               "sent (those it sent are staged)")
                submit(index, attempt + 1)
            else:
                self.outcome.failed.append(f"trial {index}, after {attempt + 1} attempts: {reason}")
            return
        kind = event[0]
        if kind == "checkpoint":
            self._stage(event[1], event[2], stream)
        elif kind == "run" and event[1] not in self.runs_done:
            self.runs_done.add(event[1])
            self.bar.update(1)
        elif kind == "machine":
            key = repr(sorted(event[1].items()))
            self.outcome.machines.setdefault(key, {**event[1], "checkpoints": 0})
            self.machine_of[stream] = key
            self.outcome.nodes.add(event[2])
        elif kind == "done":
            self.outcome.busy_s += float(event[1])

    def _stage(self, model_id: str, payload: bytes, stream) -> None:
        if self.writer.pending(model_id) or self.staging.exists(model_id):  # a retried trial's duplicate
            return
        self.writer.submit(model_id, payload, self.machine_of.get(stream))

    def _collect(self, wait_all: bool = False) -> None:
        """Counts the staging writes that finished; a full disk stops the generation."""
        for model_id, machine, error in self.writer.done(wait_all):
            if error is None:
                self.outcome.written += 1
                if machine is not None:
                    self.outcome.machines[machine]["checkpoints"] += 1
            elif isinstance(error, OSError) and error.errno in DISK_FULL:
                if self.outcome.disk_full is None:
                    self.outcome.disk_full = error.strerror or "No space left on device"
                    self.bar.write(f"the output folder is full ({self.outcome.disk_full}); stopping")
            elif isinstance(error, OSError):
                self.outcome.failed.append(f"{error.filename or self.staging.path(model_id)}: "
                                           f"{error.strerror or error}; checkpoint {model_id} not staged")
            elif isinstance(error, InputError):  # a refused payload, or a file or link in the staging folder's way
                message = str(error)
                self.outcome.failed.append(message if model_id in message
                                           else f"{message}; checkpoint {model_id} not staged")
            else:
                raise error


def _one_line(error: BaseException) -> str:
    """The last line of a Ray error (the cause, not Ray's traceback of it), at most 240 characters."""
    text = str(error).strip()
    line = text.splitlines()[-1] if text else type(error).__name__
    return line if len(line) <= 240 else line[:239] + "…"
