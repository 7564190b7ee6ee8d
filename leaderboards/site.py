"""The board as a static HTML site: one folder that opens from disk or any static host.

`write_site(boards, out_dir, plots)` writes `index.html`, which lists the tasks with their entry counts. It
writes `<task>.html` per task and the shared `site.css` and `site.js`. A task page holds, per dataset
(title, hash, source), the sweep tables and one table per protocol. Those have the board's columns
(`leaderboards.board`), the protocol lines under them, and the task's plots.

Tables sort by a click on any column header: numbers by value, an empty cell last; a second click reverses.
Three filters narrow the page: the dataset, a text the protocol must contain, and verified entries only.
Every text from an entry is HTML-escaped. A code link is shown only for the https URLs the board accepts. No
server, no external scripts or fonts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from benchmarks.files import write_text_atomic
from leaderboards.board import CLAIMS_NOTE, RESCORED_NOTE, Row, Sweep, Table, TaskBoard
from leaderboards.suite_board import SuiteBoard, board_heading, cycle_lines, dataset_label, kind_label
from zoo.validation.text import html_text

NUMERIC = {"Rank", "Params", "Train time / seed (s)", "Peak memory (MB)", "Seeds"}

CSS = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem auto;max-width:96rem;
padding:0 1rem;color:#1f2328}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #d0d7de}h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.86rem}
th,td{border:1px solid #d0d7de;padding:.25rem .4rem;text-align:left;vertical-align:top}
td.number,td.metric span{white-space:nowrap}span.std{color:#57606a}
td.text{overflow-wrap:anywhere;min-width:4rem}th{overflow-wrap:normal}
td.entry code{overflow-wrap:anywhere}
th{background:#f6f8fa}table.entries th{cursor:pointer;user-select:none}
table.entries th[aria-sort=ascending]::after{content:" ▲"}table.entries th[aria-sort=descending]::after{content:" ▼"}
tr.unverified td{color:#8c959f}p.protocol{font-size:.85rem;color:#57606a;max-width:70rem}
.filters{display:flex;gap:1.5rem;flex-wrap:wrap;background:#f6f8fa;padding:.6rem 1rem;border-radius:6px}
div.board{overflow-x:auto}figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #d0d7de}code{font-size:.85em}
nav{margin-bottom:1rem}
"""

JS = """"use strict";
function cellValue(row, index) {
  const cell = row.cells[index];
  const raw = cell.getAttribute("data-value");
  return raw === null ? cell.textContent.trim() : raw;
}
function sortTable(table, index, numeric) {
  const header = table.tHead.rows[0].cells[index];
  const descending = header.getAttribute("aria-sort") === "ascending";
  for (const other of table.tHead.rows[0].cells) other.removeAttribute("aria-sort");
  header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = cellValue(a, index), y = cellValue(b, index);
    if (x === "" && y === "") return 0;
    if (x === "") return 1;
    if (y === "") return -1;
    const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
    return descending ? -order : order;
  });
  for (const row of rows) body.appendChild(row);
}
function applyFilters() {
  const dataset = document.getElementById("filter-dataset").value;
  const text = document.getElementById("filter-protocol").value.trim().toLowerCase();
  const verifiedOnly = document.getElementById("filter-verified").checked;
  for (const section of document.querySelectorAll("section.dataset")) {
    section.hidden = dataset !== "" && section.dataset.dataset !== dataset;
  }
  for (const block of document.querySelectorAll("div.board")) {
    block.hidden = text !== "" && !block.dataset.protocol.toLowerCase().includes(text);
    for (const row of block.querySelectorAll("tbody tr")) {
      row.hidden = verifiedOnly && row.dataset.verified !== "true";
    }
  }
  for (const section of document.querySelectorAll("section.dataset")) {  // no table left: no heading
    const blocks = Array.from(section.querySelectorAll("div.board"));
    if (blocks.length && blocks.every((block) => block.hidden)) section.hidden = true;
  }
}
document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table.entries")) {
    Array.from(table.tHead.rows[0].cells).forEach((header, index) => {
      header.addEventListener("click", () => sortTable(table, index, header.dataset.type === "number"));
    });
  }
  for (const id of ["filter-dataset", "filter-protocol", "filter-verified"]) {
    const control = document.getElementById(id);
    if (control) control.addEventListener("input", applyFilters);
  }
});
"""


def _e(text: object) -> str:
    return html_text(text)  # escaped, and every control, bidi or invisible character made visible


def _page(title: str, body: Sequence[str]) -> str:
    return "\n".join(["<!doctype html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      '<meta name="viewport" content="width=device-width, initial-scale=1">',
                      f"<title>{_e(title)}</title>", '<link rel="stylesheet" href="site.css">', "</head>", "<body>",
                      *body, '<script src="site.js"></script>', "</body>", "</html>", ""])


