"""Rendering a leaderboard: Markdown tables, plots and a static HTML site, from `leaderboards.board`.

`render(root, out_dir)` reads the accepted entries under `root` and writes four things.

(1) `<out_dir>/<task>.md`. Per dataset, it first holds a table per swept protocol field: the task's
`SWEEPS`, e.g. the generalization task's accuracy threshold, one column per value. Then comes one table per
evaluation protocol, ranked by the task's main metric. Entries on different test sets are never ranked
together, e.g. the ReLU subset and the whole zoo. The tables have the board's columns
(`leaderboards.board.COLUMNS`). Under each table is its protocol line and what the test targets' ties allow
a ranking to reach.

(2) The plots of `leaderboards.plots`: `<task>.png`, `<task>-params.png`, `<task>-time.png`,
`<task>-predictions.png`.

(3) `<out_dir>/suites.md` when a standard suite has entries, linked from the index
(`leaderboards.suite_board`). It has one row per model, with each cell's metric, its coverage and mean rank.
Rows follow `leaderboards.table_order`.

(4) `<out_dir>/index.md`, and the HTML site (`leaderboards.site`: `index.html`, `<task>.html`).

It returns the Markdown of the task pages. matplotlib is imported only to draw the plots.

Every free text is escaped for Markdown (`leaderboards.escape`). That is a device, a model's config values
in its label, a dataset's name and a protocol line. Everything is built in a temporary folder beside
`out_dir`. It is moved into place only once all of it was written. So a failure leaves `out_dir` as it was,
never half-written. `out_dir` being a file is an error. No link inside `out_dir` is followed or replaced
(`zoo.storage.nofollow`); `out_dir` itself may be one.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import numpy as np

from benchmarks.files import write_text_atomic
from benchmarks.tasks import get_task_class
from leaderboards import plots
from leaderboards.board import CLAIMS_NOTE, RESCORED_NOTE, Table, TaskBoard, build_board
from leaderboards.datasets import load_datasets
from leaderboards.entries import entry_path, stored_predictions_path
from leaderboards.escape import markdown_cell, markdown_text
from leaderboards.pinned import load_pinned, pinned_sets, split_set_of
from leaderboards.rescore import read_stored_predictions
from leaderboards.site import write_site
from leaderboards.suite_board import SuiteBoard, board_suite_boards, suite_markdown
from zoo.storage import nofollow

EMPTY = "No accepted submissions yet."


def _markdown_row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def _markdown_table(table: Table) -> str:
    lines = [_markdown_row(table.columns), "|" + "|".join("---" for _ in table.columns) + "|"]
    for row in table.rows:
        cells = {column: markdown_cell(text) for column, text in row.cells.items()}
        cells["Entry"] = f"`{row.cells['Entry']}`"  # an id: <model name>-<32 hex digits> (entries.SubmissionInfo)
        if row.values.get("Code"):  # an https URL without spaces, quotes or parentheses (entries.CODE_URL)
            cells["Code"] = f"[{cells['Code']}]({row.values['Code']})"
        lines.append(_markdown_row(cells[column] for column in table.columns))
    return "\n".join(lines)


def task_markdown(board: TaskBoard, figures: list[tuple[str, str]]) -> str:
    """A task's Markdown page: per dataset its sweeps and ranked tables, then the plots' links."""
    direction = "higher" if board.higher_is_better else "lower"
    lines = [f"# Leaderboard: {markdown_text(board.task)}", "",
             f"Ranked by `{board.main_metric}` ({direction} is better); "
             "metrics are mean ± std (ddof=1) over seeds on the test split.", "", RESCORED_NOTE, "", CLAIMS_NOTE, ""]
    for section in board.sections:
        lines += [f"## {markdown_text(section.name)} — config `{section.config}` "
                  f"(dataset `{section.dataset_hash[:12]}`)", ""]
        if section.source:
            lines += [f"Source: {markdown_text(section.source)}.", ""]
        for sweep in section.sweeps:
            lines += [f"{sweep.title}:", "", _markdown_row(sweep.header),  # the task's metric and field names
                      "|" + "|".join("---" for _ in sweep.header) + "|",
                      *(_markdown_row(markdown_cell(c) for c in row) for row in sweep.rows), ""]
        for table in section.tables:
            if len(section.tables) > 1:
                lines += [f"### {markdown_text(table.heading)}", ""]
            lines += [_markdown_table(table), ""]
            if table.protocol_lines:
                lines += ["\n".join(markdown_text(line) for line in table.protocol_lines), ""]
    lines += [f"![{caption}]({name})" for name, caption in figures] + [""]  # our captions: task and metric names
    return "\n".join(lines)


def _top_predictions(root: Path, board: TaskBoard) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """Each table's top entry's first seed: (title, model, pinned targets, predictions), where the
    entry is verified and its targets are metadata."""
    known = load_datasets(root)
    task_class = get_task_class(board.task)
    panels = []
    for section in board.sections:
        record = known.get(section.dataset_hash)
        if record is None:
            continue
        metadata = {}  # split set -> its pinned file, read once per dataset
        for table in section.tables:
            top = table.rows[0].entry
            split_set = split_set_of(top.results.task_config)
            if not top.submission.verified or split_set not in pinned_sets(record):
                continue
            if split_set not in metadata:
                metadata[split_set] = load_pinned(root, record, split_set)
            expected = task_class.test_targets(metadata[split_set], top.results.task_config)
            if expected["target"].isna().any():
                continue
            stored = read_stored_predictions(stored_predictions_path(
                entry_path(root, top.results, top.submission.content_hash)))
            seed = top.results.seeds[0]
            rows = stored[stored["seed"] == seed].set_index("model_id")["prediction"]
            predictions = rows.reindex(expected["model_id"]).to_numpy(dtype=np.float64)
            title = section.title + (f", protocol {table.number}" if len(section.tables) > 1 else "")
            panels.append((title, top.results.model, expected["target"].to_numpy(dtype=np.float64), predictions))
    return panels


def _plots(root: Path, board: TaskBoard, out_dir: Path) -> list[tuple[str, str]]:
    """Draws the task's plots; returns (file name, caption) of those drawn."""
    task, metric = board.task, board.main_metric
    drawn = [(plots.metric_bars(board, out_dir / f"{task}.png"), f"{task}: {metric} per entry"),
             (plots.metric_against(board, "Params", "parameters", out_dir / f"{task}-params.png"),
              f"{task}: {metric} against parameters"),
             (plots.metric_against(board, "Train time / seed (s)", "train time per seed (s)",
                                   out_dir / f"{task}-time.png"), f"{task}: {metric} against train time per seed"),
             (plots.predicted_against_true(board, _top_predictions(root, board), out_dir / f"{task}-predictions.png"),
              f"{task}: predicted against true for each table's top entry")]
    return [(path.name, caption) for path, caption in drawn if path is not None]


