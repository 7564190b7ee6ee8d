"""What a board shows, as data: per task, per dataset, per protocol, the ranked rows.

`build_board(root)` groups the accepted entries by task, then by dataset hash. Entries on different data
never share a table; the hash fixes the config and the bytes. Then it groups them by the task's evaluation
protocol (`Task.evaluation_protocol`). That is the checkpoints, subset, threshold and test augmentation that
define the test set. It ranks each group by the task's main metric.

Ties are shown as ties (`ranks`). Entries whose main metric's mean is equal at the shown precision
(`TIE_DIGITS` decimals) share the better rank, shown `2=`. A table with sibling tables on its dataset
carries a label (`protocol_label`). It says what sets its protocol apart from theirs.

Each row holds the cells every view shows (`COLUMNS`) and the raw values views sort by. The cells are the
metrics' mean ± std over seeds, parameters, train time and peak memory per seed, and hardware. They also
include the model's version, seeds, whether the entry was re-scored, the code at its commit, and the entry
id.

The Markdown renderer (`leaderboards.renderer`), the HTML site (`leaderboards.site`) and the plots
(`leaderboards.plots`) all read this. So they show the same numbers. Every text here is plain (unescaped, no
markup). Each view escapes it for its own format (`leaderboards.escape`).

`board_of(entries, known)` builds the same from entries in memory. A submission builds its own board row
with it before it is accepted, so an entry that cannot be shown is refused.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.tasks import get_task_class
from leaderboards.datasets import KnownDataset, load_datasets
from leaderboards.entries import Entry, load_entries

# the columns after the metrics, in order
COLUMNS = ("Params", "Train time / seed (s)", "Peak memory (MB)", "Hardware", "Version", "Seeds", "Re-scored",
           "Claims", "Code", "Entry")
# what the Re-scored and Claims columns mean, under every board table (Markdown pages, the site, the docs)
RESCORED_NOTE = ("Re-scored: the board re-computed the entry's metrics from its predictions and the dataset's pinned "
                 "test metadata.")
CLAIMS_NOTE = ("Claims: the symmetry groups the model claims, checked before training by the run that made the "
               "results (nfnzoo's check-model: random group elements on random members at five weight magnitudes; "
               "each check's deviation and tolerance are in the entry's claims); a false claim is refused at "
               "submission. The board keeps that record and does not re-run a model's code, neither at submission "
               "nor in the pull request's check: an outside model's claims are as its run recorded them, at the "
               "commit its Code link names.")
TIE_DIGITS = 4  # the decimals a metric is shown with; means equal at this precision are tied


@dataclasses.dataclass(frozen=True)
class Row:
    entry: Entry
    rank: int
    cells: dict[str, str]  # column -> what is shown
    values: dict[str, Any]  # column -> what it sorts by (a number where the column is one)


@dataclasses.dataclass(frozen=True)
class Table:
    number: int  # the protocol's number within its dataset (1 when there is one)
    protocol: dict[str, Any]  # the task's evaluation protocol, shared by every row
    protocol_lines: tuple[str, ...]  # the protocol described, and the tau ceiling of its test split
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    label: str = ""  # what sets its protocol apart from its dataset's other tables ("" when it is alone)

    @property
    def heading(self) -> str:
        """The table's name where its dataset has several: `Protocol 2: subset activation=tanh`."""
        return f"Protocol {self.number}" + (f": {self.label}" if self.label else "")


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A swept protocol field (the task's `SWEEPS`): a row per model config, a column per value."""
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True)
class DatasetSection:
    dataset_hash: str
    title: str  # plain text: "<name> — config <config> (dataset <hash12>)"
    source: str
    name: str  # the dataset's display name (free text)
    config: str  # its config (a name)
    sweeps: tuple[Sweep, ...]
    tables: tuple[Table, ...]


@dataclasses.dataclass(frozen=True)
class TaskBoard:
    task: str
    main_metric: str
    higher_is_better: bool
    metrics: tuple[str, ...]  # the main metric first
    sections: tuple[DatasetSection, ...]

    @property
    def entries(self) -> int:
        return sum(len(table.rows) for section in self.sections for table in section.tables)


def _ranked(entries: list[Entry], metric: str, higher_is_better: bool) -> list[Entry]:
    """Best first by the main metric's mean; ties go to the smaller std, then the entry id."""
    def key(entry: Entry) -> tuple:
        summary = entry.results.summary[metric]
        return (-summary.mean if higher_is_better else summary.mean, summary.std, entry.submission.id)

    return sorted(entries, key=key)


