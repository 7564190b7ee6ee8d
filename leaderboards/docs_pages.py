"""The documentation's results tables, rendered from a board into marked regions of Markdown pages.

Result pages mix tables (data) with analysis (prose, written by hand). The tables must never be copied by
hand. So each one lives in a marked region that `nfnzoo leaderboard render --docs DIR` rewrites from the
board. Everything outside the markers stays as its author wrote it. There are six kinds of region.

A board region opens with `<!-- nfnzoo:board task=generalization dataset=6e211693486a -->` and closes with
`<!-- /nfnzoo:board -->`. It holds the dataset's sweep tables and one ranked table per evaluation protocol.

The teaser region lies between `<!-- nfnzoo:teaser -->` and `<!-- /nfnzoo:teaser -->`. It holds one row per
ranked table of the board, with its top two entries.

A suite region opens with `<!-- nfnzoo:suite name=standard-v1 -->` and closes with `<!-- /nfnzoo:suite -->`.
It holds the standard suite's ranked table, then one per set of stand-in zoos.

An agreement region opens with `<!-- nfnzoo:agreement base=standard-v2 larger=standard-v2-4x -->` and closes
with `<!-- /nfnzoo:agreement -->`. It holds each cell's rank agreement between the two suites, and every
model's two scores. Where the larger runs recorded learning curves, it adds their budget curves
(`leaderboards.curves`).

A separation region opens with `<!-- nfnzoo:separation suite=standard-v2 without=mlp,probegen -->` and closes
with `<!-- /nfnzoo:separation -->`. It says, per cell, which models the board tells apart beyond seed noise
(`leaderboards.separation`); `without` (optional) leaves models out.

A budgets region opens with `<!-- nfnzoo:budgets task=generalization dataset=391f00067b9d models=scalegmn,hnp
subset=activation:relu -->` and closes with `<!-- /nfnzoo:budgets -->`. It sets each of the models' entries on
the dataset beside the others, with the training budget each ran (`leaderboards.budgets`).

`board` regions name a task and a dataset, by its hash or the hash's first 12 hex digits. Under each table
they print the protocol, the seeds and the full dataset hash. Where the task ranks, they add the tau-b
ceiling the test targets' ties allow. Below the dataset they list the suite entries recorded as skipped on
it (`leaderboards/skipped.json`). Such an entry's protocol leaves its data no test rows, so no result can
exist.

`render_docs(root, docs_dir, readme)` rewrites the regions of the pages. It refuses, in one line, a page
that is a symbolic link, lies below one, or is not a regular file. That happens before anything is read or
written. `stale_pages` says which pages differ from what the board renders now; the docs test runs it on the
official board. Both also list the board's datasets that no region shows.

Every free text from the board goes through `leaderboards.escape.markdown_cell` / `markdown_text`. That is
model labels, dataset names, protocol lines and skip reasons.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import stat
from pathlib import Path

from benchmarks.files import write_text_atomic
from zoo.storage import nofollow
from zoo.validation.inputs import InputError
from leaderboards.board import CLAIMS_NOTE, RESCORED_NOTE, DatasetSection, Table, TaskBoard, build_board
from leaderboards.escape import markdown_cell, markdown_text
from leaderboards.skipped import SkippedEntries, load_skipped

# a region's markers are whole lines, so prose can quote them inline
REGION = re.compile(r"^<!-- nfnzoo:(?P<kind>[a-z]+)(?P<params>[^>\n]*?) -->\n(?P<body>.*?)^<!-- /nfnzoo:(?P=kind) -->$",
                    re.DOTALL | re.MULTILINE)
OPENING = re.compile(r"^<!-- nfnzoo:(?P<kind>[a-z]+)", re.MULTILINE)
PARAMS = {"board": {"task", "dataset"}, "teaser": set(), "suite": {"name"}, "agreement": {"base", "larger"},
          "separation": {"suite"}, "budgets": {"task", "dataset", "models"}}
OPTIONAL = {"separation": {"without"}, "budgets": {"subset"}}  # parameters a region may leave out
COMMAND = "nfnzoo leaderboard render --docs docs --readme README.md"
NOTICE = f"*Generated from the official board by `{COMMAND}`; edits between the markers are overwritten.*"
BOARD_COLUMNS = ("Params", "Train time / seed (s)", "Re-scored", "Claims", "Entry")  # after Rank, Model, metrics
# -- the cells -------------------------------------------------------------------------------

def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def _rule(columns) -> str:
    return "|" + "|".join("---" for _ in columns) + "|"


def _seeds_line(table: Table) -> str:
    sets: dict[tuple, int] = {}
    for row in table.rows:
        key = tuple(row.entry.results.seeds)
        sets[key] = sets.get(key, 0) + 1
    parts = [f"{', '.join(str(s) for s in seeds)}" + ("" if len(sets) == 1 else f" ({count} entries)")
             for seeds, count in sorted(sets.items())]
    return "Seeds: " + "; ".join(parts) + (" (every entry)." if len(sets) == 1 else ".")


def _ceiling(table: Table) -> float | None:
    values = [seed.ranking["kendall_tau_ceiling"] for row in table.rows for seed in row.entry.results.per_seed
              if "kendall_tau_ceiling" in seed.ranking]
    return min(values) if values else None


def _table(board: TaskBoard, table: Table) -> list[str]:
    columns = ("Rank", "Model", *board.metrics, *(c for c in BOARD_COLUMNS if c in table.columns))
    lines = [_row(markdown_cell(c) for c in columns), _rule(columns)]
    for row in table.rows:
        cells = {column: markdown_cell(row.cells[column]) for column in columns}
        cells["Entry"] = f"`{row.cells['Entry']}`"  # an id: <model name>-<32 hex digits>
        lines.append(_row(cells[column] for column in columns))
    return lines


def board_region(board: TaskBoard, section: DatasetSection, skipped: tuple[SkippedEntries, ...]) -> str:
    """The generated body of a `board` region: the section's sweeps, then a table per protocol."""
    lines = [NOTICE, ""]
    for sweep in section.sweeps:
        lines += [f"{markdown_text(sweep.title)}:", "", _row(markdown_cell(c) for c in sweep.header),
                  _rule(sweep.header), *(_row(markdown_cell(c) for c in row) for row in sweep.rows), ""]
    for table in section.tables:
        label = table.label
        if label:
            lines += [f"**{markdown_text(label)}**", ""]
        lines += [*_table(board, table), ""]
        lines += [markdown_text(line) + "  " for line in table.protocol_lines]
        lines += [markdown_text(_seeds_line(table)) + "  ",
                  f"Dataset: `{section.dataset_hash}` ({markdown_text(section.name)}, config `{section.config}`).", ""]
    if section.tables:
        lines += [markdown_text(f"{RESCORED_NOTE} {CLAIMS_NOTE}"), ""]
    for record in skipped:
        if record.task == board.task and record.dataset_hash == section.dataset_hash:
            names = ", ".join(f"`{name}`" for name in record.entries)
            lines += [f"Skipped by the `{record.suite}` suite on this dataset (no result can exist): {names}: "
                      f"{markdown_text(record.reason)}.", ""]
    return "\n".join(lines)


