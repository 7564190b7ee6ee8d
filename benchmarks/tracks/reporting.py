"""What every track writes: results files in the harness's format, and the accuracy-per-stage plot.

A track's method on one benchmark over its seeds becomes one results file, in
`benchmarks.results`'s schema. It holds the task (e.g. "continual-learning") and the method's
config. Its task config holds the track, profile and benchmark, and the benchmark's whole
definition: its data, the backbone's config and checksum. Its dataset block's hash is the
definition's (`benchmarks.tasks.continual_learning`). It also holds the per-seed metrics and the
summary.

The accuracy matrices go to the `.examples.npz` beside it. Cell by cell, they also go to the
predictions CSV that a board re-scores.

The hardware block names the device the jobs ran on. Each job's outcome records its own
(`job_hardware`), on the worker. The driver may not have that worker's GPU. A record from before
outcomes did this is of a CPU run."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from benchmarks.files import npz_bytes, save_figure, write_with_sidecars
from benchmarks.results import SCHEMA_VERSION, describe_hardware, summarize
from benchmarks.tasks.continual_learning import definition_hash, matrix_predictions


def job_hardware(device) -> dict[str, str | None]:
    """What a job's outcome records of the device it ran on, in the harness's words.

    That is "cpu", or "cuda (<GPU name>)" and the GPU's name."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return {"device": device.type, "gpu_model": None}
    name = torch.cuda.get_device_name(device)
    return {"device": f"cuda ({name})", "gpu_model": name}


def runs_hardware(runs: Sequence[dict]) -> dict[str, str | None]:
    """The results' hardware block of the jobs' outcomes: their devices.

    A record without one ran on the CPU. Should they differ, each is named."""
    seen = list(dict.fromkeys((run.get("hardware") or {}).get("device", "cpu") for run in runs)) or ["cpu"]
    models = list(dict.fromkeys(m for run in runs if (m := (run.get("hardware") or {}).get("gpu_model"))))
    return describe_hardware(", ".join(seen), ", ".join(models) or None)


def seed_matrices(runs: Sequence[dict], seeds: Sequence[int]) -> dict[int, np.ndarray]:
    """Each seed's job outcome's accuracy matrix as float64 (None cells: NaN)."""
    return {s: np.array([[np.nan if v is None else v for v in row] for row in run["accuracy_matrix"]],
                        dtype=np.float64) for s, run in zip(seeds, runs)}


def per_seed_entries(runs: Sequence[dict], seeds: Sequence[int]) -> list[dict]:
    """The results' per-seed blocks of the jobs' outcomes (their metrics and wall times)."""
    return [{"seed": s, "metrics": run["metrics"], "train_time_s": run["train_time_s"],
             "peak_memory_mb": run.get("peak_memory_mb"),
             "selection": {}, "ranking": {}} for s, run in zip(seeds, runs)]


def write_track_results(path: Path, *, task: str, track: str, profile: str, benchmark: str, method: str,
                        method_config: Mapping, definition: Mapping, per_seed: Sequence[dict],
                        matrices: Mapping[int, np.ndarray], num_params: int, hardware: Mapping | None = None) -> Path:
    """A continual-learning track's results, by `write_results_files`.

    The accuracy matrices are the arrays, and their cells are the predictions."""
    import pandas

    cells = pandas.concat([matrix_predictions(m, s) for s, m in matrices.items()], ignore_index=True)
    final_only = any(not np.isfinite(m[0, 0]) for m in matrices.values())
    return write_results_files(
        path, task=task, track=track, profile=profile, benchmark=benchmark, method=method,
        method_config=method_config, definition=definition, per_seed=per_seed, predictions=cells,
        arrays={f"accuracy_matrix_seed{s}": m for s, m in matrices.items()}, num_params=num_params,
        task_config={"evaluation": "final" if final_only else "every-stage"}, hardware=hardware)


