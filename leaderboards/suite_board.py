"""A standard suite's entries together: one row per model, each cell's metric and the suite's mean rank.

An entry is a cell's when it is exactly that cell's run: the cell's task, the pinned dataset hash
(a stand-in zoo with other bytes never matches, so it is never ranked here), the cell's seeds, and
the task config the cell's protocol resolves to. Within a cell the models are ranked by the task's
main metric (ties share the better rank); a model's mean rank is over the cells it has, and the
rows with every cell come first. A row is a model's name (its config differs from cell to cell:
the task sets its outputs, the zoo its input sizes); of several entries for one model and cell,
the latest accepted is shown.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from benchmarks.standard import STANDARD_SUITES, Cell
from benchmarks.tasks import create_task, get_task_class
from leaderboards.entries import Entry, canonical_json
from leaderboards.escape import markdown_cell
from zoo.validation.schema import to_data


@dataclasses.dataclass(frozen=True)
class SuiteRow:
    model: str  # the model's registered name
    values: tuple[float | None, ...]  # each cell's main metric (mean over seeds), None where not run
    ranks: tuple[int | None, ...]
    mean_rank: float


@dataclasses.dataclass(frozen=True)
class SuiteBoard:
    suite: str
    description: str
    cells: tuple[Cell, ...]
    metrics: tuple[str, ...]  # each cell's main metric
    rows: tuple[SuiteRow, ...]


def cell_of(entry: Entry, cells: tuple[Cell, ...]) -> Cell | None:
    """The cell `entry` is a run of, or None."""
    results = entry.results
    for cell in cells:
        if (results.task == cell.task and results.dataset.dataset_hash == cell.zoo.dataset_hash
                and sorted(results.seeds) == sorted(cell.seeds)
                and canonical_json(results.task_config) == canonical_json(_task_config(cell))):
            return cell
    return None


def _task_config(cell: Cell) -> Any:
    return to_data(create_task(cell.task, **cell.task_overrides).config)


def suite_boards(entries: list[Entry]) -> list[SuiteBoard]:
    """Every standard suite with at least one entry in one of its cells."""
    boards = []
    for name in STANDARD_SUITES.names():
        suite = STANDARD_SUITES.get(name)()
        chosen: dict[str, dict[str, Entry]] = {}  # model -> cell -> latest entry
        for entry in entries:
            cell = cell_of(entry, suite.cells)
            if cell is None:
                continue
            kept = chosen.setdefault(entry.results.model, {})
            if cell.name not in kept or kept[cell.name].submission.accepted < entry.submission.accepted:
                kept[cell.name] = entry
        if not chosen:
            continue
        metrics = tuple(get_task_class(cell.task).main_metric for cell in suite.cells)
        values = {identity: tuple(cells[c.name].results.summary[m].mean if c.name in cells else None
                                  for c, m in zip(suite.cells, metrics))
                  for identity, cells in chosen.items()}
        ranks: dict[str, list[int | None]] = {identity: [] for identity in chosen}
        for column, (cell, metric) in enumerate(zip(suite.cells, metrics)):
            higher = get_task_class(cell.task).metrics[metric]
            present = [values[i][column] for i in chosen if values[i][column] is not None]
            for identity in chosen:
                value = values[identity][column]
                ranks[identity].append(None if value is None else
                                       1 + sum((other > value) if higher else (other < value) for other in present))
        rows = [SuiteRow(model, values[model], tuple(ranks[model]),
                         statistics.fmean(r for r in ranks[model] if r is not None)) for model in chosen]
        rows.sort(key=lambda row: (sum(v is None for v in row.values), row.mean_rank, row.model))
        boards.append(SuiteBoard(suite.name, suite.description, suite.cells, metrics, tuple(rows)))
    return boards


def suite_markdown(boards: list[SuiteBoard]) -> str:
    """The suites' page: per suite, its cells (zoo and hash) and one row per model."""
    lines = ["# Standard suites", ""]
    for board in boards:
        lines += [f"## {board.suite}", "", markdown_cell(board.description), "",
                  "Only runs on the pinned zoos (the hash below) are ranked; a model's mean rank is over the "
                  "cells it has, and the rows with every cell come first.", ""]
        lines += [f"- {cell.name}: {cell.task} on {cell.zoo.name} (dataset {cell.zoo.dataset_hash[:12]}), "
                  f"{markdown_cell(cell.label)}, seeds {', '.join(map(str, cell.seeds))}" for cell in board.cells]
        header = ["Model", *(f"{cell.name} ({metric})" for cell, metric in zip(board.cells, board.metrics)),
                  "Mean rank"]
        lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in board.rows:
            shown = [f"{value:.4f} (#{rank})" if value is not None else "—" for value, rank in zip(row.values, row.ranks)]
            lines.append(f"| {markdown_cell(row.model)} | " + " | ".join(shown) + f" | {row.mean_rank:.2f} |")
        lines.append("")
    return "\n".join(lines)