def teaser_region(boards: list[TaskBoard]) -> str:
    """The generated body of the `teaser` region: every ranked table's top two entries."""
    columns = ("Benchmark (metric)", "Dataset", "Protocol", "Seeds", "Tie ceiling", "#1", "#2", "Entries")
    lines = [NOTICE, "", _row(columns), _rule(columns)]
    for board in boards:
        arrow = "↑" if board.higher_is_better else "↓"
        for section in board.sections:
            for table in section.tables:
                top = [f"{markdown_cell(row.cells['Model'])} {_short(row, board.main_metric)}"
                       for row in table.rows[:2]]
                seeds = sorted({len(row.entry.results.seeds) for row in table.rows})
                ceiling = _ceiling(table)
                lines.append(_row([
                    f"{board.task} ({markdown_cell(board.main_metric)} {arrow})",
                    f"{markdown_cell(section.name)} `{section.dataset_hash[:12]}`",
                    markdown_cell(table.label) or "—",
                    "–".join(str(n) for n in (seeds[0], seeds[-1]) if n is not None) if seeds[0] != seeds[-1]
                    else str(seeds[0]),
                    f"{ceiling:.3f}" if ceiling is not None else "—",
                    *(top + ["—"] * (2 - len(top))), str(len(table.rows))]))
    lines += ["", "Mean ± std over each entry's seeds on the dataset's test split; the dataset column gives the "
              "first 12 hex digits of its hash. Each results page repeats these tables in full with the "
              "protocol, the seeds, the whole dataset hash and the tie ceiling under each."]
    return "\n".join(lines)


