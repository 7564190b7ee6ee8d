"""The benchmark harness: runs a model on a task over seeds and writes a results file.

`run_benchmark` loads the train, validation and test splits of a dataset once, through
`zoo.loader`. It runs the task once per seed, measuring each seed's wall-clock time and peak
memory. Then it writes the results JSON; its schema is `benchmarks.results.Results`, documented in
`leaderboards/SCHEMA.md`. Beside it goes a predictions sidecar CSV for plots:
`<stem>.predictions.csv`, with seed, model_id, target and prediction. Both are written as one commit
(`benchmarks.files.write_with_sidecars`). So a run killed while writing leaves the old results with
their predictions, or the new ones with theirs. Progress goes to stderr, one line per seed.

Each seed is a resumable job (`benchmarks.jobs`). With an output path, a finished seed's record is
written at once to `<stem>.seeds/seed<k>.json` beside the results. The record holds its metrics,
selection, predictions and figure arrays. It is keyed by a hash of the task, the model and their
resolved configs. The dataset's hash, the device type and the package version go into the key too.
A re-run of the same command takes the records that match and runs only the missing seeds. So a
run cut off after two of three hour-long seeds loses only the third. The folder is removed once the
results file is written.

`workers > 1` or a Ray cluster's `address` runs the seeds as Ray tasks (`benchmarks.jobs`). The
splits travel to the workers through Ray's object store. Each seed's peak memory is measured in its
own process, and the records are written here.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
import pandas
import torch

import zoo
from benchmarks.claims import check_claims, describe as describe_claims
from benchmarks.files import check_targets, npz_bytes, write_with_sidecars
from benchmarks.jobs import Job, JobsFailed, fingerprint, run_jobs, stderr_printer
from benchmarks.memory import peak_mb, reset_peak
from benchmarks.model_identity import ResolvedModel, resolve_model
from benchmarks.outputs import ModelOutputError
from benchmarks.protocol import architecture_overrides, hparam_overrides, with_architectures
from benchmarks.run_options import RunOptions
from benchmarks.results import SCHEMA_VERSION, Results, describe_hardware, summarize
from benchmarks.tasks import SPLITS, create_task
from benchmarks.tasks.limits import model_size_problem
from benchmarks.tasks.rows import kept_by
from benchmarks.tasks.registry import TASKS
from benchmarks.threads import threads_line
from nfn_models import model_config
from zoo.reader import DEFAULT_SPLITS  # a task's `splits` default: the zoo's own run-disjoint split
from zoo.validation.schema import from_data, to_data

if TYPE_CHECKING:
    from zoo.loader import ZooSplit


def predictions_path(results_path: str | Path) -> Path:
    """Where the predictions sidecar of a results file lives: `<stem>.predictions.csv` beside it."""
    results_path = Path(results_path)
    return results_path.with_name(f"{results_path.stem}.predictions.csv")


def examples_path(results_path: str | Path) -> Path:
    """Where a task's figure arrays live: `<stem>.examples.npz` beside the results (plain arrays, no pickles)."""
    results_path = Path(results_path)
    return results_path.with_name(f"{results_path.stem}.examples.npz")


def seeds_folder(results_path: str | Path) -> Path:
    """Where the finished seeds' records of an unfinished run live: `<stem>.seeds/` beside the results."""
    results_path = Path(results_path)
    return results_path.with_name(f"{results_path.stem}.seeds")



def load_splits(data_path: str | Path, config: str | None, split_set: str = DEFAULT_SPLITS, *,
                keep: Callable[[str, "pandas.DataFrame"], np.ndarray | None] | None = None
                ) -> tuple[dict[str, "ZooSplit"], dict[str, str | None]]:
    """The three splits of a dataset config, and the dataset as results record it.

    `zoo.reader.read_zoo` reads them from a folder or a Hub repo `ORG/NAME[@REVISION]`. It reads the
    config's own split, or the split set `split_set`. Each split is narrowed by `keep(split, metadata)`
    before its weights are decoded. The dataset record holds the checked hash and where anyone gets
    the bytes. It never holds the folder this machine read them from."""
    from zoo.reader import read_zoo

    read = read_zoo(data_path, config, split_set, keep=keep)
    # the manifest's architectures ride along in the metadata, for augmentation by each row's group
    splits = {name: with_architectures(read.splits[name], read.architectures, read.spec) for name in SPLITS}
    dataset = {"config": read.config, "dataset_hash": read.dataset_hash, "family": read.family,
               "repo": read.repo, "revision": read.revision, "source": read.source}
    if read.split_set_sha256 is not None:
        dataset["split_set_sha256"] = read.split_set_sha256
    return splits, dataset