def write_results_files(path: Path, *, task: str, track: str, profile: str, benchmark: str, method: str,
                        method_config: Mapping, definition: Mapping, per_seed: Sequence[dict], predictions,
                        arrays: Mapping[str, np.ndarray], num_params: int, task_config: Mapping | None = None,
                        hardware: Mapping | None = None) -> Path:
    """Writes three files and returns the JSON's path.

    They are `<path>` (the results JSON), `<method>.examples.npz` (the arrays) and
    `<method>.predictions.csv` beside it. The CSV holds the rows a board re-scores: seed, model_id,
    prediction. `hardware` is the jobs' (`runs_hardware`); none given, the CPU's."""
    import zoo

    seeds = [entry["seed"] for entry in per_seed]
    examples, predictions_name = f"{method}.examples.npz", f"{method}.predictions.csv"
    results = {
        "schema_version": SCHEMA_VERSION, "task": task, "model": method, "model_config": dict(method_config),
        "task_config": {"track": track, "profile": profile, "benchmark": dict(definition["benchmark"]),
                        **dict(task_config or {}), "definition": dict(definition)},
        "dataset": {"path": f"track:{track}/{benchmark}", "config": benchmark,
                    "dataset_hash": definition_hash(definition), "family": "track"},
        "seeds": seeds, "per_seed": list(per_seed), "summary": summarize([e["metrics"] for e in per_seed]),
        "num_params": int(num_params), "package_version": zoo.__version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hardware": dict(hardware) if hardware is not None else describe_hardware("cpu"),
        "predictions": predictions_name, "examples": examples}
    sidecars = {"predictions": (predictions_name, predictions.to_csv(index=False, float_format="%.17g").encode()),
                "examples": (examples, npz_bytes(dict(arrays), str(path.with_name(examples))))}
    return write_with_sidecars(path, results, sidecars)  # one commit: never results beside another run's cells


def plot_stage_curves(curves: Mapping[str, np.ndarray], title: str, path: Path,
                      ylabel: str = "average accuracy on the tasks seen (mean over seeds)") -> Path:
    """One line per method: the value after each task (NaN stages are skipped; a lone point is a star)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7.5, 4.8))
    for method, curve in curves.items():
        stages = np.arange(1, len(curve) + 1)
        known = np.isfinite(curve)
        marker = "*" if known.sum() == 1 else "o"
        axis.plot(stages[known], np.asarray(curve)[known], marker=marker, markersize=10 if marker == "*" else 5,
                  label=method)
    axis.set_xlabel("tasks learned")
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.set_ylim(0, 1)
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small", ncol=2)
    save_figure(figure, path)
    return path


SHORT_NAMES = {"final_average_accuracy": "FAA", "cumulative_average_accuracy": "CAA", "final_forgetting": "FFM",
               "task_identity_accuracy": "task-identity acc."}


def summary_table(results_paths: Sequence[Path], title: str) -> str:
    """A Markdown table of results files: one row per method, mean ± std over seeds of each metric."""
    from benchmarks.results import load_results

    loaded = [load_results(path) for path in results_paths]
    names = [name for name in SHORT_NAMES if any(name in r.summary for r in loaded)]
    lines = [f"### {title}", "", "| method | " + " | ".join(SHORT_NAMES[n] for n in names) + " | s / seed |",
             "|---|" + "---|" * (len(names) + 1)]
    for results in loaded:
        cells = [f"{results.summary[n].mean:.3f} ± {results.summary[n].std:.3f}" if n in results.summary else "—"
                 for n in names]
        seconds = float(np.mean([entry.train_time_s for entry in results.per_seed]))
        lines.append(f"| {results.model} | " + " | ".join(cells) + f" | {seconds:.0f} |")
    seeds = ", ".join(map(str, loaded[0].seeds)) if loaded else ""
    return "\n".join(lines + ["", f"Mean ± std (ddof=1) over seeds {seeds}.", ""])