def _short(row, metric: str) -> str:
    summary = row.entry.results.summary[metric]
    return f"{summary.mean:.3f} ± {summary.std:.3f}"


# -- the regions -----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Rendered:
    boards: list[TaskBoard]
    skipped: tuple[SkippedEntries, ...]
    suites: list = dataclasses.field(default_factory=list)  # leaderboards.suite_board.SuiteBoard
    root: Path | None = None  # the board, for regions that read entries' stored predictions
    entries: list = dataclasses.field(default_factory=list)  # the board's (path, Entry) pairs, read once
    agreements: dict = dataclasses.field(default_factory=dict)  # (base, larger) -> its cells, computed once


def agreement_region(rendered: Rendered, base: str, larger: str, where: str) -> str:
    """A standard suite's rank agreement with a larger-budget run of it (`leaderboards.agreement`)."""
    from leaderboards.agreement import agreement_markdown, agreements
    from leaderboards.curves import budget_curves, curves_markdown

    try:
        if (base, larger) not in rendered.agreements:
            rendered.agreements[base, larger] = agreements(rendered.root, base, larger, entries=rendered.entries)
        cells = rendered.agreements[base, larger]
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if not any(cell.models for cell in cells):
        return f"{NOTICE}\n\nNo model has entries of both {base} and {larger} on the board yet."
    curves = curves_markdown(budget_curves(rendered.entries, base, larger), base, larger)
    return f"{NOTICE}\n\n{agreement_markdown(cells, base, larger)}" + (f"\n\n{curves}" if curves else "")


def separation_region(rendered: Rendered, suite: str, without: str, where: str) -> str:
    """Which models of each of a suite's cells the board separates beyond seed noise (`leaderboards.separation`)."""
    from leaderboards.separation import separation_markdown, separations

    left_out = frozenset(name for name in without.split(",") if name)
    try:
        cells = separations(rendered.entries, suite, left_out)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if not any(cell.models for cell in cells):
        return f"{NOTICE}\n\nNo run of {suite} is on the board yet."
    return f"{NOTICE}\n\n{separation_markdown(cells, left_out)}"


def budgets_region(rendered: Rendered, params: dict[str, str], where: str) -> str:
    """Some models' runs on one dataset with the training budget of each (`leaderboards.budgets`)."""
    from leaderboards.budgets import budget_rows, budgets_markdown, parse_subset

    models = [name for name in params["models"].split(",") if name]
    if not models:
        raise ValueError(f"{where}: models: expected one or more model names joined by ',', got none")
    board, section = _section(rendered, params, where)  # refuses a task or dataset the board does not have
    subset = parse_subset(params.get("subset", ""), where)
    metric, rows = budget_rows(rendered.entries, board.task, section.dataset_hash, models, subset)
    return f"{NOTICE}\n\n{budgets_markdown(metric, rows, models)}"


