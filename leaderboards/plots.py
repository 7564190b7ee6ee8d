"""A board's plots (PNG, matplotlib's Agg backend), one figure per task and kind.

(1) `<task>.png` shows the main metric's mean ± std (the tables' interval), a dot per entry, best on top. It
has one panel per table. The score axis is fitted to the intervals, not from 0, so close scores stay apart.

(2) `<task>-params.png` and `<task>-time.png` show the main metric against the parameter count and against
the training time per seed (log x). They have one panel per table and a labelled point per entry.

(3) `<task>-predictions.png` shows predicted against true on the test split for each table's top entry. That
is its first seed, from the stored predictions and the pinned targets: what re-scoring read. Where both are
classes it shows a confusion matrix. Tables whose targets are not metadata (INR editing) have no panel. Nor
do tables whose top entry is unverified.

Entries are labelled by their board name (`Model`, with the config that sets two rows of one model apart).
Panels are labelled by their dataset and protocol (`leaderboards.plot_layout`). That module also keeps every
text inside the figure and apart from the others. Each `*_figure` builds a figure. The function of the same
kind saves it and returns the file, or None when there was nothing to draw. Every text drawn from an entry
or a dataset goes through `leaderboards.escape.plot_text`: never mathtext, and cut short. So a label such as
`$\\undefinedmacro{$` is drawn as written.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from leaderboards.board import TaskBoard
from leaderboards.escape import plot_text
from leaderboards.plot_layout import (TEXT_SIZE, figure_grid, height, label, lines, panels, place_labels, save,
                                      score_limits)

AXIS_ROOM = height(2) + 0.2  # inches under a panel's axes: its tick labels and axis label
ROW_GAP = 0.14  # inches between two entries' labels in the dot plot
MAX_ROWS = 40  # entries drawn per panel of the dot plot (the best); its table shows every one


def _direction(board: TaskBoard) -> str:
    return "higher is better" if board.higher_is_better else "lower is better"


def _subtitle(common: list[str]) -> str:
    return f"Protocol of every panel: {'; '.join(common)}" if common else ""


def _intervals(board: TaskBoard, rows) -> tuple[list[float], list[float]]:
    summaries = [row.entry.results.summary[board.main_metric] for row in rows]
    return [summary.mean for summary in summaries], [summary.std for summary in summaries]


def bars_figure(board: TaskBoard):
    """The main metric per entry (mean ± std over seeds), ranked, best on top, a panel per table; None when empty."""
    drawn, common = panels(board)
    if not drawn:
        return None
    titles = [panel.title + (f"\nits best {MAX_ROWS} of {len(panel.rows)} entries" if len(panel.rows) > MAX_ROWS
                             else "") for panel in drawn]
    drawn = [dataclasses.replace(panel, rows=panel.rows[:MAX_ROWS]) for panel in drawn]
    labels = [[label(row) for row in panel.rows] for panel in drawn]
    pitches = [height(max(map(lines, names))) + ROW_GAP for names in labels]  # no two labels of a panel touch
    heights = [len(panel.rows) * pitch + AXIS_ROOM for panel, pitch in zip(drawn, pitches)]
    metric = board.main_metric
    figure, subfigures = figure_grid(
        titles, heights, 7.5, 1 if len(drawn) == 1 else 2,
        f"Leaderboard {board.task}: {metric} per entry, mean ± std over seeds ({_direction(board)}; best on top)",
        _subtitle(common))
    for subfigure, panel, names in zip(subfigures, drawn, labels):
        axis = subfigure.axes[0]
        means, stds = _intervals(board, panel.rows[::-1])  # the best row last: drawn on top
        places = np.arange(len(means))
        axis.errorbar(means, places, xerr=stds, fmt="o", capsize=3, color="tab:blue", markersize=5)
        low, high = score_limits([m - s for m, s in zip(means, stds)], [m + s for m, s in zip(means, stds)])
        axis.set_xlim(low, high)
        if low < 0 < high:
            axis.axvline(0, color="grey", linewidth=0.8)
        axis.set_ylim(-0.6, len(means) - 0.4)
        axis.set_yticks(places, names[::-1])
        axis.tick_params(labelsize=TEXT_SIZE)
        axis.grid(axis="x", alpha=0.3)
        axis.grid(axis="y", alpha=0.15)
        axis.set_xlabel(f"{plot_text(metric)} (mean ± std over seeds)", fontsize=TEXT_SIZE)
    return figure


def metric_bars(board: TaskBoard, path: Path) -> Path | None:
    figure = bars_figure(board)
    return None if figure is None else save(figure, path)


def against_figure(board: TaskBoard, column: str, axis_label: str):
    """The main metric (mean ± std) against a numeric column (log x), a point per entry labelled by its model."""
    from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter

    drawn, common = panels(board)
    drawn = [(panel, [row for row in panel.rows if row.values.get(column)]) for panel in drawn]
    drawn = [(panel, rows) for panel, rows in drawn if rows]
    if not drawn:
        return None
    metric = board.main_metric
    figure, subfigures = figure_grid(
        [panel.title for panel, _ in drawn], [3.6 + AXIS_ROOM] * len(drawn), 7, min(2, len(drawn)),
        f"Leaderboard {board.task}: {metric} (mean ± std over seeds) against {axis_label}", _subtitle(common))
    for subfigure, (_, rows) in zip(subfigures, drawn):
        axis = subfigure.axes[0]
        x = [row.values[column] for row in rows]
        means, stds = _intervals(board, rows)
        axis.errorbar(x, means, yerr=stds, fmt="o", capsize=3, markersize=4)
        axis.set_xscale("log")
        low, high = min(x) / 2, max(x) * 2  # room for the labels beside the outermost points
        axis.set_xlim(low, high)
        if high / low < 100:  # under two decades, maybe one power of ten: ticks at 1, 2 and 5 of each decade
            axis.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.xaxis.set_major_formatter(EngFormatter(sep=""))  # 5, 20, 500k, 2M
        axis.xaxis.set_minor_formatter(NullFormatter())  # matplotlib's own minor labels run into each other
        axis.set_ylim(*score_limits([m - s for m, s in zip(means, stds)], [m + s for m, s in zip(means, stds)]))
        axis.tick_params(labelsize=TEXT_SIZE)
        axis.set_xlabel(plot_text(axis_label), fontsize=TEXT_SIZE)
        axis.set_ylabel(f"{plot_text(metric)} ({_direction(board)})", fontsize=TEXT_SIZE)
    points = []
    for subfigure, (_, rows) in zip(subfigures, drawn):
        means, stds = _intervals(board, rows)
        points.append((subfigure.axes[0], [(row.values[column], m, s) for row, m, s in zip(rows, means, stds)]))
    place_labels(figure, points, [[label(row) for row in rows] for _, rows in drawn])  # once every panel is drawn
    return figure


def metric_against(board: TaskBoard, column: str, axis_label: str, path: Path) -> Path | None:
    """The main metric (mean ± std) against a numeric column, a labelled point per entry."""
    figure = against_figure(board, column, axis_label)
    return None if figure is None else save(figure, path)


def predictions_figure(board: TaskBoard, drawn: list[tuple[str, str, np.ndarray, np.ndarray]]):
    """`drawn`: (title, model, targets, predictions) of each table's top entry; None when empty."""
    if not drawn:
        return None
    figure, subfigures = figure_grid(
        [f"{model}: {title}" for title, model, _, _ in drawn], [3.6 + AXIS_ROOM] * len(drawn), 5,
        min(3, len(drawn)),
        f"Leaderboard {board.task}: predicted against true, each table's top entry (its first seed)")
    for subfigure, (_, _, targets, predictions) in zip(subfigures, drawn):
        axis = subfigure.axes[0]
        classes = np.all(targets % 1 == 0) and np.all(predictions % 1 == 0)
        if classes:
            count = int(max(targets.max(), predictions.max())) + 1
            matrix = np.zeros((count, count))
            np.add.at(matrix, (targets.astype(int), predictions.astype(int)), 1)
            axis.imshow(matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1), cmap="Blues", vmin=0, vmax=1)
            axis.set_xlabel("predicted class", fontsize=TEXT_SIZE)
            axis.set_ylabel("true class", fontsize=TEXT_SIZE)
        else:
            axis.scatter(targets, predictions, s=6, alpha=0.5)
            low, high = float(min(targets.min(), predictions.min())), float(max(targets.max(), predictions.max()))
            axis.plot([low, high], [low, high], color="grey", linewidth=1)
            axis.set_xlabel("true (pinned test metadata)", fontsize=TEXT_SIZE)
            axis.set_ylabel("predicted", fontsize=TEXT_SIZE)
        axis.tick_params(labelsize=TEXT_SIZE)
    return figure


def predicted_against_true(board: TaskBoard, drawn: list[tuple[str, str, np.ndarray, np.ndarray]],
                           path: Path) -> Path | None:
    """`drawn`: (title, model, targets, predictions) of each table's top entry."""
    figure = predictions_figure(board, drawn)
    return None if figure is None else save(figure, path)
