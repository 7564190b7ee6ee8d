"""Rank agreement: does a standard suite's ranking at its budget predict the ranking at a larger one?

A larger-budget suite (`benchmarks.standard.scaled`, e.g. `standard-v2-4x`) runs the same cells, zoos and
seeds at more steps. Its entries are a protocol of their own, ranked in their own table. For each cell both
suites share, it compares the models with a ranked entry on the pinned zoo in both. It reports three things.

(1) Each model's main metric at both budgets: the entries' means over seeds.

(2) Kendall's tau-b between the two rankings of those means. At 1 the budget's order holds; at 0 there is no
relation.

(3) A 95% percentile bootstrap interval for that tau. Each resample draws the cell's test rows with
replacement. That is one draw for every model and both budgets, since they predict the same rows. Per model
and budget, it also draws the seeds with replacement. Then it re-scores every model from its stored
predictions on the pinned test targets (`leaderboards.rescore`).

The interval says how much of the agreement the test set and the seeds could move. It does not cover a seed
the board does not hold. The resamples use a fixed generator seed, so a page renders the same numbers from
the same entries.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from scipy import stats

from benchmarks.metrics import resampled_kendall_tau
from benchmarks.standard import STANDARD_SUITES
from benchmarks.tasks import get_task_class
from leaderboards.entries import Entry, load_entries, stored_predictions_path
from leaderboards.escape import markdown_cell

RESAMPLES = 200
MIN_MODELS = 3  # fewer and a rank correlation says nothing


@dataclasses.dataclass(frozen=True)
class ModelScores:
    model: str
    base: float  # the main metric's mean over seeds at the suite's budget
    larger: float  # ... at the larger budget


@dataclasses.dataclass(frozen=True)
class CellAgreement:
    cell: str
    metric: str
    models: tuple[ModelScores, ...]  # the models in both suites' cell, best at the larger budget first
    tau: float | None  # None: fewer than MIN_MODELS models in both
    interval: tuple[float, float] | None
    resamples: int


@dataclasses.dataclass(frozen=True)
class Run:
    """One model's run of a cell at one budget. It holds its reported mean, and its predictions as a (seeds,
    test rows) matrix aligned to the cell's test targets."""
    mean: float
    predictions: np.ndarray


# metric -> the same metric of many resamples at once, from each row's draw counts (exactly the task's score)
RESAMPLED = {"kendall_tau": resampled_kendall_tau}


def ranked_runs(entries: list[tuple[Path, Entry]], suite_name: str) -> dict[str, dict[str, tuple[Path, Entry]]]:
    """Cell name -> model -> its newest entry that is exactly that cell's run on the pinned zoo."""
    from leaderboards.suite_board import run_cell

    suite = STANDARD_SUITES.get(suite_name)()
    chosen: dict[str, dict[str, tuple[Path, Entry]]] = {}
    for path, entry in sorted(entries, key=lambda item: item[1].submission.accepted, reverse=True):
        cell = run_cell(entry, suite.cells)
        if cell is not None and entry.results.dataset.dataset_hash == cell.zoo.dataset_hash:
            chosen.setdefault(cell.name, {}).setdefault(entry.results.model, (path, entry))
    return chosen


def agreements(root: str | Path, base: str, larger: str, resamples: int = RESAMPLES, seed: int = 0,
               entries: list[tuple[Path, Entry]] | None = None) -> list[CellAgreement]:
    """Each cell of `base` that `larger` also has, compared as the module docstring says.

    `entries` are the board's, when the caller has read them already."""
    from leaderboards.datasets import load_datasets
    from leaderboards.pinned import load_pinned, split_set_of

    for name in (base, larger):
        if name not in STANDARD_SUITES.names():
            raise ValueError(f"{name!r} is no standard suite; expected one of {STANDARD_SUITES.names()}")
    entries = load_entries(root) if entries is None else entries
    small, big = ranked_runs(entries, base), ranked_runs(entries, larger)
    larger_cells = {cell.name for cell in STANDARD_SUITES.get(larger)().cells}
    datasets = load_datasets(root)
    out = []
    for cell in STANDARD_SUITES.get(base)().cells:
        if cell.name not in larger_cells:
            continue
        models = sorted(set(small.get(cell.name, {})) & set(big.get(cell.name, {})))
        task = get_task_class(cell.task)
        metric = task.main_metric
        if not models:
            out.append(CellAgreement(cell.name, metric, (), None, None, 0))
            continue
        first = small[cell.name][models[0]][1].results
        metadata = load_pinned(root, datasets[cell.zoo.dataset_hash], split_set_of(first.task_config))
        expected = task.test_targets(metadata, first.task_config)
        runs = {(model, which): _aligned(*runs[cell.name][model], expected, metric)
                for model in models for which, runs in (("base", small), ("larger", big))}
        out.append(cell_agreement(cell.name, task, runs, expected["target"].to_numpy(dtype=np.float64),
                                  resamples, seed))
    return out


