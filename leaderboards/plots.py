"""A board's plots (PNG, matplotlib's Agg backend), one figure per task and kind.

- `<task>.png`: the main metric's mean ± std per entry, one panel per table;
- `<task>-params.png` and `<task>-time.png`: the main metric against the parameter count and
  against the training time per seed (log x), one panel per table, a point per entry;
- `<task>-predictions.png`: predicted against true on the test split for each table's top
  entry (its first seed, from the stored predictions and the pinned targets: what re-scoring
  read), a confusion matrix where both are classes; tables whose targets are not metadata
  (INR editing) or whose top entry is unverified have no panel.
Each function returns the file it wrote, or None when there was nothing to draw. Every text drawn
from an entry or a dataset goes through `leaderboards.escape.plot_text` (never mathtext, one
line, cut short), so a label such as `$\\undefinedmacro{$` is drawn as written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.files import save_figure
from leaderboards.board import TaskBoard
from leaderboards.escape import plot_text

MAX_PANELS = 12  # tables drawn per figure (the largest first); a board with more shows them in its tables


def _panels(board: TaskBoard) -> list[tuple[str, list]]:
    panels = [(section.title + (f", protocol {table.number}" if len(section.tables) > 1 else ""), list(table.rows)) for section in board.sections for table in section.tables]
    return sorted(panels, key=lambda panel: -len(panel[1]))[:MAX_PANELS]


def _figure(count: int, width: float, height: float, columns: int = 1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = -(-count // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    for axis in axes.flat[count:]:
        axis.set_visible(False)
    return figure, list(axes.flat)


def _save(figure, title: str, path: Path) -> Path:
    figure.suptitle(plot_text(title, 120))
    return save_figure(figure, path)


def metric_bars(board: TaskBoard, path: Path) -> Path | None:
    panels = _panels(board)
    if not panels:
        return None
    height = max(2.5, 0.45 * max(len(rows) for _, rows in panels) + 1.2)
    figure, axes = _figure(len(panels), 7, height)
    metric = board.main_metric
    for axis, (title, rows) in zip(axes, panels):
        rows = rows[::-1]  # best on top
        labels = [plot_text(row.cells["Entry"]) for row in rows]
        means = [row.entry.results.summary[metric].mean for row in rows]
        stds = [row.entry.results.summary[metric].std for row in rows]
        axis.barh(labels, means, xerr=stds, capsize=4, color="tab:blue", alpha=0.8)
        axis.set_xlabel(f"{metric} (mean ± std over seeds)")
        axis.set_title(plot_text(title, 120), fontsize="medium")
    return _save(figure, f"Leaderboard: {board.task}", path)


def metric_against(board: TaskBoard, column: str, label: str, path: Path) -> Path | None:
    """The main metric (mean ± std) against a numeric column, a labelled point per entry."""
    panels = [(title, [row for row in rows if row.values.get(column)]) for title, rows in _panels(board)]
    panels = [(title, rows) for title, rows in panels if rows]
    if not panels:
        return None
    figure, axes = _figure(len(panels), 6, 4, columns=min(2, len(panels)))
    metric = board.main_metric
    for axis, (title, rows) in zip(axes, panels):
        x = [row.values[column] for row in rows]
        means = [row.entry.results.summary[metric].mean for row in rows]
        stds = [row.entry.results.summary[metric].std for row in rows]
        axis.errorbar(x, means, yerr=stds, fmt="o", capsize=3)
        for xi, yi, row in zip(x, means, rows):
            axis.annotate(plot_text(row.cells["Model"]), (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize="small")
        axis.set_xscale("log")
        axis.set_xlabel(label)
        axis.set_ylabel(f"{metric} ({'higher' if board.higher_is_better else 'lower'} is better)")
        axis.set_title(plot_text(title, 120, width=60), fontsize="small")
    return _save(figure, f"{board.task}: {metric} against {label}", path)


def predicted_against_true(board: TaskBoard, panels: list[tuple[str, str, np.ndarray, np.ndarray]],
                           path: Path) -> Path | None:
    """`panels`: (title, model, targets, predictions) of each table's top entry."""
    if not panels:
        return None
    figure, axes = _figure(len(panels), 4.5, 4.2, columns=min(3, len(panels)))
    for axis, (title, model, targets, predictions) in zip(axes, panels):
        classes = np.all(targets % 1 == 0) and np.all(predictions % 1 == 0)
        if classes:
            count = int(max(targets.max(), predictions.max())) + 1
            matrix = np.zeros((count, count))
            np.add.at(matrix, (targets.astype(int), predictions.astype(int)), 1)
            axis.imshow(matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1), cmap="Blues", vmin=0, vmax=1)
            axis.set_xlabel("predicted class")
            axis.set_ylabel("true class")
        else:
            axis.scatter(targets, predictions, s=6, alpha=0.5)
            low, high = float(min(targets.min(), predictions.min())), float(max(targets.max(), predictions.max()))
            axis.plot([low, high], [low, high], color="grey", linewidth=1)
            axis.set_xlabel("true (pinned test metadata)")
            axis.set_ylabel("predicted")
        axis.set_title(plot_text(f"{model}: {title}", 120, width=44), fontsize="x-small")
    return _save(figure, f"{board.task}: predicted against true, each table's top entry (its first seed)", path)
