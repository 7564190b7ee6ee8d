"""Training a batch of planned runs into the staging folder (what one Ray trial does).

Training resumes at checkpoint granularity.
A run whose checkpoints all exist is skipped.
A run with some missing is retrained from its seed, since training is deterministic.
Only the missing checkpoints are written.
The module is free of Ray, so it runs and tests on its own.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from zoo.training.device import exact_float32, to_device, training_device
from zoo.families import CheckpointResult, create_family
from zoo.planning.plan import Run
from zoo.storage.record import CheckpointRecord
from zoo.planning.spec import ZooSpec
from zoo.storage.staging import Staging

TRAINING_THREADS = 1  # one run per core: reproducible, and more threads only contend for tiny models


def train_runs(spec: ZooSpec, runs: Sequence[Run], staging: Staging, *, data=None,
               on_run_done: Callable[[Run, int], None] | None = None, device: str | None = None,
               population_size: int | None = None) -> int:
    """Trains the runs that have missing checkpoints; returns the number of checkpoints written.

    Torch runs on `TRAINING_THREADS` threads meanwhile.
    The reduction order, and so the exact weights, depend on the thread count.
    A resumed run must retrace its original path.
    """
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(TRAINING_THREADS)
    try:
        return _train_runs(spec, runs, staging, data, on_run_done, device, population_size)
    finally:
        torch.set_num_threads(previous_threads)


def _train_runs(spec: ZooSpec, runs: Sequence[Run], staging: Staging, data, on_run_done, device,
                population_size) -> int:
    family = create_family(spec.family, population_size=population_size)
    missing = {run.run_id: set(staging.missing(run.model_ids)) for run in runs}
    todo = [run for run in runs if missing[run.run_id]]
    written = 0

    emitted = dict.fromkeys(missing, 0)  # run -> checkpoints emitted: the run is done when all were

    def emit(run: Run, result: CheckpointResult) -> None:
        nonlocal written
        # the best checkpoint is found by its flag (its epoch is the real best epoch, not the plan's)
        model_id = next(c.model_id for c in run.checkpoints
                        if c.best == result.best and (result.best or c.epoch == result.epoch))
        if model_id in missing[run.run_id]:
            staging.write(CheckpointRecord(
                model_id=model_id, run_id=run.run_id, family=spec.family, config=spec.name,
                epoch=result.epoch, seed=run.seed, hparams=run.hparams, metrics=result.metrics,
                status=result.status, architecture=spec.architecture, weights=result.weights))
            written += 1
        emitted[run.run_id] += 1
        if emitted[run.run_id] == len(run.checkpoints) and on_run_done is not None:
            on_run_done(run, len(missing[run.run_id]))

    for run in runs:
        if not missing[run.run_id] and on_run_done is not None:
            on_run_done(run, 0)
    if todo:
        _check_reproducibility(spec, device)
        data = data if data is not None else family.load_data(spec)
        exact_float32()
        family.train_population(spec, todo, to_device(data, training_device(device)), emit)
    return written


def _check_reproducibility(spec: ZooSpec, device: str | None) -> None:
    """Under the portable mode, this process must compute as it pins (`zoo.training.reproducibility`).

    A setting that did not take is an error before anything trains, never a silent other zoo.
    """
    if spec.training.reproducibility != "portable":
        return
    from zoo.training.reproducibility import process_problem

    if training_device(device).type != "cpu":
        raise ValueError(f"{spec.name}: the portable mode pins the CPU's instruction sets; a GPU zoo's bytes are its "
                         "device's own: generate it with --device cpu, or in the native mode on the GPU")
    problem = process_problem()
    if problem is not None:
        raise ValueError(f"{spec.name}: this process cannot train in the portable mode: {problem}; `nfnzoo "
                         "generate` sets the environment itself (zoo.training.reproducibility.portable_environment)")


def configure_threads(num_threads: int) -> None:
    """Sets torch's intra-op threads (tests use one, as training does)."""
    torch.set_num_threads(max(1, num_threads))