def short_entry(entry_id: str) -> str:
    """An entry id as a table shows it: the model name and the first 8 of its 32 hex digits. So the column
    stays narrow. The whole id is the cell's tooltip and the row's `data-entry`."""
    model, _, digits = entry_id.rpartition("-")
    return f"{model}-{digits[:8]}…" if model and len(digits) > 8 else entry_id


def _cell(row: Row, column: str, metrics: Sequence[str]) -> str:
    shown, value = row.cells[column], row.values.get(column)
    if column == "Code" and isinstance(value, str) and value.startswith("https://"):
        return f'<td class="number" data-value="{_e(shown)}"><a href="{_e(value)}">{_e(shown)}</a></td>'
    if column in metrics or column in NUMERIC:
        sort = "" if value is None else repr(float(value))
        mean, plus, std = shown.partition(" ± ")
        if column in metrics and plus:  # the std may go under the mean where the table is narrow
            return (f'<td class="metric" data-value="{sort}"><span>{_e(mean)}</span> '
                    f'<span class="std">± {_e(std)}</span></td>')
        return f'<td class="number" data-value="{sort}">{_e(shown)}</td>'
    if column == "Entry":
        return (f'<td class="entry" data-value="{_e(shown)}" title="{_e(shown)}">'
                f'<code>{_e(short_entry(shown))}</code></td>')
    return f'<td class="text">{_e(shown)}</td>'


def _header(column: str) -> str:
    """A column's header text: a metric's snake_case name may break after an underscore (`<wbr>`)."""
    return "_<wbr>".join(_e(part) for part in column.split("_"))


def _entries_table(table: Table, metrics: Sequence[str], table_id: str) -> list[str]:
    headers = "".join(f'<th data-type="{"number" if c in metrics or c in NUMERIC else "text"}" scope="col">'
                      f"{_header(c)}</th>" for c in table.columns)
    lines = [f'<table class="entries" id="{_e(table_id)}">', f"<thead><tr>{headers}</tr></thead>", "<tbody>"]
    for row in table.rows:
        verified = "true" if row.entry.submission.verified else "false"
        css = "" if row.entry.submission.verified else ' class="unverified"'
        cells = "".join(_cell(row, column, metrics) for column in table.columns)
        lines.append(f'<tr data-verified="{verified}" data-entry="{_e(row.entry.submission.id)}"{css}>{cells}</tr>')
    return lines + ["</tbody>", "</table>"]


def _sweep_table(sweep: Sweep) -> list[str]:
    head = "".join(f"<th>{_e(c)}</th>" for c in sweep.header)
    rows = ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in sweep.rows]
    return [f"<p>{_e(sweep.title)}:</p>", '<table class="sweep">', f"<thead><tr>{head}</tr></thead>", "<tbody>",
            *rows, "</tbody>", "</table>"]


def task_page(board: TaskBoard, plots: Sequence[tuple[str, str]]) -> str:
    """One task's page; `plots` are (file name, caption) beside it."""
    direction = "higher" if board.higher_is_better else "lower"
    datasets = "".join(f'<option value="{_e(s.dataset_hash[:12])}">{_e(s.title.replace("`", ""))}</option>'
                       for s in board.sections)
    body = ['<nav><a href="index.html">All tasks</a></nav>', f"<h1>Leaderboard: {_e(board.task)}</h1>",
            f"<p>Ranked by <code>{_e(board.main_metric)}</code> ({direction} is better); metrics are mean ± std "
            "(ddof=1) over seeds on the test split. Click a column header to sort.</p>",
            f'<p class="columns">{_e(RESCORED_NOTE)} {_e(CLAIMS_NOTE)}</p>',
            '<div class="filters">',
            f'<label>Dataset <select id="filter-dataset"><option value="">all</option>{datasets}</select></label>',
            '<label>Protocol contains <input id="filter-protocol" type="search" placeholder="e.g. relu"></label>',
            '<label><input type="checkbox" id="filter-verified"> re-scored entries only</label>', "</div>"]
    for section in board.sections:
        key = section.dataset_hash[:12]
        body += [f'<section class="dataset" data-dataset="{_e(key)}">',
                 f"<h2>{_e(section.title.replace('`', ''))}</h2>",
                 f"<p>Dataset sha256 <code>{_e(section.dataset_hash)}</code>"
                 + (f"; source <code>{_e(section.source)}</code>" if section.source else "") + "</p>"]
        for sweep in section.sweeps:
            body += _sweep_table(sweep)
        for table in section.tables:
            protocol_text = " ".join(table.protocol_lines) or json.dumps(table.protocol, sort_keys=True)
            body.append(f'<div class="board" data-protocol="{_e(protocol_text)}">')
            if len(section.tables) > 1:
                body.append(f"<h3>{_e(table.heading)}</h3>")
            body += _entries_table(table, board.metrics, f"table-{key}-{table.number}")
            body += [f'<p class="protocol">{_e(line)}</p>' for line in table.protocol_lines]
            body.append("</div>")
        body.append("</section>")
    for name, caption in plots:
        body += ["<figure>", f'<img src="{_e(name)}" alt="{_e(caption)}">', f"<figcaption>{_e(caption)}</figcaption>",
                 "</figure>"]
    return _page(f"nfnzoo leaderboard: {board.task}", body)


