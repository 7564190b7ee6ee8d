"""Budgets: each of some models' runs on one dataset, side by side with the training budget each ran.

A cell's table ranks models at one protocol. Is a model's rank its architecture's, or the budget's the
cell gave it (its width, its epochs)? Runs of the same models at other budgets, e.g. their papers' own,
answer that. Those runs are entries of their own protocol. This module sets them beside each other. Per
model, each entry on the dataset is one row. It shows the parameter count, epochs, batch, learning rate
and weight decay. Then come the main metric's mean and sample deviation over seeds, and the training time
a seed.

A region (`leaderboards.docs_pages`) names the task, the dataset (12 or more hex digits of its hash), the
models, and optionally the subset the task config selects (`subset=activation:relu`). Rows come in the
order the region names the models, then by epochs; a model with no entry there shows "no entry".
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from benchmarks.tasks import get_task_class
from leaderboards.entries import Entry
from leaderboards.escape import markdown_cell
from leaderboards.separation import SeedScores

TRAINING = ("epochs", "batch_size", "lr", "weight_decay")  # the task config's budget fields shown


@dataclasses.dataclass(frozen=True)
class BudgetRow:
    model: str
    params: int
    training: tuple  # the values of TRAINING ("—" where the task config has none)
    mean: float
    std: float
    seeds: int
    seconds: float  # mean training time a seed
    entry: str  # the submission id


def parse_subset(text: str, where: str) -> dict[str, str]:
    """`COLUMN:VALUE` (several joined by `,`) as {column: value}; "" for none."""
    subset = {}
    for part in filter(None, text.split(",")):
        column, colon, value = part.partition(":")
        if not colon or not column or not value:
            raise ValueError(f"{where}: subset: expected COLUMN:VALUE (e.g. activation:relu), got {part!r}")
        subset[column] = value
    return subset


def budget_rows(entries: list[tuple[Path, Entry]], task: str, dataset: str, models: list[str],
                subset: dict[str, str]) -> tuple[str, list[BudgetRow]]:
    """(the task's main metric, the rows) for `models`' entries of `task` on the dataset `dataset` names."""
    metric = get_task_class(task).main_metric
    rows = []
    for _, entry in entries:
        results = entry.results
        if (results.task != task or not results.dataset.dataset_hash.startswith(dataset)
                or results.model not in models or not _in_subset(results.task_config.get("subset") or {}, subset)):
            continue
        scores = SeedScores(results.model, tuple(float(seed.metrics[metric]) for seed in results.per_seed))
        rows.append(BudgetRow(results.model, results.num_params,
                              tuple(results.task_config.get(field, "—") for field in TRAINING),
                              scores.mean, scores.std, len(scores.scores),
                              statistics.fmean(seed.train_time_s for seed in results.per_seed), entry.submission.id))
    rows.sort(key=lambda row: (models.index(row.model), _number(row.training[0]), row.params, row.entry))
    return metric, rows


def _in_subset(config: dict, subset: dict[str, str]) -> bool:
    """Whether a task config's `subset` selects exactly the values `subset` names (a value or a one-value list)."""
    def values(value) -> list[str]:
        return [str(v) for v in (value if isinstance(value, list) else [value])]
    return set(config) == set(subset) and all(values(config[column]) == [subset[column]] for column in subset)


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) else float("inf")


def budgets_markdown(metric: str, rows: list[BudgetRow], models: list[str]) -> str:
    """The rows as one table, with a "no entry" line for each model that has none."""
    lines = [f"| Model | Params | Epochs | Batch | Learning rate | Weight decay | {markdown_cell(metric)} "
             "(mean ± seed SD) | Seeds | Train time / seed (s) | Entry |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        epochs, batch, lr, decay = (markdown_cell(f"{value:g}" if isinstance(value, float) else str(value))
                                    for value in row.training)
        lines.append(f"| {markdown_cell(row.model)} | {row.params:,} | {epochs} | {batch} | {lr} | {decay} | "
                     f"{row.mean:.4f} ± {row.std:.4f} | {row.seeds} | {row.seconds:,.0f} | "
                     f"`{row.entry}` |")  # a validated id: no escape inside code
    missing = [model for model in models if model not in {row.model for row in rows}]
    if missing:
        lines += ["", f"No entry yet: {', '.join(markdown_cell(model) for model in missing)}."]
    return "\n".join(lines)