def split_set_of(task_overrides: Mapping[str, Any] | None, task: str | None = None) -> str:
    """The split set a task's overrides ask for (`--set task.splits=nfn`), or the zoo's own split.

    With `task`, a preset may ask for one too (`--set task.preset=nfn`)."""
    value = (task_overrides or {}).get("splits", DEFAULT_SPLITS)
    if task is not None:
        value = getattr(create_task(task, **dict(task_overrides or {})).config, "splits", DEFAULT_SPLITS)
    if not isinstance(value, str):
        raise ValueError(f"task.splits: expected the name of a split set, got {value!r}")
    return value


def _hardware(device: torch.device) -> dict[str, str | int | None]:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    # the threads change the time and the float summation order (`benchmarks.threads` chose them)
    return {**describe_hardware(f"cuda ({gpu})" if gpu else "cpu", gpu), "threads": torch.get_num_threads()}


@dataclasses.dataclass
class PreparedRun:
    """A benchmark run as jobs (one per seed, keyed `seed<k>`) and what makes its results of their outcomes."""

    jobs: list[Job]
    finish: Callable[[Mapping[str, dict]], dict]  # the outcomes by job key -> the results (written with an out path)
    label: str  # what its progress lines start with: `bench <task>/<model>` or the caller's


def describe_seed(outcome: dict) -> str:
    """A seed's progress line: its metrics and training time."""
    shown = " ".join(f"{name}={value:.4f}" for name, value in outcome["entry"]["metrics"].items())
    return f"{shown} [{outcome['entry']['train_time_s']:.1f} s]"