def suite_region(suites: list, name: str, where: str) -> str:
    """A standard suite's tables (`leaderboards.suite_board`): the ranked one, then each stand-in one."""
    from benchmarks.standard import STANDARD_SUITES
    from leaderboards.suite_board import suite_section

    if name not in STANDARD_SUITES.names():
        raise ValueError(f"{where}: name={name!r} is no standard suite; expected one of {STANDARD_SUITES.names()}")
    lines = [NOTICE, ""]
    for board in [board for board in suites if board.suite == name]:
        lines += suite_section(board, "###")
    if len(lines) == 2:
        lines.append(f"No run of {name} is on the board yet.")
    return "\n".join(lines).rstrip("\n")


def _params(text: str, kind: str, where: str) -> dict[str, str]:
    params = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        allowed = PARAMS[kind] | OPTIONAL.get(kind, set())
        if not sep or key not in allowed:
            raise ValueError(f"{where}: nfnzoo:{kind} takes {sorted(allowed) or 'no parameters'} "
                             f"as key=value; got {token!r}")
        params[key] = value
    missing = PARAMS[kind] - set(params)
    if missing:
        raise ValueError(f"{where}: nfnzoo:{kind} needs {sorted(missing)}")
    return params


def _section(rendered: Rendered, params: dict[str, str], where: str) -> tuple[TaskBoard, DatasetSection]:
    boards = {board.task: board for board in rendered.boards}
    board = boards.get(params["task"])
    if board is None:
        raise ValueError(f"{where}: task={params['task']!r} has no entries on the board; expected one of "
                         f"{sorted(boards)}")
    found = [s for s in board.sections if s.dataset_hash.startswith(params["dataset"]) and len(params["dataset"]) >= 12]
    if len(found) != 1:
        raise ValueError(f"{where}: dataset={params['dataset']!r} is not a dataset of task {board.task} (expected 12 "
                         f"or more hex digits of one of {[s.dataset_hash[:12] for s in board.sections]})")
    return board, found[0]


def _board_body(rendered: Rendered, params: dict[str, str], here: str) -> tuple[str, set[tuple[str, str]]]:
    board, section = _section(rendered, params, here)
    return board_region(board, section, rendered.skipped), {(board.task, section.dataset_hash)}


# each region kind: (rendered board, its parameters, where) -> (its body, the (task, dataset) sections it shows)
REGIONS = {
    "board": _board_body,
    "teaser": lambda rendered, params, here: (teaser_region(rendered.boards), {("*", "*")}),
    "suite": lambda rendered, params, here: (suite_region(rendered.suites, params["name"], here), set()),
    "agreement": lambda rendered, params, here: (
        agreement_region(rendered, params["base"], params["larger"], here), set()),
    "separation": lambda rendered, params, here: (
        separation_region(rendered, params["suite"], params.get("without", ""), here), set()),
    "budgets": lambda rendered, params, here: (budgets_region(rendered, params, here), set()),
}


def rewrite(text: str, where: str, rendered: Rendered) -> tuple[str, set[tuple[str, str]]]:
    """`text` with every region's body rendered anew, and the (task, dataset hash) sections it shows."""
    shown: set[tuple[str, str]] = set()
    opened = len(OPENING.findall(text))
    matched = 0

    def replace(match: re.Match) -> str:
        nonlocal matched
        matched += 1
        kind = match["kind"]
        line = text.count("\n", 0, match.start()) + 1
        here = f"{where}:{line}"
        if kind not in PARAMS:
            raise ValueError(f"{here}: unknown region nfnzoo:{kind}; expected one of {sorted(PARAMS)}")
        body, sections = REGIONS[kind](rendered, _params(match["params"], kind, here), here)
        shown.update(sections)
        return f"<!-- nfnzoo:{kind}{match['params']} -->\n{body}\n<!-- /nfnzoo:{kind} -->"

    result = REGION.sub(replace, text)
    if matched != opened:
        raise ValueError(f"{where}: {opened} nfnzoo region(s) open but {matched} close; each "
                         "`<!-- nfnzoo:KIND ... -->` line needs its `<!-- /nfnzoo:KIND -->`")
    return result, shown