def suites_page(suites: Sequence[SuiteBoard]) -> str:
    """The standard suites' page: per suite its cells (zoo and pinned hash) and one sortable row per model
    (`leaderboards.suite_board`)."""
    body = ['<nav><a href="index.html">All tasks</a></nav>', "<h1>Standard suites</h1>",
            "<p>Each cell shows the model's main metric (mean over the cell's seeds) and its rank in the cell "
            "among the table's rows, which read the same bytes. Click a column header to sort.</p>"]
    for number, board in enumerate(suites):
        title, note = board_heading(board)
        hashes = board.hashes or (None,) * len(board.cells)
        cells = "".join(f"<li><code>{_e(c.name)}</code>{_e(kind_label(board, i))}: {_e(c.task)} on {_e(c.zoo.name)} "
                        f"({_e(dataset_label(board, c, h))}), {_e(c.label)}, seeds "
                        f"{_e(', '.join(map(str, c.seeds)))}</li>" for i, (c, h) in enumerate(zip(board.cells, hashes)))
        headers = ['<th data-type="text" scope="col">Model</th>'] + [
            f'<th data-type="number" scope="col">{_e(c.name)} ({_e(m)})</th>'
            for c, m in zip(board.cells, board.metrics)
        ] + ['<th data-type="text" scope="col">Coverage</th>', '<th data-type="number" scope="col">Win share</th>',
             '<th data-type="number" scope="col">Mean rank</th>']
        rows = []
        for row in board.rows:
            shown = "".join(f'<td data-value="{repr(float(v)) if v is not None else ""}">{_e(row.shown(i))}</td>'
                            for i, v in enumerate(row.values))
            rows.append(f"<tr><td>{_e(row.model)}</td>{shown}<td>{_e(row.coverage)}</td>"
                        f'<td data-value="{repr(float(row.win_share))}">{row.win_share:.2f}</td>'
                        f'<td data-value="{repr(float(row.mean_rank))}">{row.mean_rank:.2f}</td></tr>')
        cycles = [f"<p>{_e(line)}</p>" for line in cycle_lines(board)]
        anchor = board.suite + (f"-stand-in-{number}" if board.stand_in else "")
        body += [f'<section class="suite" id="suite-{_e(anchor)}">', f"<h2>{_e(title)}</h2>",
                 f"<p>{_e(board.description)}</p>", f"<p>{_e(note)}</p>", f"<ul>{cells}</ul>",
                 f'<table class="entries" id="table-suite-{_e(anchor)}">',
                 f"<thead><tr>{''.join(headers)}</tr></thead>", "<tbody>", *rows, "</tbody>", "</table>", *cycles,
                 "</section>"]
    return _page("nfnzoo leaderboards: standard suites", body)


def index_page(boards: Sequence[TaskBoard], empty: str, suites: Sequence[SuiteBoard] = ()) -> str:
    items = [f'<li><a href="{_e(b.task)}.html">{_e(b.task)}</a>: {b.entries} entries on {len(b.sections)} '
             "dataset(s)</li>" for b in boards]
    if suites:
        items.insert(0, '<li><a href="suites.html">standard suites</a>: '
                        f"{_e(', '.join(dict.fromkeys(board.suite for board in suites)))}</li>")
    return _page("nfnzoo leaderboards", ["<h1>nfnzoo leaderboards</h1>",
                                         "<ul>" + "".join(items) + "</ul>" if items else f"<p>{_e(empty)}</p>"])


def write_site(boards: Sequence[TaskBoard], out_dir: str | Path, plots: Mapping[str, Sequence[tuple[str, str]]],
               empty: str, suites: Sequence[SuiteBoard] = ()) -> Path:
    """Writes the site into `out_dir` (plots are expected beside it); returns its index.html."""
    out_dir = Path(out_dir)
    write_text_atomic(out_dir / "site.css", CSS)
    write_text_atomic(out_dir / "site.js", JS)
    for board in boards:
        write_text_atomic(out_dir / f"{board.task}.html", task_page(board, plots.get(board.task, ())))
    if suites:
        write_text_atomic(out_dir / "suites.html", suites_page(suites))
    return write_text_atomic(out_dir / "index.html", index_page(boards, empty, suites))
