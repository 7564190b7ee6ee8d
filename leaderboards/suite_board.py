"""A standard suite's entries together: one row per model, each cell's metric and the suite's mean rank.

An entry is a cell's when it is exactly that cell's run. It has the cell's task, the pinned dataset hash,
the cell's seeds, and the task config the cell's protocol resolves to. A stand-in zoo with other bytes never
matches, so it is never ranked here. Within a cell the models are ranked by the task's main metric. Means
equal at the shown precision tie and share the better rank (`leaderboards.board.ranks`).

The rows are ordered by `leaderboards.table_order`. No model sits above one that beats it in every cell both
have. Then rows go by win share. Each row shows its coverage: cells entered over the cells it can run
(`leaderboards.cell_reads`). It also shows its mean rank over the cells it has. A row is a model's name. Its
config differs from cell to cell: the task sets its outputs, the zoo its input sizes. Of several entries for
one model and cell, the latest accepted is shown.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Callable

from benchmarks.standard import STANDARD_SUITES, Cell, cell_model_fields
from benchmarks.tasks import create_task, get_task_class
from leaderboards.board import ranks as ranks_of
from leaderboards.cell_reads import cell_kinds, cell_reads
from leaderboards.entries import Entry, canonical_json
from leaderboards.escape import markdown_cell
from leaderboards.table_order import table_order
from zoo.validation.schema import to_data


@dataclasses.dataclass(frozen=True)
class SuiteRow:
    model: str  # the model's registered name
    values: tuple[float | None, ...]  # each cell's main metric (mean over seeds), None where not run
    ranks: tuple[int | None, ...]
    mean_rank: float
    reads: tuple[bool | None, ...] = ()  # per cell, whether the model can run it (None: the board cannot tell)
    win_share: float = 0.5  # the order's tie-break (`leaderboards.table_order.win_shares`)

    @property
    def coverage(self) -> str:
        """Cells entered over cells it can run, e.g. "3/3"; "2/?" where the board cannot tell."""
        entered = sum(value is not None for value in self.values)
        if any(read is None for read in self.reads):
            return f"{entered}/?"
        return f"{entered}/{sum(bool(read) or value is not None for read, value in zip(self.reads, self.values))}"

    def shown(self, column: int) -> str:
        """A cell as the tables show it: metric and rank, "n/a" where the model cannot run it, else "—"."""
        value, rank = self.values[column], self.ranks[column]
        if value is not None:
            return f"{value:.4f} (#{rank})"
        return "n/a" if self.reads and self.reads[column] is False else "—"


@dataclasses.dataclass(frozen=True)
class SuiteBoard:
    suite: str
    description: str
    cells: tuple[Cell, ...]
    metrics: tuple[str, ...]  # each cell's main metric
    rows: tuple[SuiteRow, ...]
    hashes: tuple[str | None, ...] = ()  # the dataset hash each column's runs read (None: no run)
    stand_in: bool = False  # True: the rows read zoos other than the pinned ones (ranked among themselves only)
    checked: bool = True  # a stand-in's runs were checked to be the pinned zoos' (False: the board lacks them)
    names: tuple[str | None, ...] = ()  # each column's dataset's name on the board (None: unregistered or no run)
    kinds: tuple[str, ...] = ()  # each cell's members' weight-space kind ("feedforward", "transformer")
    cycles: tuple[tuple[str, ...], ...] = ()  # models whose dominance is cyclic (`leaderboards.table_order`)


def run_cell(entry: Entry, cells: tuple[Cell, ...]) -> Cell | None:
    """The cell `entry` is a run of, on whatever bytes, or None. The run must match the cell's task, zoo
    config and seeds, and the task config its protocol resolves to. For a built-in model it must also match
    the model fields its presets and group fix."""
    results = entry.results
    for cell in cells:
        if (results.task == cell.task and results.dataset.config == cell.zoo.config
                and sorted(results.seeds) == sorted(cell.seeds)
                and canonical_json(results.task_config) == canonical_json(_task_config(cell))
                and _model_fields_match(results.model, results.model_config, cell)):
            return cell
    return None


def _model_fields_match(model: str, config: dict[str, Any], cell: Cell) -> bool:
    """Whether a run's model config has the fields `cell` fixes for `model` (standard-v2's presets and
    group). An outside model the board cannot import is taken as its run recorded it."""
    from nfn_models.registry import MODELS

    if not (cell.model_presets or cell.group) or model not in MODELS.builtin_names():
        return True
    return all(canonical_json(config.get(key)) == canonical_json(value)
               for key, value in cell_model_fields(cell, model).items())


def _task_config(cell: Cell) -> Any:
    return to_data(create_task(cell.task, **cell.task_overrides).config)


def suite_boards(entries: list[Entry], same_runs: Callable[[str, str], bool | None] | None = None,
                 names: dict[str, str] | None = None) -> list[SuiteBoard]:
    """Every standard suite with at least one run of one of its cells.

    Its ranked table (the runs on the pinned zoos) comes first, then a table per set of stand-in zoos. A
    stand-in is a zoo with other bytes that holds the same runs as the cell's pinned zoo. `same_runs(hash,
    pinned hash)` decides, e.g. `leaderboards.pinned.same_runs`: the zoo regenerated elsewhere. Where it
    answers None, the board cannot check. Then the run is shown in a stand-in table that says so. Without
    `same_runs` there are no stand-in tables. `names` maps a dataset hash to its name on the board, shown
    with each column's hash.

    Within a table every column's runs read the same bytes, so its ranks compare like with like. A stand-in
    run is never ranked against the pinned ones. A newer entry of a model for a cell on the same bytes
    replaces the older.
    """
    boards = []
    for name in STANDARD_SUITES.names():
        suite = STANDARD_SUITES.get(name)()
        runs = [(entry, cell) for entry in sorted(entries, key=lambda e: e.submission.accepted, reverse=True)
                if (cell := run_cell(entry, suite.cells)) is not None]
        pinned = [(entry, cell) for entry, cell in runs if entry.results.dataset.dataset_hash == cell.zoo.dataset_hash]
        if pinned:
            boards.append(_board(suite, pinned, stand_in=False, names=names))
        verdicts = {} if same_runs is None else {
            id(entry): same_runs(entry.results.dataset.dataset_hash, cell.zoo.dataset_hash)
            for entry, cell in runs if entry.results.dataset.dataset_hash != cell.zoo.dataset_hash}
        stand_ins = [(entry, cell) for entry, cell in runs if verdicts.get(id(entry), False) is not False]
        boards += [_board(suite, group, stand_in=True, names=names,
                          checked=all(verdicts[id(entry)] for entry, _ in group))
                   for group in _same_bytes_groups(stand_ins)]
    return boards


def board_suite_boards(root, entries: list | None = None) -> list[SuiteBoard]:
    """`suite_boards` of the board at `root`: its entries, stand-ins found by their pinned test splits.

    `entries` are the board's `(path, Entry)` pairs when the caller has read them already."""
    from leaderboards.datasets import load_datasets
    from leaderboards.entries import load_entries
    from leaderboards.pinned import same_runs

    names = {digest: record.name for digest, record in load_datasets(root).items()}
    entries = load_entries(root) if entries is None else entries
    return suite_boards([entry for _, entry in entries], same_runs(root), names)


def _same_bytes_groups(runs: list[tuple[Entry, Cell]]) -> list[list[tuple[Entry, Cell]]]:
    """The runs (newest first) split into groups in which each zoo is one set of bytes. In each group a
    model has at most one run per cell. Each run joins the first group that fits it."""
    groups: list[tuple[dict[str, str], set[tuple[str, str]], list]] = []  # zoo -> hash, (model, cell), runs
    for entry, cell in runs:
        digest, slot = entry.results.dataset.dataset_hash, (entry.results.model, cell.name)
        for zoos, slots, members in groups:
            if zoos.get(cell.zoo.name, digest) == digest:
                if slot not in slots:  # an older run of the same model and cell on the same bytes is dropped
                    zoos[cell.zoo.name] = digest
                    slots.add(slot)
                    members.append((entry, cell))
                break
        else:
            groups.append(({cell.zoo.name: digest}, {slot}, [(entry, cell)]))
    return [members for _, _, members in groups]


def _board(suite, runs: list[tuple[Entry, Cell]], stand_in: bool, names: dict[str, str] | None = None,
           checked: bool = True) -> SuiteBoard:
    """One table: a row per model with each cell's metric, rank, coverage and mean rank. Rows follow
    `leaderboards.table_order` (runs newest first)."""
    chosen: dict[str, dict[str, Entry]] = {}  # model -> cell -> its newest entry
    for entry, cell in runs:
        chosen.setdefault(entry.results.model, {}).setdefault(cell.name, entry)
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
            ranks[identity].append(None if value is None else ranks_of(present + [value], higher)[-1])
    models = list(chosen)
    order = table_order(models, [ranks[model] for model in models])
    kinds = cell_kinds(suite.cells)
    rows = [SuiteRow(model, values[model], tuple(ranks[model]),
                     statistics.fmean(r for r in ranks[model] if r is not None),
                     cell_reads(model, suite.cells, kinds), order.win_shares[index])
            for index, model in ((index, models[index]) for index in order.order)]
    read = {cell.name: entry.results.dataset.dataset_hash for entry, cell in runs}
    hashes = tuple(read.get(cell.name) for cell in suite.cells)
    return SuiteBoard(suite.name, suite.description, suite.cells, metrics, tuple(rows), hashes, stand_in,
                      checked, tuple((names or {}).get(digest) if digest else None for digest in hashes), kinds,
                      tuple(tuple(models[index] for index in cycle) for cycle in order.cycles))


def showing(boards: list[SuiteBoard], suite: str, cell: str, model: str, digest: str) -> SuiteBoard | None:
    """The table of `boards` that shows `model`'s run of `suite`'s `cell` on the bytes `digest`.

    That is the ranked one (`stand_in` false) or a stand-in's; None where no table shows it. What
    `leaderboard submit` says of a suite folder's cells is read from here. So it never contradicts the
    rendered board.
    """
    for board in boards:
        names = [c.name for c in board.cells]
        if board.suite != suite or cell not in names:
            continue
        column = names.index(cell)
        if board.hashes[column] == digest and any(row.model == model and row.values[column] is not None
                                                  for row in board.rows):
            return board
    return None


ORDER_NOTE = (
    "The rows are ordered so that no model is listed above one that beats it in every cell both have. Between "
    "models where neither does, the higher win share comes first: the mean, over a model's cells, of the share of "
    "the cell's other models it ranks above (a tie counts half), so a cell with few entries weighs as much as a "
    "full one. Only the cells a model has count, so reading more cells earns no place: a cell it cannot run (n/a: "
    "its members are of a weight space the model does not read, as the transformer cell is for a model of CNN and "
    "SIREN weights, or its task does not take the model) counts neither for nor against it. Coverage is the cells "
    "entered over the cells the model can run (? where the board cannot tell, as it never imports a submission's "
    "code); the mean rank is shown for reference. Where dominance is cyclic (A beats B wherever they meet, B beats "
    "C, C beats A), no order satisfies every pair: such models stay together and are named under the table.")


def board_heading(board: SuiteBoard) -> tuple[str, str]:
    """A table's title and what it says about its bytes and its order (the Markdown page's and the site's)."""
    if not board.stand_in:
        return board.suite, f"Only runs on the pinned zoos (the hashes below) are ranked here. {ORDER_NOTE}"
    names = board.names or (None,) * len(board.cells)
    read = ", ".join(sorted({f"{name or cell.zoo.name} {digest[:12]}"
                             for cell, digest, name in zip(board.cells, board.hashes, names) if digest is not None}))
    unchecked = ("" if board.checked else " This board holds no pinned copy of the suite's zoos, so it could not "
                 "check that these zoos hold the same runs (a regenerated zoo does); the official board checks.")
    return (f"{board.suite} on stand-in zoos ({read})",
            "Runs on zoos regenerated elsewhere (other bytes than the pinned hashes): not ranked against the suite's "
            "table; ranked among themselves, as every column here read the same bytes, in the order of the "
            "suite's table." + unchecked)


def cycle_lines(board: SuiteBoard) -> list[str]:
    """One line per group of models whose dominance is cyclic (none in most tables)."""
    return [f"Cyclic dominance (each beaten in every shared cell by another of them; ordered by win share): "
            f"{', '.join(cycle)}." for cycle in board.cycles]


def kind_label(board: SuiteBoard, column: int) -> str:
    """Which models can read a column's members, e.g. "transformer weights"; "" where unknown."""
    return f" ({board.kinds[column]} weights)" if board.kinds else ""


def dataset_label(board: SuiteBoard, cell: Cell, digest: str | None) -> str:
    """Which bytes a column holds: the pinned hash, or a stand-in's beside it (or none yet)."""
    pinned = cell.zoo.dataset_hash[:12]
    if not board.stand_in:
        return f"dataset {pinned}"
    if digest is None:
        return f"no run on a stand-in yet; pinned {pinned}"
    name = dict(zip(board.hashes, board.names)).get(digest) if board.names else None
    return f"dataset {name + ' ' if name else ''}{digest[:12]}, pinned {pinned}"


def suite_markdown(boards: list[SuiteBoard]) -> str:
    """The suites' page: per table, the suite's cells (zoo and hash) and one row per model."""
    lines = ["# Standard suites", ""]
    for board in boards:
        lines += suite_section(board, "##")
    return "\n".join(lines)


def suite_section(board: SuiteBoard, heading: str) -> list[str]:
    """One table as Markdown lines: its heading (at level `heading`, e.g. "##") and what its bytes are. Then
    the cells and one row per model."""
    title, note = board_heading(board)
    lines = [f"{heading} {markdown_cell(title)}", "", markdown_cell(board.description), "", note, ""]
    lines += [f"- {cell.name}{kind_label(board, column)}: {cell.task} on {cell.zoo.name} "
              f"({dataset_label(board, cell, digest)}), {markdown_cell(cell.label)}, seeds "
              f"{', '.join(map(str, cell.seeds))}"
              for column, (cell, digest) in enumerate(zip(board.cells, board.hashes or (None,) * len(board.cells)))]
    header = ["Model", *(f"{cell.name} ({metric})" for cell, metric in zip(board.cells, board.metrics)),
              "Coverage", "Win share", "Mean rank"]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in board.rows:
        shown = [row.shown(column) for column in range(len(board.cells))]
        lines.append(f"| {markdown_cell(row.model)} | " + " | ".join(shown)
                     + f" | {row.coverage} | {row.win_share:.2f} | {row.mean_rank:.2f} |")
    return lines + [""] + [markdown_cell(line) for line in cycle_lines(board)] + ([""] if board.cycles else [])
