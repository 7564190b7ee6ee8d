"""Budget curves: a larger-budget run's learning curves, read at the smaller budgets it passes through.

Each seed of a run records its validation score after every epoch (`SeedResult.curve`). The best score up
to epoch e is what the run's selection would have kept, had it stopped there. So one run of a larger-budget
suite (`benchmarks.standard.scaled`) gives each model's validation score at the suite's own epochs E and at
2E, 3E, ...: the mean over seeds of those best-so-far scores.

This is a projection, not a run at that budget. Warm-up is counted in steps or epochs and stays, but a
learning-rate schedule that spans the whole run would have been shorter. The scores are validation scores,
the ones a run selects on, not the test metric the tables rank by.

Per cell it gives the models' order at each budget, and Kendall's tau-b between that order and the order at
the largest budget. A tau that reaches 1 early says the suite's budget already ranks as the larger one does;
one that keeps moving says the budget is too short to rank those models.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from benchmarks.standard import STANDARD_SUITES
from benchmarks.tasks import get_task_class
from leaderboards.agreement import MIN_MODELS, ranked_runs, tau_b
from leaderboards.entries import Entry
from leaderboards.escape import markdown_cell


@dataclasses.dataclass(frozen=True)
class CellCurves:
    cell: str
    score: str  # the validation score the runs selected on, e.g. "validation_kendall_tau"
    budgets: tuple[int, ...]  # epochs: the suite's, then each multiple up to the larger suite's
    models: tuple[tuple[str, tuple[float, ...]], ...]  # (model, its mean best-so-far score at each budget)
    taus: tuple[float | None, ...]  # each budget's order against the largest budget's; None below MIN_MODELS


def best_so_far(curve: tuple[float | None, ...], higher: bool) -> np.ndarray:
    """The best score up to each epoch (a null epoch keeps the best before it; NaN before any score)."""
    values = np.array([np.nan if value is None else value for value in curve], dtype=np.float64)
    signed = values if higher else -values
    best = np.fmax.accumulate(np.where(np.isnan(signed), -np.inf, signed))
    best[best == -np.inf] = np.nan
    return best if higher else -best


def _selection_score(entry: Entry) -> str | None:
    names = {key for seed in entry.results.per_seed for key in seed.selection if key.startswith("validation_")}
    return names.pop() if len(names) == 1 else None


def cell_curves(cell: str, task, base_epochs: int, larger_epochs: int, runs: dict[str, Entry]) -> CellCurves | None:
    """One cell's budget curves from the larger suite's entries {model: Entry}; None when no run has curves."""
    budgets = tuple(range(base_epochs, larger_epochs + 1, base_epochs))
    whole = []  # (model, its seeds' curves) of the runs that recorded every epoch, and the score they select on
    score = None
    for model, entry in sorted(runs.items()):
        name = _selection_score(entry)
        curves = [seed.curve for seed in entry.results.per_seed]
        if name is None or any(len(curve) < larger_epochs for curve in curves):
            continue
        whole.append((model, curves))
        score = name if score is None else score
    if not whole:
        return None
    higher = task.metrics.get(score.removeprefix("validation_"), True)  # the task's runs all select on one score
    models = []
    for model, curves in whole:
        best = np.mean([best_so_far(curve, higher) for curve in curves], axis=0)
        models.append((model, tuple(float(best[epochs - 1]) for epochs in budgets)))
    models.sort(key=lambda item: (-item[1][-1] if higher else item[1][-1], item[0]))
    taus = tuple(_tau([scores[column] for _, scores in models], [scores[-1] for _, scores in models])
                 if len(models) >= MIN_MODELS else None for column in range(len(budgets)))
    return CellCurves(cell, score, budgets, tuple(models), taus)


def _tau(first: list[float], second: list[float]) -> float | None:
    tau = tau_b(first, second)
    return tau if np.isfinite(tau) else None


def budget_curves(entries: list[tuple[Path, Entry]], base: str, larger: str) -> list[CellCurves]:
    """Each cell of `base` that `larger` also has, read from `larger`'s ranked entries' curves."""
    big = ranked_runs(entries, larger)
    larger_cells = {cell.name: cell for cell in STANDARD_SUITES.get(larger)().cells}
    out = []
    for cell in STANDARD_SUITES.get(base)().cells:
        other = larger_cells.get(cell.name)
        if other is None or cell.name not in big:
            continue
        runs = {model: entry for model, (_, entry) in big[cell.name].items()}
        found = cell_curves(cell.name, get_task_class(cell.task), cell.task_overrides["epochs"],
                            other.task_overrides["epochs"], runs)
        if found is not None:
            out.append(found)
    return out


def curves_markdown(cells: list[CellCurves], base: str, larger: str) -> str:
    """Per cell: each model's projected validation score at each budget, and each budget's tau with the last."""
    if not cells:
        return ""
    lines = [f"Budget curves: each {larger} seed's validation score, best so far, read at {base}'s epochs and "
             "each multiple of them (the mean over seeds). A projection from one run, not a run at each budget; "
             f"tau compares each budget's order with the order at {larger}'s."]
    for cell in cells:
        heads = [f"{epochs} epochs" for epochs in cell.budgets]
        lines += ["", f"**{markdown_cell(cell.cell)}** ({markdown_cell(cell.score)})", "",
                  "| Model | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
        lines += [f"| {markdown_cell(model)} | " + " | ".join(f"{value:.4f}" for value in scores) + " |"
                  for model, scores in cell.models]
        lines.append("| *Kendall tau with the last* | " + " | ".join(
            "—" if tau is None else f"{tau:.2f}" for tau in cell.taus) + " |")
    return "\n".join(lines)