def ranks(values: list[float], higher_is_better: bool) -> list[int]:
    """Each value's rank, 1 being best: one more than the number of values better than it. Values compare at
    the shown precision (`TIE_DIGITS` decimals), so values that show the same share the better rank."""
    shown = [round(value, TIE_DIGITS) for value in values]
    return [1 + sum((other > value) if higher_is_better else (other < value) for other in shown) for value in shown]


def rank_text(rank: int, tied: bool) -> str:
    return f"{rank}=" if tied else str(rank)


def code_link(url: str | None, commit: str | None) -> str:
    """The link to the code an entry names: the repository at its commit (`URL/tree/COMMIT`). GitHub and
    GitLab serve that form. It applies where a commit is recorded and the URL does not already point into
    the tree."""
    if not url:
        return ""
    if commit and not any(part in url for part in ("/tree/", "/commit/", "/blob/")):
        return f"{url.rstrip('/')}/tree/{commit}"
    return url


UNCOMMITTED = "+ uncommitted changes (not reproducible)"  # after a commit ran with changes it does not hold


def uncommitted(results, commit: str | None) -> bool:
    """Whether the run's model code had uncommitted changes on top of `commit`, the commit an entry links.
    It reads `model_source.dirty` of the checkout whose commit that is. Such an entry is not reproducible
    from it."""
    source = results.model_source
    return bool(commit and source is not None and source.dirty is True and source.commit
                and source.commit.startswith(commit))


def _code(entry: Entry) -> tuple[str, str]:
    """(shown, link) of the code an entry names; ("—", "") when none was given. A commit the run changed
    (`uncommitted`) is linked and shown with `UNCOMMITTED`, on every board."""
    info = entry.submission
    if not info.code_url:
        return "—", ""
    commit = info.code_commit or ""
    shown = f"{commit[:8]}" if commit else "link"
    if uncommitted(entry.results, commit):
        shown = f"{shown} {UNCOMMITTED}"
    return shown, code_link(info.code_url, commit)


def model_version(results) -> str:
    """The model an entry ran, by package and version.

    A built-in shows `nfnzoo <package_version>`. So do results older than `model_source`, whose models
    nfnzoo shipped. An outside model shows its package with the version the run recorded, or "version not
    recorded". The package is the distribution that provides it, else the top-level package of its import
    path (`nqpool 0.1.0`).
    """
    source = results.model_source
    if source is None or source.kind == "built-in":
        return f"nfnzoo {results.package_version}"
    package = source.distribution or source.import_path.partition(":")[0].partition(".")[0] or "unknown package"
    return f"{package} {source.version}" if source.version else f"{package} (version not recorded)"


def claims_text(results) -> str:
    """What an entry's Claims column shows: the groups its model claims, checked before training by the run.

    The check is `benchmarks.claims`. "(partly unmeasured)" or "(unmeasured)" mark outputs that broke the
    contract. Otherwise it shows "none claimed", "not checked" (the check raised), or "not recorded" (older
    results). A track's learner shows "—".
    """
    claims = results.claims
    if claims is None:  # a track's learner reads no weight space: no group acts on its input
        return "—" if results.dataset.family == "track" else "not recorded"
    if claims.verdict == "not checked":
        return "not checked"
    groups = ", ".join(claims.groups) or "none claimed"
    if claims.verdict != "unmeasured":
        return groups
    measured = any(check.claimed and check.deviation is not None for check in claims.checks)
    return f"{groups} ({'partly unmeasured' if measured or not claims.groups else 'unmeasured'})"


def _row(entry: Entry, rank: int, metrics: tuple[str, ...], label: str, tied: bool = False) -> Row:
    results = entry.results
    cells, values = {"Rank": rank_text(rank, tied), "Model": label}, {"Rank": rank, "Model": results.model}
    for name in metrics:
        summary = results.summary.get(name)
        cells[name] = f"{summary.mean:.4f} ± {summary.std:.4f}" if summary else "—"
        values[name] = summary.mean if summary else None
    train_time = statistics.fmean(seed.train_time_s for seed in results.per_seed)
    memory = [seed.peak_memory_mb for seed in results.per_seed if seed.peak_memory_mb is not None]
    peak = max(memory) if memory else None
    shown_code, link = _code(entry)
    cells.update({"Params": f"{results.num_params:,}", "Train time / seed (s)": f"{train_time:.1f}",
                  "Peak memory (MB)": f"{peak:,.0f}" if peak is not None else "—",
                  "Hardware": results.hardware.device, "Version": model_version(results),
                  "Seeds": str(len(results.seeds)), "Re-scored": "yes" if entry.submission.verified else "no",
                  "Claims": claims_text(results), "Code": shown_code, "Entry": entry.submission.id})
    values.update({"Params": results.num_params, "Train time / seed (s)": train_time, "Peak memory (MB)": peak,
                   "Hardware": results.hardware.device, "Version": model_version(results),
                   "Seeds": len(results.seeds), "Re-scored": entry.submission.verified,
                   "Claims": claims_text(results), "Code": link,
                   "Entry": entry.submission.id})
    return Row(entry, rank, cells, values)