def _write_all(root: Path, boards: list[TaskBoard], out_dir: Path, suites: list[SuiteBoard]) -> list[str]:
    """Writes every page, plot and the site into `out_dir`; returns the task pages' Markdown."""
    pages, index, figures = [], ["# Leaderboards", ""], {}
    if suites:  # a standard suite's entries together, one row per model
        write_text_atomic(out_dir / "suites.md", suite_markdown(suites))
        index.append(f"- [standard suites](suites.md): {', '.join(dict.fromkeys(board.suite for board in suites))}")
    for board in boards:
        figures[board.task] = _plots(root, board, out_dir)
        page = task_markdown(board, figures[board.task])
        write_text_atomic(out_dir / f"{board.task}.md", page)
        pages.append(page)
        index.append(f"- [{board.task}]({board.task}.md): {board.entries} entries on {len(board.sections)} dataset(s)")
    if not pages:
        index.append(EMPTY)
    write_text_atomic(out_dir / "index.md", "\n".join(index) + "\n")
    write_site(boards, out_dir, figures, EMPTY, suites)
    return pages


def _move_into(built: Path, out_dir: Path) -> None:
    """`built`'s files into `out_dir`: the folder itself when there is none yet, else file by file."""
    if not out_dir.exists():
        os.replace(built, out_dir)
        return
    for path in built.iterdir():  # checked before anything moves: a rename onto a folder would fail halfway
        target = nofollow.check(out_dir, out_dir / path.name)
        if target.is_dir():
            raise ValueError(f"{out_dir}: {path.name} is a folder there; the board's files cannot replace it")
    for path in sorted(built.iterdir()):  # `built` is ours, fresh; what it replaces in `out_dir` is no link
        os.replace(path, nofollow.check(out_dir, out_dir / path.name))
    built.rmdir()


def render(root: str | Path, out_dir: str | Path) -> str:
    """Writes the leaderboard pages, plots and site to `out_dir`; returns the task pages' Markdown."""
    root, out_dir = Path(root), Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: is a file; --out must be a folder (it is created if missing)")
    boards = build_board(root)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    built = out_dir.parent / f".{out_dir.name}.rendering-{os.getpid()}-{secrets.token_hex(4)}"
    built.mkdir()  # the umask's mode, unlike mkdtemp's 0700: it becomes `out_dir` when there is none
    try:
        pages = _write_all(root, boards, built, board_suite_boards(root))
        _move_into(built, out_dir)
    finally:
        nofollow.rmtree(out_dir.parent, built, ignore_errors=True)
    return "\n".join(pages) if pages else EMPTY + "\n"
