"""The `wave-cre` track's table and figure: accuracy on the seen relations after each task, and memory.

Both read the jobs' outcomes by method, one per task order. `seen_accuracy` is read after each
task; it is None where a learner was not evaluated. `metrics` is read too. `kept_bytes` is what the
learner keeps between tasks besides its parameters, by kind, after each task."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from benchmarks.files import save_figure


def _stages(runs: Sequence[dict]) -> np.ndarray:
    """(orders, tasks) seen accuracy, NaN where not evaluated."""
    return np.array([[np.nan if v is None else v for v in run["seen_accuracy"]] for run in runs], dtype=np.float64)


def kept_bytes(run: dict) -> int:
    """The bytes kept after the last task (the float64 full-covariance figure is a comparison, not kept)."""
    return int(sum(v for k, v in run["kept_bytes"][-1].items() if not k.endswith("float64_full")))


def _mean_std(values: np.ndarray) -> str:
    values = values[np.isfinite(values)]
    if not len(values):
        return "—"
    std = values.std(ddof=1) if len(values) > 1 else 0.0
    return f"{100 * values.mean():.1f} ± {100 * std:.1f}"


def _size(count: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} B"


def stage_table(runs_of: Mapping[str, Sequence[dict]], title: str) -> str:
    """Markdown: per method, the accuracy (%) on every seen relation after each task.

    Each is a mean ± std over the task orders. It adds the task-prediction accuracy, the bytes kept and
    the seconds per order."""
    tasks = len(next(iter(runs_of.values()))[0]["seen_accuracy"])
    header = " | ".join(f"T{t + 1}" for t in range(tasks))
    lines = [f"### {title}", "", f"| method | {header} | FAA | task acc. | kept | s / order |",
             "|---|" + "---|" * (tasks + 4)]
    for method, runs in runs_of.items():
        stages = _stages(runs)
        cells = [_mean_std(stages[:, t]) for t in range(tasks)]
        faa = _mean_std(np.array([run["metrics"]["final_average_accuracy"] for run in runs]))
        identity = _mean_std(np.array([run["metrics"].get("task_identity_accuracy", np.nan) for run in runs]))
        kept = np.mean([kept_bytes(run) for run in runs])
        seconds = np.mean([run["train_time_s"] for run in runs])
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {faa} | {identity} | {_size(kept) if kept else '0'} "
                     f"| {seconds:.0f} |")
    orders = len(next(iter(runs_of.values())))
    return "\n".join(lines + ["", f"Accuracy (%) on the test sentences of every relation seen so far; mean ± std "
                                  f"(ddof=1) over {orders} task orders. FAA: the mean over tasks of the accuracy "
                                  f"after the last. Kept: bytes kept between tasks besides parameters "
                                  f"(Gaussian statistics or stored sentences).", ""])


def plot_track(runs_of: Mapping[str, Sequence[dict]], title: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (curves, memory) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    for method, runs in runs_of.items():
        stages = _stages(runs)
        known_stages = np.isfinite(stages).any(axis=0)
        mean = np.full(stages.shape[1], np.nan)
        mean[known_stages] = np.nanmean(stages[:, known_stages], axis=0)
        known = np.isfinite(mean)
        x = np.arange(1, len(mean) + 1)
        marker = "*" if known.sum() == 1 else "o"
        curves.plot(x[known], mean[known], marker=marker, markersize=10 if marker == "*" else 4, label=method)
    curves.set_xlabel("tasks learned")
    curves.set_ylabel("accuracy on every seen relation (mean over orders)")
    curves.set_ylim(0, 1)
    curves.grid(alpha=0.3)
    curves.legend(fontsize="small", ncol=2)
    curves.set_title(title, fontsize="medium")
    names = list(runs_of)
    kept = [max(1.0, float(np.mean([kept_bytes(run) for run in runs_of[m]]))) for m in names]
    bars = memory.barh(names, kept, color="tab:gray")
    for bar, value in zip(bars, kept):
        memory.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, " " + (_size(value) if value > 1 else "none"),
                    va="center", fontsize="small")
    memory.set_xscale("log")
    memory.set_xlabel("bytes kept between tasks after the last (log)")
    memory.invert_yaxis()
    memory.set_title("memory: Gaussian statistics or stored sentences", fontsize="medium")
    save_figure(figure, path)
    return path