def _protocol_lines(task_class: type, entries: list[Entry]) -> tuple[str, ...]:
    """The protocol line(s) under a table, and the tau-b ceiling the test targets allow."""
    lines = [f"Protocol: {line}." for line in
             sorted({task_class.describe_protocol(entry.results.task_config) for entry in entries} - {""})]
    ceilings = sorted({round(seed.ranking["kendall_tau_ceiling"], 4) for entry in entries
                       for seed in entry.results.per_seed if "kendall_tau_ceiling" in seed.ranking})
    if ceilings:
        first = next(seed.ranking for entry in entries for seed in entry.results.per_seed
                     if "kendall_tau_ceiling" in seed.ranking)
        shown = " to ".join(f"{c:.4f}" for c in sorted({ceilings[0], ceilings[-1]}))
        lines.append(f"Test targets: {int(first['distinct_targets'])} distinct values, "
                     f"{first['tied_pair_fraction']:.1%} of pairs tied; the best tau-b of tie-free "
                     f"predictions is {shown}.")
    return tuple(lines)


def _protocol_parts(table: Table) -> list[str]:
    """The table's protocol description cut into its `; `-separated parts (without "Protocol: ")."""
    line = next((line for line in table.protocol_lines if line.startswith("Protocol: ")), "")
    return [part for part in line.removeprefix("Protocol: ").rstrip(".").split("; ") if part]


def protocol_label(tables: list[Table], table: Table) -> str:
    """What sets `table`'s protocol apart from the other `tables` of its dataset ("" when it is alone)."""
    if len(tables) < 2:
        return ""
    others = [set(_protocol_parts(other)) for other in tables if other is not table]
    shared = set.intersection(*others) if others else set()
    return "; ".join(part for part in _protocol_parts(table) if part not in shared)


def _protocol_key(task_class: type, entry: Entry) -> str:
    return json.dumps(task_class.evaluation_protocol(entry.results.task_config), sort_keys=True, default=str)


def _sweeps(task_class: type, entries: list[Entry], metric: str) -> list[Sweep]:
    """One sweep per protocol that differs only in a swept field, where two or more values ran."""
    sweeps = []
    for field, label in getattr(task_class, "SWEEPS", {}).items():
        groups: dict[str, list[Entry]] = defaultdict(list)
        for entry in entries:
            protocol = dict(task_class.evaluation_protocol(entry.results.task_config))
            protocol.pop(field, None)
            groups[json.dumps(protocol, sort_keys=True, default=str)].append(entry)
        for key in sorted(groups):
            group = [e for e in groups[key] if isinstance(e.results.task_config.get(field), (int, float))]
            values = sorted({entry.results.task_config.get(field) for entry in group})
            if len(values) < 2:
                continue
            labels = _model_labels(group, field)  # a row per model and config, all but the swept value
            cells: dict[tuple[str, object], Entry] = {}
            for entry in sorted(group, key=lambda e: e.submission.id):
                cells.setdefault((labels[entry.submission.id], entry.results.task_config.get(field)), entry)
            rows = []
            for row_name in sorted({r for r, _ in cells}):
                shown = []
                for value in values:
                    entry = cells.get((row_name, value))
                    summary = entry.results.summary[metric] if entry else None
                    shown.append(f"{summary.mean:.4f} ± {summary.std:.4f}" if summary else "—")
                rows.append((row_name, *shown))
            header = ("Model", *(f"{label} {value:g}" if isinstance(value, float) else f"{label} {value}"
                                 for value in values))
            configs = len(set(labels.values()))
            title = f"{metric} by {label} ({configs} model and training configs; one results file per cell)"
            sweeps.append(Sweep(title, header, tuple(rows)))
    return sweeps


def _identity(entry: Entry, ignored: str | None = None) -> str:
    """An entry's model, model config, task config (less the `ignored` field) and seeds, as JSON."""
    config = {k: v for k, v in entry.results.task_config.items() if k != ignored}
    return json.dumps([entry.results.model, entry.results.model_config, config, entry.results.seeds],
                      sort_keys=True, default=str)