def prepare_run(task: str, model: str | ResolvedModel, splits: Mapping[str, "ZooSplit"],
                dataset: Mapping[str, str], options: RunOptions, out_path: str | Path | None = None, *,
                device: str = "cpu", label: str | None = None) -> PreparedRun:
    """Checks the run and makes its seed jobs.

    `run_on_splits` runs them; `benchmarks.suite` runs every entry's together. `device` is the device
    type the jobs run on (`Placement.job_device`). With `options.progress`, a seed that trains for
    long prints its epochs to stderr. Each line reads `<label> seed <k>: ...`, and `label` defaults
    to `bench <task>/<model>`.

    `model` is a name the registry resolves, or a model resolved already.
    `benchmarks.model_identity.resolve_model` resolves it once a run, with its board name. The
    results record that name as their `model`, and how the model was loaded as their
    `model_source`. The model's symmetry claims are checked here, before any training
    (`benchmarks.claims`). They are recorded in the results' `claims`."""
    seeds, progress = list(options.seeds), options.progress
    if out_path is not None:  # a link at the results file or a sidecar's name: refused before any training
        check_targets(out_path, [predictions_path(out_path).name, examples_path(out_path).name])
    resolved = resolve_model(model)  # once: a name the board would refuse is an error now, not after training
    model, shown_name = resolved.registered, resolved.name  # results record the registered spellings
    task = TASKS.resolve(task)
    model_overrides, task_overrides = dict(options.model_overrides), dict(options.task_overrides)
    if "train" in splits:  # hyperparameters that describe the members (a transformer's head count) come from the zoo
        model_overrides = architecture_overrides(resolved.cls, model_overrides, splits["train"].metadata,
                                                 f"model {model!r} on config {dataset.get('config')}")
    runner = create_task(task, **task_overrides)
    model_overrides = hparam_overrides(resolved.cls, model_overrides, splits,  # e.g. the members' activation
                                       getattr(runner.config, "subset", {}),
                                       f"model {model!r} on config {dataset.get('config')}")
    model_overrides = runner.model_overrides(model, model_overrides, splits)  # what the task fixes, recorded
    model_hparams = model_config(model, **model_overrides)  # validates before any training
    if "train" in splits:  # its widths: the parameters counted before anything is built (no memory)
        problem = model_size_problem(model, splits["train"].weights.space, model_overrides)
        if problem is not None:
            raise ValueError(problem)
    label = label or f"bench {task}/{shown_name}"
    if progress:  # what the claims check runs on, and the seeds in this process (`benchmarks.threads`)
        print(f"{label}: {threads_line()}", file=sys.stderr, flush=True)
    claims = check_claims(model, model_overrides, str(dataset.get("family", "")))
    false_claim = claims is not None and claims["verdict"] == "false claim"
    if progress or false_claim:  # a false claim is said whatever the progress
        print(f"{label}: " + (f"WARNING: {describe_claims(claims)}; the results record it, and `nfnzoo leaderboard "
                              "submit` refuses them" if false_claim else describe_claims(claims)), file=sys.stderr)
    device_type = torch.device(device).type
    # a moved folder, or the same bytes from another source, is the same data
    described = {key: value for key, value in dataset.items() if key not in ("path", "source")}
    common = fingerprint(task, model, model_hparams, runner.config, described, device_type, zoo.__version__)
    inputs = runner.driver_inputs(splits)  # what the task reads besides the splits, read here (the data is here)
    jobs = [Job(f"seed{seed}", _run_seed, (task, model, model_overrides, task_overrides, inputs, seed, str(device),
                                           f"{label} seed {seed}" if progress else None),
                fingerprint(common, seed)) for seed in seeds]  # the label is not in the fingerprint: it decides nothing

    def finish(outcomes: Mapping[str, dict]) -> dict:
        ordered = [outcomes[job.key] for job in jobs]
        per_seed = [outcome["entry"] for outcome in ordered]
        tables = [pandas.DataFrame(outcome["predictions"]).assign(seed=seed) for outcome, seed in zip(ordered, seeds)]
        examples = _arrays(ordered[0]["examples"])
        results = {
            "schema_version": SCHEMA_VERSION,
            "task": task,
            "model": shown_name,
            "model_config": to_data(model_hparams),
            "task_config": to_data(runner.config),
            "dataset": {key: value for key, value in dataset.items() if key != "path"},  # no local path
            "seeds": seeds,
            "per_seed": per_seed,
            "summary": summarize([entry["metrics"] for entry in per_seed]),
            "num_params": ordered[0]["num_params"],
            "package_version": zoo.__version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "hardware": ordered[0].get("hardware") or _hardware(torch.device(device)),  # where the first seed ran
            "predictions": predictions_path(out_path).name if out_path is not None else None,
            "examples": examples_path(out_path).name if out_path is not None and examples else None,
            "model_source": resolved.source,
            "claims": claims,
        }
        from_data(Results, results, where="benchmark results")  # the harness writes what it documents
        if out_path is not None:
            table = pandas.concat(tables, ignore_index=True)[["seed", "model_id", "target", "prediction"]]
            buffer = io.StringIO()
            table.to_csv(buffer, index=False)
            sidecars = {"predictions": (results["predictions"], buffer.getvalue().encode("utf-8"))}
            if examples:
                sidecars["examples"] = (results["examples"], npz_bytes(examples, str(examples_path(out_path))))
            write_with_sidecars(out_path, results, sidecars)  # one commit: never results beside older predictions
            shutil.rmtree(seeds_folder(out_path), ignore_errors=True)  # the results file holds every seed now
            if progress:
                print(f"{label}: wrote {out_path} and {predictions_path(out_path).name}", file=sys.stderr)
        return results

    return PreparedRun(jobs, finish, label)


def raise_unservable(failed: JobsFailed, folder: str | Path | None = None) -> None:
    """A seed that failed on Ray raises the one-line error it would raise in this process.

    A seed the data cannot serve (a ValueError), or one that does not fit in memory, raises that
    error, not `JobsFailed`. A model's output that broke the contract
    (`benchmarks.outputs.ModelOutputError`) is its own one line too. It says which finished jobs are
    kept in `folder` for the same command to resume from."""
    if all(isinstance(error, (ValueError, MemoryError)) for _, error in failed.errors):
        raise failed.errors[0][1] from failed
    first = failed.errors[0][1]
    if isinstance(first, ModelOutputError):
        others = f" ({len(failed.errors) - 1} other job(s) failed too)" if len(failed.errors) > 1 else ""
        done = sorted(failed.outcomes, key=lambda key: (len(key), key))
        kept = (f"{', '.join(done[:10])}{' ...' if len(done) > 10 else ''} finished and "
                f"{'is' if len(done) == 1 else 'are'} "
                f"kept in {folder}: the same command resumes from {'it' if len(done) == 1 else 'them'}"
                if done and folder is not None else "no seed finished")
        raise ModelOutputError(f"{first}{others}; {kept}") from failed