def render_pages(root: str | Path, pages: list[Path]) -> tuple[dict[Path, str], list[str]]:
    """Each page's text with its regions rendered from the board at `root`. Also the board's (task, dataset)
    sections that no region shows, as `task dataset_hash[:12]`."""
    rendered = _read_board(str(root), board_state(root))
    out, shown = {}, set()
    for page in pages:
        text, sections = rewrite(page.read_text(encoding="utf-8"), str(page), rendered)
        out[page] = text
        shown |= sections
    unshown = [f"{board.task} {section.dataset_hash[:12]}" for board in rendered.boards
               for section in board.sections if (board.task, section.dataset_hash) not in shown]
    return out, unshown


def board_state(root: str | Path) -> tuple:
    """Every file under the board, with its size, modification time and inode: what a render reads."""
    state = []
    for folder, _, names in os.walk(root):
        for name in names:
            status = os.stat(os.path.join(folder, name), follow_symlinks=False)
            state.append((os.path.join(folder, name), status.st_size, status.st_mtime_ns, status.st_ino))
    return tuple(sorted(state))


@functools.lru_cache(maxsize=4)
def _read_board(root: str, state: tuple) -> Rendered:
    """The board at `root` read once per `state`: a process that renders twice (a check, then a render)
    reads and bootstraps it once. Any file added, removed or changed gives a new state."""
    from leaderboards.entries import load_entries
    from leaderboards.suite_board import board_suite_boards

    entries = load_entries(root)  # read once for every region
    return Rendered(build_board(root, entries), load_skipped(root), board_suite_boards(root, entries), Path(root),
                    entries)


def docs_pages(docs_dir: str | Path, readme: str | Path | None = None) -> list[Path]:
    """Every Markdown page under `docs_dir` (and `readme`) that holds a region."""
    pages = [_checked_page(Path(docs_dir), page) for page in _markdown_files(Path(docs_dir))]
    if readme is not None:
        pages.append(_checked_page(Path(readme).parent, Path(readme)))
    return [page for page in pages if OPENING.search(page.read_text(encoding="utf-8"))]


def _markdown_files(docs_dir: Path) -> list[Path]:
    """Every `*.md` entry under `docs_dir`, walked without following links. A linked folder counts too, so
    that `_checked_page` refuses it; it would otherwise be skipped in silence."""
    found = []
    for folder, dirs, files in os.walk(docs_dir):
        found += [Path(folder, name) for name in files if name.endswith(".md")]
        found += [Path(folder, name) for name in dirs if os.path.islink(os.path.join(folder, name))]
    return sorted(found)


def _checked_page(root: Path, page: Path) -> Path:
    """`page` once neither it nor a folder between `root` and it is a symbolic link, and it is a regular
    file.

    The check runs before anything is read or written. So a planted link is refused: never read through,
    never replaced by a regular file. And a FIFO never blocks the render. One `InputError` line names the
    page.
    """
    nofollow.check(root, page)  # a link: `LinkRefused`, naming it
    mode = os.lstat(page).st_mode
    if not stat.S_ISREG(mode):
        raise InputError(f"{page}: not a regular file; a results page is a Markdown file")
    return page


def stale_pages(root: str | Path, docs_dir: str | Path,
                readme: str | Path | None = None) -> tuple[list[Path], list[str]]:
    """The pages whose regions differ from what the board at `root` renders now. Also the board's sections
    that no region shows. Writes nothing."""
    texts, unshown = render_pages(root, docs_pages(docs_dir, readme))
    return [page for page, text in texts.items() if page.read_text(encoding="utf-8") != text], unshown


def render_docs(root: str | Path, docs_dir: str | Path,
                readme: str | Path | None = None) -> tuple[list[Path], list[str]]:
    """Rewrites the regions of the pages under `docs_dir` (and `readme`) from the board at `root`.
    Returns the pages changed and the board's sections that no region shows."""
    texts, unshown = render_pages(root, docs_pages(docs_dir, readme))
    changed = []
    for page, text in texts.items():
        if page.read_text(encoding="utf-8") != text:
            write_text_atomic(page, text)
            changed.append(page)
    return changed, unshown
