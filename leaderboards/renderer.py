"""Rendering a leaderboard: Markdown tables per task and dataset, a bar plot per task, an index.

`render(root, out_dir)` reads the accepted entries under `root` and writes:
- `<out_dir>/<task>.md`: per dataset, first a table per swept protocol field (the task's
  `SWEEPS`: the generalization task's accuracy threshold, one column per value), then one
  table per evaluation protocol (the task's
  `evaluation_protocol`: entries on different test sets, e.g. the ReLU subset and the whole
  zoo, are never ranked together), ranked by the task's main metric (its direction comes
  from the task registry), with mean ± std over seeds of every metric, the parameter count,
  the mean training time per seed and the number of seeds; under each table a protocol line
  (the task's `describe_protocol`) and what the test targets' ties allow a ranking to reach;
- `<out_dir>/<task>.png`: the main metric's mean ± std per entry, one panel per dataset;
- `<out_dir>/index.md`: links to the task pages.
It returns the Markdown of the task pages. matplotlib is imported only to draw the plots.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from benchmarks.files import replacing, write_text_atomic
from benchmarks.tasks import get_task_class
from leaderboards.datasets import KnownDataset, load_datasets
from leaderboards.entries import Entry, load_entries

EMPTY = "No accepted submissions yet."


def _ranked(entries: list[Entry], metric: str, higher_is_better: bool) -> list[Entry]:
    """Best first by the main metric's mean; ties go to the smaller std, then the entry id."""
    def key(entry: Entry) -> tuple:
        summary = entry.results.summary[metric]
        return (-summary.mean if higher_is_better else summary.mean, summary.std, entry.submission.id)

    return sorted(entries, key=key)


def _dataset_title(dataset_hash: str, entries: list[Entry], known: dict[str, KnownDataset]) -> str:
    record = known.get(dataset_hash)
    config = record.config if record else entries[0].results.dataset.config
    name = record.name if record else "unregistered dataset"
    return f"{name} — config `{config}` (dataset `{dataset_hash[:12]}`)"