def run_on_splits(task: str, model: str | ResolvedModel, splits: Mapping[str, "ZooSplit"],
                  dataset: Mapping[str, str], options: RunOptions = RunOptions(),
                  out_path: str | Path | None = None) -> dict:
    """Runs `task` with `model` on already loaded splits for each of `options.seeds`; see `run_benchmark`.

    `dataset` describes the splits' data as `benchmarks.results.DatasetInfo` does, with no local path.
    It holds {config, dataset_hash, family}, and optionally {repo, revision} for a Hub dataset. It may
    also name the bytes' `source`.
    """
    placement = options.placement
    prepared = prepare_run(task, model, splits, dataset, options, out_path, device=placement.job_device())
    say = stderr_printer(prepared.label) if options.progress else None
    folder = seeds_folder(out_path) if out_path is not None else None
    try:
        outcomes = run_jobs(prepared.jobs, folder, placement.workers, progress=say, describe=describe_seed,
                            address=placement.address, gpus_per_job=placement.gpus_per_job)
    except JobsFailed as failed:
        raise_unservable(failed, folder)
        raise
    return prepared.finish(outcomes)


def _run_seed(task: str, model: str, model_overrides: Mapping[str, Any], task_overrides: Mapping[str, Any],
              splits: Mapping[str, "ZooSplit"], seed: int, device: str, report_as: str | None = None) -> dict:
    """One seed's run (a job: top-level, so a worker process can run it): its record as plain data.
    With `report_as`, the task's progress lines go to stderr behind that label."""
    device = torch.device(device)
    report = None if report_as is None else stderr_printer(report_as)
    reset_peak(device)  # this job's peak, not the process's so far (`benchmarks.memory`)
    start = time.perf_counter()
    try:
        result = create_task(task, **task_overrides).run(splits, model, dict(model_overrides), seed, device,
                                                         report=report)
    except ModelOutputError as error:  # it says the epoch and step; the model and the seed are known here
        raise ModelOutputError(f"model {model}, seed {seed}, {error}") from None
    except (MemoryError, RuntimeError) as error:  # `--set model.hidden_sizes=[100000000]`: one line, not a traceback
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        if not isinstance(error, MemoryError) and not any(
                text in reason for text in ("allocate", "out of memory", "not enough memory")):
            raise
        raise MemoryError(f"{task}/{model} (seed {seed}) with {dict(model_overrides)} does not fit in memory on "
                          f"{device}: {reason[:300]}") from None
    elapsed = time.perf_counter() - start
    for name, value in {**result.metrics, **result.ranking}.items():  # finite outputs give finite metrics; checked
        if not np.isfinite(value):
            raise ModelOutputError(f"model {model}, seed {seed}, test: the metric {name} is {value} on finite "
                                   f"predictions; expected a finite number")
    entry = {"seed": seed, "metrics": result.metrics, "train_time_s": elapsed,
             "peak_memory_mb": peak_mb(device), "selection": result.selection, "ranking": result.ranking,
             "curve": list(result.curve)}
    columns = result.predictions[["model_id", "target", "prediction"]]
    return to_data({"entry": entry, "num_params": result.num_params, "hardware": _hardware(device),
                    "predictions": {name: columns[name].tolist() for name in columns.columns},
                    "examples": {name: {"dtype": str(np.asarray(value).dtype), "shape": list(np.shape(value)),
                                        "values": np.asarray(value).ravel().tolist()}
                                 for name, value in result.examples.items()}})


def _arrays(stored: Mapping[str, Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """A seed record's figure arrays back as arrays (their dtype and shape kept)."""
    return {name: np.asarray(value["values"], dtype=value["dtype"]).reshape(value["shape"])
            for name, value in stored.items()}


def run_benchmark(task: str, model: str | ResolvedModel, data_path: str | Path, config: str | None,
                  options: RunOptions = RunOptions(), out_path: str | Path | None = None) -> dict:
    """Runs `model` on `task` over `options.seeds` on the dataset at `data_path`; returns the results.

    `data_path` is a zoo folder or a Hub dataset repo `ORG/NAME[@REVISION]` (see `load_splits`).
    The splits are loaded once. With `out_path`, the results JSON and its predictions
    sidecar are written there atomically. `model` is a registered name or a model resolved with
    its board name (`benchmarks.model_identity.resolve_model`).
    """
    task_overrides = dict(options.task_overrides)
    create_task(task, **task_overrides)  # fail on a bad name or override before loading data
    model = resolve_model(model)  # the registry, the name's rules and the source, once, before the data is read
    model_config(model.registered, **dict(options.model_overrides))
    options.placement.job_device()  # GPUs asked for, none here: an error before the data is read
    splits, dataset = load_splits(data_path, config, split_set_of(task_overrides, task),
                                  keep=kept_by(create_task(task, **task_overrides)))
    return run_on_splits(task, model, splits, dataset, options, out_path)