def _model_labels(entries: list[Entry], ignored: str | None = None) -> dict[str, str]:
    """Each entry's model name, by submission id. Where the same model runs under several configs here, it
    adds what sets this one apart: `transformer_nfn (epochs 100, warmup_epochs 10)`."""
    identity = {entry.submission.id: _identity(entry, ignored) for entry in entries}
    by_model: dict[str, set[str]] = defaultdict(set)
    for entry in entries:
        by_model[entry.results.model].add(identity[entry.submission.id])
    labels = {}
    for entry in entries:
        model, same = entry.results.model, sorted(by_model[entry.results.model])
        labels[entry.submission.id] = (model if len(same) == 1
                                       else f"{model} ({_difference(same, identity[entry.submission.id])})")
    return labels


def _difference(identities: list[str], identity: str) -> str:
    """What tells one of a model's rows from its others: the config values in which they differ ("epochs
    100, warmup_epochs 10"). Its seeds are added where those alone set it apart."""
    decoded = [json.loads(i) for i in identities]

    def differing(own: list) -> str:
        parts = []
        for index in (1, 2):  # the model config, then the task config
            keys = sorted({k for d in decoded for k in d[index]})
            parts += [f"{k} {own[index].get(k, '—')}" for k in keys
                      if len({json.dumps(d[index].get(k), sort_keys=True) for d in decoded}) > 1]
        return ", ".join(parts)

    own = json.loads(identity)
    label = differing(own)
    if [differing(d) for d in decoded].count(label) > 1:
        label = f"{label}, seeds {own[3]}" if label else f"seeds {own[3]}"
    return label


def _dataset_names(dataset_hash: str, entries: list[Entry], known: dict[str, KnownDataset]) -> tuple[str, str, str]:
    """(name, config, source) of a section's dataset."""
    record = known.get(dataset_hash)
    config = record.config if record else entries[0].results.dataset.config
    name = record.name if record else "unregistered dataset"
    return name, config, (record.source if record else "")


def build_board(root: str | Path, entries: list[tuple[Path, Entry]] | None = None) -> list[TaskBoard]:
    """The board's tasks, sorted by name (see the module docstring); `entries`: the board's, already read."""
    entries = load_entries(root) if entries is None else entries
    return board_of([entry for _, entry in entries], load_datasets(root))


def _is_track(task_class: type) -> bool:
    from benchmarks.tasks.track_task import TrackTask

    return issubclass(task_class, TrackTask)


def board_of(entries: list[Entry], known: dict[str, KnownDataset]) -> list[TaskBoard]:
    """The boards of `entries`, with the datasets `known` (see the module docstring)."""
    by_task: dict[str, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for entry in entries:
        by_task[entry.results.task][entry.results.dataset.dataset_hash].append(entry)
    boards = []
    for task in sorted(by_task):
        task_class = get_task_class(task)
        main = task_class.main_metric
        metrics = (main, *sorted(set(task_class.metrics) - {main}))
        # a track's learner reads no weight space: no symmetry claim applies, and its tables are wide already
        columns = ("Rank", "Model", *metrics, *(c for c in COLUMNS if c != "Claims" or not _is_track(task_class)))
        sections = []
        for dataset_hash, entries in sorted(by_task[task].items()):
            groups: dict[str, list[Entry]] = defaultdict(list)
            for entry in entries:
                groups[_protocol_key(task_class, entry)].append(entry)
            tables = []
            for number, key in enumerate(sorted(groups), start=1):
                ranked = _ranked(groups[key], main, task_class.metrics[main])
                labels = _model_labels(ranked)
                places = ranks([entry.results.summary[main].mean for entry in ranked], task_class.metrics[main])
                rows = tuple(_row(entry, rank, metrics, labels[entry.submission.id], places.count(rank) > 1)
                             for rank, entry in zip(places, ranked))
                tables.append(Table(number, json.loads(key), _protocol_lines(task_class, ranked), columns, rows))
            tables = [dataclasses.replace(table, label=protocol_label(tables, table)) for table in tables]
            name, config, source = _dataset_names(dataset_hash, entries, known)
            title = f"{name} — config {config} (dataset {dataset_hash[:12]})"
            sections.append(DatasetSection(dataset_hash, title, source, name, config,
                                           tuple(_sweeps(task_class, entries, main)), tuple(tables)))
        boards.append(TaskBoard(task, main, task_class.metrics[main], metrics, tuple(sections)))
    return boards