def _table(entries: list[Entry], metrics: list[str]) -> str:
    header = ["Rank", "Model", *metrics, "Params", "Train time / seed (s)", "Seeds", "Entry"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for rank, entry in enumerate(entries, start=1):
        results = entry.results
        cells = [str(rank), results.model]
        for name in metrics:
            summary = results.summary.get(name)
            cells.append(f"{summary.mean:.4f} ± {summary.std:.4f}" if summary else "—")
        train_time = statistics.fmean(seed.train_time_s for seed in results.per_seed)
        cells += [f"{results.num_params:,}", f"{train_time:.1f}", str(len(results.seeds)), f"`{entry.submission.id}`"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _protocol_lines(task_class: type, entries: list[Entry]) -> list[str]:
    """The protocol line(s) under a table, and the tau-b ceiling the test targets allow."""
    lines = []
    described = sorted({task_class.describe_protocol(entry.results.task_config) for entry in entries} - {""})
    lines += [f"Protocol: {line}." for line in described]
    ceilings = sorted({round(seed.ranking["kendall_tau_ceiling"], 4) for entry in entries
                       for seed in entry.results.per_seed if "kendall_tau_ceiling" in seed.ranking})
    if ceilings:
        first = next(seed.ranking for entry in entries for seed in entry.results.per_seed
                     if "kendall_tau_ceiling" in seed.ranking)
        shown = " to ".join(f"{c:.4f}" for c in sorted({ceilings[0], ceilings[-1]}))
        lines.append(f"Test targets: {int(first['distinct_targets'])} distinct values, "
                     f"{first['tied_pair_fraction']:.1%} of pairs tied; the best tau-b of tie-free "
                     f"predictions is {shown}.")
    return lines


def _by_protocol(task_class: type, entries: list[Entry]) -> list[list[Entry]]:
    """Entries split by the task's evaluation protocol, in a fixed order."""
    groups: dict[str, list[Entry]] = defaultdict(list)
    for entry in entries:
        key = json.dumps(task_class.evaluation_protocol(entry.results.task_config), sort_keys=True, default=str)
        groups[key].append(entry)
    return [groups[key] for key in sorted(groups)]


def _sweep_tables(task_class: type, entries: list[Entry], metric: str) -> list[str]:
    """One table per protocol that differs only in a swept field (the task's `SWEEPS`, e.g. the
    generalization task's accuracy threshold): a row per model (and model config), a column per
    value, the main metric's mean ± std; only where at least two values were run."""
    blocks = []
    for field, label in getattr(task_class, "SWEEPS", {}).items():
        groups: dict[str, list[Entry]] = defaultdict(list)
        for entry in entries:
            protocol = dict(task_class.evaluation_protocol(entry.results.task_config))
            protocol.pop(field, None)
            groups[json.dumps(protocol, sort_keys=True, default=str)].append(entry)
        for key in sorted(groups):
            group = groups[key]
            group = [e for e in group if isinstance(e.results.task_config.get(field), (int, float))]
            values = sorted({entry.results.task_config.get(field) for entry in group})
            if len(values) < 2:
                continue

            def identity(entry: Entry) -> str:  # everything but the swept value: model, configs, seeds
                config = {k: v for k, v in entry.results.task_config.items() if k != field}
                return json.dumps([entry.results.model, entry.results.model_config, config, entry.results.seeds],
                                  sort_keys=True, default=str)

            identities = sorted({identity(e) for e in group})
            configs = len(identities)

            def row(entry: Entry) -> str:
                model = entry.results.model
                same = [i for i in identities if json.loads(i)[0] == model]
                return model if len(same) == 1 else f"{model} ({same.index(identity(entry)) + 1})"
            cells: dict[tuple[str, object], Entry] = {}
            for entry in sorted(group, key=lambda e: e.submission.id):
                cells.setdefault((row(entry), entry.results.task_config.get(field)), entry)
            rows = sorted({r for r, _ in cells})
            header = ["Model", *(f"{label} {value:g}" if isinstance(value, float) else f"{label} {value}"
                                 for value in values)]
            lines = [f"{metric} by {label} ({configs} model and training configs; one results file per cell):", "",
                     "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            for name in rows:
                shown = []
                for value in values:
                    entry = cells.get((name, value))
                    summary = entry.results.summary[metric] if entry else None
                    shown.append(f"{summary.mean:.4f} ± {summary.std:.4f}" if summary else "—")
                lines.append("| " + " | ".join([name, *shown]) + " |")
            blocks.append("\n".join(lines))
    return blocks


def _plot(task: str, metric: str, boards: list[tuple[str, list[Entry]]], out_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(2.5, 0.45 * max(len(entries) for _, entries in boards) + 1.2)
    figure, axes = plt.subplots(len(boards), 1, figsize=(7, height * len(boards)), squeeze=False)
    for axis, (title, entries) in zip(axes[:, 0], boards):
        labels = [entry.submission.id for entry in entries][::-1]  # best on top
        means = [entry.results.summary[metric].mean for entry in entries][::-1]
        stds = [entry.results.summary[metric].std for entry in entries][::-1]
        axis.barh(labels, means, xerr=stds, capsize=4, color="tab:blue", alpha=0.8)
        axis.set_xlabel(f"{metric} (mean ± std over seeds)")
        axis.set_title(title.replace("`", ""), fontsize="medium")
    figure.suptitle(f"Leaderboard: {task}")
    figure.tight_layout()
    try:
        with replacing(out_path) as temporary:
            figure.savefig(temporary, format="png", dpi=110)
    finally:
        plt.close(figure)


def render(root: str | Path, out_dir: str | Path) -> str:
    """Writes the leaderboard pages and plots to `out_dir`; returns the task pages' Markdown."""
    out_dir = Path(out_dir)
    known = load_datasets(root)
    by_task: dict[str, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for _, entry in load_entries(root):
        by_task[entry.results.task][entry.results.dataset.dataset_hash].append(entry)

    pages, index = [], ["# Leaderboards", ""]
    for task in sorted(by_task):
        task_class = get_task_class(task)
        main = task_class.main_metric
        direction = "higher" if task_class.metrics[main] else "lower"
        metrics = [main, *sorted(set(task_class.metrics) - {main})]
        lines = [f"# Leaderboard: {task}", "", f"Ranked by `{main}` ({direction} is better); "
                 "metrics are mean ± std (ddof=1) over seeds on the test split.", ""]
        boards = []
        for dataset_hash, entries in sorted(by_task[task].items()):
            title = _dataset_title(dataset_hash, entries, known)
            lines += [f"## {title}", ""]
            for block in _sweep_tables(task_class, entries, main):
                lines += [block, ""]
            protocols = _by_protocol(task_class, entries)
            for number, group in enumerate(protocols, start=1):
                ranked = _ranked(group, main, task_class.metrics[main])
                board_title = title if len(protocols) == 1 else f"{title}, protocol {number}"
                boards.append((board_title, ranked))
                if len(protocols) > 1:
                    lines += [f"### Protocol {number}", ""]
                lines += [_table(ranked, metrics), ""]
                notes = _protocol_lines(task_class, ranked)
                if notes:
                    lines += ["\n".join(notes), ""]
        _plot(task, main, boards, out_dir / f"{task}.png")
        lines += [f"![{task}: {main} per entry]({task}.png)", ""]
        page = "\n".join(lines)
        write_text_atomic(out_dir / f"{task}.md", page)
        pages.append(page)
        count = sum(len(entries) for entries in by_task[task].values())
        index.append(f"- [{task}]({task}.md): {count} entries on {len(by_task[task])} dataset(s)")
    if not pages:
        index.append(EMPTY)
    write_text_atomic(out_dir / "index.md", "\n".join(index) + "\n")
    return "\n".join(pages) if pages else EMPTY + "\n"
