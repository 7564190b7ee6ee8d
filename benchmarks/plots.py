"""Plots of benchmark results: predicted versus true test accuracy.

The plotting functions import matplotlib themselves, with the Agg backend. So importing this
module, and the CLI, stays fast and needs no display."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Sequence

import pandas

from benchmarks.files import save_figure
from benchmarks.harness import predictions_path
from benchmarks.results import load_results
from zoo.validation.inputs import read_capped

MAX_PREDICTIONS_BYTES = 1 * 2**30  # a predictions CSV is a row per test checkpoint and seed: megabytes


def _load_predictions(results_path: Path, sidecar: str | None) -> pandas.DataFrame:
    path = results_path.with_name(sidecar) if sidecar else predictions_path(results_path)
    if not os.path.lexists(path):  # present but no regular file (a FIFO, a device, a folder): read_capped says so
        raise FileNotFoundError(f"{results_path}: its predictions file {path} is missing; rerun the benchmark")
    data = read_capped(path, MAX_PREDICTIONS_BYTES, "predictions CSV")  # a regular file, bounded
    try:
        table = pandas.read_csv(io.BytesIO(data))
    except (ValueError, UnicodeDecodeError) as error:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise ValueError(f"{path}: not a predictions CSV ({ascii(str(error))[1:-1][:200]})") from None
    missing = {"seed", "target", "prediction"} - set(table.columns)
    if missing:
        raise ValueError(f"{path}: expected the columns seed, model_id, target, prediction; missing {sorted(missing)}")
    return table


def scatter(results_paths: Sequence[str | Path], out_path: str | Path, *, dpi: int = 120) -> Path:
    """One panel per results file: predicted vs true test accuracy of every seed, y = x dashed.

    Each panel is titled with the model and annotated with the mean ± std of Kendall's tau
    over seeds (from the results summary). Returns the PNG's path.
    """
    if not results_paths:
        raise ValueError("give at least one results file to plot")
    panels = []
    for path in map(Path, results_paths):
        results = load_results(path)
        panels.append((results, _load_predictions(path, results.predictions)))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
    for axis, (results, table) in zip(axes[0], panels):
        for seed, rows in table.groupby("seed"):
            axis.scatter(rows["target"], rows["prediction"], s=8, alpha=0.5, label=f"seed {seed}")
        low = min(table["target"].min(), table["prediction"].min())
        high = max(table["target"].max(), table["prediction"].max())
        axis.plot([low, high], [low, high], linestyle="--", color="gray", linewidth=1)
        tau = results.summary.get("kendall_tau")
        if tau is not None:
            axis.text(0.04, 0.96, f"Kendall's τ = {tau.mean:.3f} ± {tau.std:.3f}", transform=axis.transAxes,
                      verticalalignment="top", bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
        axis.set_title(f"{results.model} on {results.dataset.config}")
        axis.set_xlabel("true test accuracy")
        axis.set_ylabel("predicted test accuracy")
        axis.legend(loc="lower right", fontsize="small")
    return save_figure(figure, out_path, dpi)


def _load_examples(results_path: Path, sidecar: str | None) -> dict:
    from benchmarks.files import read_npz

    if not sidecar:
        raise ValueError(f"{results_path}: its task kept no example renders (an inr-editing results file has them)")
    path = results_path.with_name(sidecar)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{results_path}: its examples file {path} is missing; rerun the benchmark")
    arrays = read_npz(path)
    missing = {"model_id", "original", "target", "edited"} - set(arrays)
    if missing:
        raise ValueError(f"{path}: expected the arrays model_id, original, target, edited; missing {sorted(missing)}")
    return arrays


def edit_grid(results_paths: Sequence[str | Path], out_path: str | Path, *, images: int = 6,
              dpi: int = 120) -> Path:
    """INR editing side by side: per test SIREN (a row), its original render, the target, and edits.

    Each results file's model adds a column of edited renders, titled with the model and its test MSE.
    The files must hold the same test SIRENs first: the same zoo and protocol."""
    if not results_paths:
        raise ValueError("give at least one inr-editing results file to plot")
    panels = []
    for path in map(Path, results_paths):
        results = load_results(path)
        panels.append((results, _load_examples(path, results.examples)))
    edits = {results.task_config.get("edit") for results, _ in panels}
    if len(edits) != 1:
        raise ValueError(f"the results files edit differently ({sorted(map(str, edits))}); plot one edit at a time")
    first = panels[0][1]
    for (_, arrays), path in zip(panels[1:], results_paths[1:]):
        if list(arrays["model_id"]) != list(first["model_id"]):
            raise ValueError(f"{path}: its example SIRENs differ from {results_paths[0]}'s (another zoo or protocol)")
    rows = min(images, len(first["model_id"]))
    if rows == 0:
        raise ValueError(f"{results_paths[0]}: no example renders to plot")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = [("original render", first["original"]), ("target", first["target"])]
    for results, arrays in panels:
        mse = results.summary.get("mse")
        label = f"{results.model}\nMSE {mse.mean:.3f}" if mse else results.model
        columns.append((label, arrays["edited"]))
    figure, axes = plt.subplots(rows, len(columns), figsize=(1.6 * len(columns), 1.6 * rows + 0.6), squeeze=False)
    for column, (title, stack) in enumerate(columns):
        for row in range(rows):
            image = stack[row].transpose(1, 2, 0)
            axis = axes[row][column]
            axis.imshow(image[..., 0] if image.shape[2] == 1 else image, cmap="gray", vmin=0, vmax=1)
            axis.set_xticks([])
            axis.set_yticks([])
            if row == 0:
                axis.set_title(title, fontsize="small")
    return save_figure(figure, out_path, dpi)
