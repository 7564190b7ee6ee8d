"""Separation: which of a standard suite cell's models does the board tell apart beyond seed noise?

A cell's ranked table orders models by their means over seeds. Two means can differ by less than the seeds
make them move. So the order between those two models says nothing.

Two models are *separated* when their means differ by more than `K` (2) pooled seed standard deviations. The
pooled deviation of models a and b is sqrt((s_a^2 + s_b^2) / 2), each s the sample standard deviation of the
model's per-seed main metric (as its entry reports them). A cell's *separated set* is a largest set of its
models in which every two are separated. Among sets of that size it is the one with the largest sum of gaps
(in pooled deviations) between neighbours.

It reads the suite's ranked runs, the same entries as its table (`leaderboards.agreement.ranked_runs`). A
caller may leave models out, e.g. a model at chance or one that reads the members' function instead of their
weights, to ask how many weight readers a cell separates.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

from benchmarks.standard import STANDARD_SUITES
from benchmarks.tasks import get_task_class
from leaderboards.entries import Entry
from leaderboards.escape import markdown_cell

K = 2.0  # pooled seed deviations between two separated means


@dataclasses.dataclass(frozen=True)
class SeedScores:
    model: str
    scores: tuple[float, ...]  # the main metric of each seed

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores)

    @property
    def std(self) -> float:
        """The sample standard deviation (0 for one seed)."""
        return statistics.stdev(self.scores) if len(self.scores) > 1 else 0.0


@dataclasses.dataclass(frozen=True)
class CellSeparation:
    cell: str
    metric: str
    models: tuple[SeedScores, ...]  # best first
    gaps: tuple[float, ...]  # between each model and the next, in pooled seed deviations
    separated: tuple[str, ...]  # the separated set, best first


def gap(first: SeedScores, second: SeedScores) -> float:
    """|mean difference| in pooled seed deviations (infinite when both deviations are 0 and the means differ)."""
    difference = abs(first.mean - second.mean)
    pooled = math.sqrt((first.std ** 2 + second.std ** 2) / 2)
    if pooled == 0:
        return math.inf if difference > 0 else 0.0
    return difference / pooled


def separated_set(models: tuple[SeedScores, ...], k: float = K) -> tuple[SeedScores, ...]:
    """A largest subset of `models` every two of which differ by more than `k` pooled deviations, in `models`' order.

    The pooled deviation is a norm of the two deviations, so it obeys the triangle inequality. Hence a set
    whose neighbours (in the order of their means) are separated has every pair separated. The search is then
    a longest chain over the ordered models. Ties in length go to the largest sum of neighbour gaps, then to
    the chain that picks earlier models."""
    ordered = sorted(range(len(models)), key=lambda index: (-models[index].mean, index))
    # best[n]: (length, sum of gaps, -indices) of the best chain ending at ordered[n], with the chain itself
    best: list[tuple[tuple, tuple[int, ...]]] = []
    for n, i in enumerate(ordered):
        chain_key, chain = (1, 0.0, (-i,)), (i,)
        for m in range(n):
            j = ordered[m]
            step = gap(models[j], models[i])
            if step > k:
                (length, total, order), previous = best[m]
                key = (length + 1, total + min(step, 1e9), order + (-i,))
                if key > chain_key:
                    chain_key, chain = key, previous + (i,)
        best.append((chain_key, chain))
    if not best:
        return ()
    return tuple(models[i] for i in sorted(max(best, key=lambda item: item[0])[1]))


def cell_separation(cell: str, metric: str, higher_is_better: bool, models: list[SeedScores],
                    k: float = K) -> CellSeparation:
    ordered = tuple(sorted(models, key=lambda m: (-m.mean if higher_is_better else m.mean, m.model)))
    gaps = tuple(gap(a, b) for a, b in zip(ordered, ordered[1:]))
    return CellSeparation(cell, metric, ordered, gaps, tuple(m.model for m in separated_set(ordered, k)))


def separations(entries: list[tuple[Path, Entry]], suite: str, without: frozenset[str] = frozenset()
                ) -> list[CellSeparation]:
    """Each cell of `suite` with its ranked runs on the board, less the models in `without`."""
    from leaderboards.agreement import ranked_runs

    if suite not in STANDARD_SUITES.names():
        raise ValueError(f"{suite!r} is no standard suite; expected one of {STANDARD_SUITES.names()}")
    runs = ranked_runs(entries, suite)
    seen = {model for cell_runs in runs.values() for model in cell_runs}
    unknown = sorted(without - seen)
    if seen and unknown:  # a misspelt name would leave its model in without a word
        raise ValueError(f"without: {', '.join(map(repr, unknown))} ran no cell of {suite}; its models: "
                         f"{', '.join(sorted(seen))}")
    out = []
    for cell in STANDARD_SUITES.get(suite)().cells:
        task = get_task_class(cell.task)
        metric = task.main_metric
        models = [SeedScores(model, tuple(float(seed.metrics[metric]) for seed in entry.results.per_seed))
                  for model, (_, entry) in runs.get(cell.name, {}).items() if model not in without]
        out.append(cell_separation(cell.name, metric, task.metrics[metric], models))
    return out


def _gap_text(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.1f}"


def separation_markdown(cells: list[CellSeparation], without: frozenset[str] = frozenset(), k: float = K) -> str:
    """Per cell: how many models are separated, then each model's mean, seed deviation and gap to the next."""
    left_out = f" Left out: {', '.join(markdown_cell(m) for m in sorted(without))}." if without else ""
    lines = [f"Two models are separated when their means differ by more than {k:g} pooled seed standard "
             f"deviations; the separated set is a largest set of models every two of which are.{left_out}", "",
             "| Cell | Models | Separated | Separated set, best first |", "|---|---|---|---|"]
    for cell in cells:
        shown = " > ".join(markdown_cell(m) for m in cell.separated) or "—"
        lines.append(f"| {markdown_cell(cell.cell)} | {len(cell.models)} | {len(cell.separated)} | {shown} |")
    for cell in cells:
        if not cell.models:
            continue
        lines += ["", f"**{markdown_cell(cell.cell)}** ({cell.metric}, best first)", "",
                  "| Model | Mean | Seed SD | Gap to the next (pooled SDs) | In the separated set |",
                  "|---|---|---|---|---|"]
        for index, model in enumerate(cell.models):
            to_next = _gap_text(cell.gaps[index]) if index < len(cell.gaps) else "—"
            mark = "yes" if model.model in cell.separated else ""
            lines.append(f"| {markdown_cell(model.model)} | {model.mean:.4f} | {model.std:.4f} | {to_next} | {mark} |")
    return "\n".join(lines)
