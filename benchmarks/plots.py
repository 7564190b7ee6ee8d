"""Plots of benchmark results: predicted versus true test accuracy.

matplotlib is imported inside the plotting function (with the Agg backend), so importing
this module, and the CLI, stays fast and needs no display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas

from benchmarks.files import replacing
from benchmarks.harness import predictions_path
from benchmarks.results import load_results


def _load_predictions(results_path: Path, sidecar: str | None) -> pandas.DataFrame:
    path = results_path.with_name(sidecar) if sidecar else predictions_path(results_path)
    if not path.is_file():
        raise FileNotFoundError(f"{results_path}: its predictions file {path} is missing; rerun the benchmark")
    table = pandas.read_csv(path)
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
    figure.tight_layout()
    try:
        with replacing(out_path) as temporary:
            figure.savefig(temporary, format="png", dpi=dpi)
    finally:
        plt.close(figure)
    return Path(out_path)