def _aligned(path: Path, entry: Entry, expected, metric: str) -> Run:
    from leaderboards.rescore import read_stored_predictions

    frame = read_stored_predictions(stored_predictions_path(path))
    ids = expected["model_id"].astype(str)
    rows = []
    for seed in entry.results.seeds:
        by_id = frame[frame["seed"] == seed].set_index("model_id")["prediction"]
        aligned = by_id.reindex(ids).to_numpy(dtype=np.float64)
        if np.isnan(aligned).any():
            raise ValueError(f"{path.name}: seed {seed}'s stored predictions miss test rows of the pinned split")
        rows.append(aligned)
    return Run(entry.results.summary[metric].mean, np.stack(rows))


def cell_agreement(cell: str, task, runs: dict[tuple[str, str], Run], targets: np.ndarray,
                   resamples: int = RESAMPLES, seed: int = 0) -> CellAgreement:
    """One cell's agreement from its runs {(model, "base" | "larger"): Run} on the test `targets`."""
    metric = task.main_metric
    models = sorted({model for model, _ in runs})
    higher = task.metrics[metric]
    scores = tuple(ModelScores(model, runs[model, "base"].mean, runs[model, "larger"].mean) for model in models)
    scores = tuple(sorted(scores, key=lambda s: (-s.larger if higher else s.larger, s.model)))
    if len(models) < MIN_MODELS:
        return CellAgreement(cell, metric, scores, None, None, 0)
    tau = tau_b([s.base for s in scores], [s.larger for s in scores])
    rng = np.random.default_rng(seed)
    draws = []  # the generator's calls in their recorded order: a draw's rows, then each run's seeds
    for _ in range(resamples):
        rows = rng.integers(0, len(targets), len(targets))
        draws.append((rows, {key: rng.integers(0, len(run.predictions), len(run.predictions))
                             for key, run in runs.items()}))
    per_seed = {key: _resampled_scores(task, metric, targets, run.predictions, [rows for rows, _ in draws])
                for key, run in runs.items()}
    taus = []
    for number, (_, picks) in enumerate(draws):
        means = {key: float(np.mean(per_seed[key][number, picks[key]])) for key in runs}
        taus.append(tau_b([means[m, "base"] for m in models], [means[m, "larger"] for m in models]))
    finite = [t for t in taus if np.isfinite(t)]
    interval = (float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))) if finite else None
    return CellAgreement(cell, metric, scores, tau, interval, resamples)


def _resampled_scores(task, metric: str, targets: np.ndarray, predictions: np.ndarray,
                      draws: list[np.ndarray]) -> np.ndarray:
    """(resamples, seeds): each seed's `metric` on each resample of the test rows.

    A metric in `RESAMPLED` scores every resample at once; any other is the task's own score per resample.
    """
    fast = RESAMPLED.get(metric)
    if fast is not None:
        counts = np.stack([np.bincount(rows, minlength=len(targets)) for rows in draws])
        return fast(targets, predictions, counts)
    return np.array([[task.score(targets[rows], seed_predictions[rows])[metric] for seed_predictions in predictions]
                     for rows in draws])


def tau_b(first: list[float], second: list[float]) -> float:
    """Kendall's tau-b between two score lists (NaN where either is constant)."""
    return float(stats.kendalltau(first, second).statistic)


def agreement_markdown(cells: list[CellAgreement], base: str, larger: str) -> str:
    """Each cell's tau with its interval, then a table of every model's two scores."""
    lines = [f"| Cell | Models in both | Kendall tau ({base} vs {larger}) | 95% bootstrap interval |",
             "|---|---|---|---|"]
    for cell in cells:
        tau = "—" if cell.tau is None else f"{cell.tau:.2f}"
        interval = "—" if cell.interval is None else f"[{cell.interval[0]:.2f}, {cell.interval[1]:.2f}]"
        count = f"{len(cell.models)}" + ("" if cell.tau is not None else f" (fewer than {MIN_MODELS}: not measured)")
        lines.append(f"| {cell.cell} | {count} | {tau} | {interval} |")
    for cell in cells:
        if not cell.models:
            continue
        lines += ["", f"**{markdown_cell(cell.cell)}** ({cell.metric}; best at {larger} first)", "",
                  f"| Model | {base} | {larger} | Change |", "|---|---|---|---|"]
        lines += [f"| {markdown_cell(s.model)} | {s.base:.4f} | {s.larger:.4f} | {s.larger - s.base:+.4f} |"
                  for s in cell.models]
    if any(cell.resamples for cell in cells):
        lines += ["", f"Intervals: {max(c.resamples for c in cells)} resamples of the test rows and of each "
                  "model's seeds, every model re-scored from its stored predictions."]
    return "\n".join(lines)
