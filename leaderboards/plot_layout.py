"""The layout the board's plots share: a grid of panels that no text overlaps or overruns.

A figure is a grid of matplotlib subfigures under constrained layout, one per panel (a board table). Each is
titled by its own suptitle, centred on its cell and wrapped to the cell's width. So a figure's title, the
panels' titles and the axes' labels never overlap, and the figure's edge cuts none. A panel's title names
its dataset and its protocol: what sets it apart from the figure's other panels (`Panel`). What every panel
shares is said once, under the figure's title. The sizes below are typographic (points and inches of text),
not measurements of any result.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from benchmarks.files import save_figure
from leaderboards.board import Row, TaskBoard
from leaderboards.escape import plot_text

MAX_PANELS = 12  # tables drawn per figure (the largest first); a board with more shows them in its tables
DPI = 110  # the figure is laid out at the resolution it is saved at
TEXT_SIZE = 9  # points: tick labels, point labels, a panel's title
FIGURE_TITLE_SIZE = 11
LINE = 1.25  # a line of text is this many times its font size high
CHAR_WIDTH = 0.62  # a character's mean advance in DejaVu Sans, as a fraction of the font size (generous: `_` and `m`)
LABEL_CHARS = 36  # a model's label wraps at this many characters (a 64-character name takes two lines)
LABEL_LIMIT = 120  # and is cut short past this many (a name and the config that sets its row apart)
PAD = 0.1  # inches between the figure's edge and any text


@dataclasses.dataclass(frozen=True)
class Panel:
    """One board table as a panel: its title (dataset, then protocol) and its ranked rows."""
    title: str
    rows: tuple[Row, ...]


def _protocol_parts(protocol_lines: tuple[str, ...]) -> list[str]:
    """A table's protocol description cut into its `; `-separated parts (as `leaderboards.board` writes it)."""
    line = next((line for line in protocol_lines if line.startswith("Protocol: ")), "")
    return [part for part in line.removeprefix("Protocol: ").rstrip(".").split("; ") if part]


def panels(board: TaskBoard) -> tuple[list[Panel], list[str]]:
    """The board's tables as panels, in the board's order, and the protocol parts every panel shares.

    Only the `MAX_PANELS` largest tables become panels. The shared parts are said once, under the figure's
    title; there are none when there is one panel.

    A panel's title is its dataset's name, config and hash, so two datasets never share one. Then comes
    `Protocol N:` where its dataset has several tables, as in its table's heading. Last come the parts of
    its protocol that some other panel does not share. So two panels never carry the same title.
    """
    tables = [(section, table) for section in board.sections for table in section.tables]
    kept = sorted(sorted(range(len(tables)), key=lambda index: -len(tables[index][1].rows))[:MAX_PANELS])
    tables = [tables[index] for index in kept]
    parts = [_protocol_parts(table.protocol_lines) for _, table in tables]
    shared = set.intersection(*map(set, parts)) if len(tables) > 1 else set()
    drawn = []
    for (section, table), own in zip(tables, parts):
        protocol = "; ".join(part for part in own if part not in shared)
        number = f"Protocol {table.number}" if len(section.tables) > 1 else "Protocol"
        heading = f"{number}: {protocol}" if protocol else (number if len(section.tables) > 1 else "")
        drawn.append(Panel(section.title + (f"\n{heading}" if heading else ""), table.rows))
    common = [part for part in parts[0] if part in shared] if tables else []
    return drawn, common


def chars(width_inches: float, size: float) -> int:
    """How many characters of a `size`-point font surely fit in `width_inches`."""
    return max(12, int(width_inches * 72 / (size * CHAR_WIDTH)))


def wrapped(text: str, width_inches: float, size: float, limit: int = 400) -> str:
    """`text` as literal plot text (`plot_text`), each of its lines wrapped to `width_inches`."""
    return "\n".join(plot_text(line, limit, width=chars(width_inches, size)) for line in text.split("\n"))


def lines(text: str) -> int:
    return text.count("\n") + 1


def height(text_lines: int, size: float = TEXT_SIZE) -> float:
    """Inches that `text_lines` lines of a `size`-point font take."""
    return text_lines * size * LINE / 72


def label(row: Row) -> str:
    """A row's model as the board names it, wrapped. The name (`Model`) includes the config that sets two
    rows of one model apart. A long one breaks before its config, so the model's name stays on one line."""
    text = row.cells["Model"]
    name, bracket, config = text.partition(" (")
    if len(text) <= LABEL_CHARS or not bracket:
        return plot_text(text, LABEL_LIMIT, width=LABEL_CHARS)
    return (plot_text(name, LABEL_LIMIT, width=LABEL_CHARS) + "\n"
            + plot_text("(" + config, max(LABEL_CHARS, LABEL_LIMIT - len(name)), width=LABEL_CHARS))


def score_limits(lows: list[float], highs: list[float]) -> tuple[float, float]:
    """An axis that fits the intervals `lows[i]..highs[i]`, with a margin (not from 0: close scores stay apart)."""
    low, high = min(lows), max(highs)
    span = high - low
    margin = 0.08 * span if span > 0 else max(abs(high) * 0.05, 0.01)  # room for the error bars' caps
    return low - margin, high + margin


def figure_grid(titles: list[str], heights: list[float], column_width: float, columns: int,
                figure_title: str, subtitle: str = ""):
    """A constrained-layout figure of one subfigure per panel, `columns` wide.

    Each grid row is as high as its tallest panel's `heights` (inches of axes) plus its title. Returns
    (figure, subfigures). Each subfigure is titled (wrapped to its width) and has one axes,
    `subfigure.axes[0]`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = [wrapped(title, column_width - 0.3, TEXT_SIZE) for title in titles]
    width = column_width * columns
    heading = wrapped(figure_title, width - 0.4, FIGURE_TITLE_SIZE, 200)
    if subtitle:
        heading += "\n" + wrapped(subtitle, width - 0.4, FIGURE_TITLE_SIZE)
    grid_rows = -(-len(titles) // columns)
    row_heights = [max(heights[index] + height(lines(titles[index])) + 0.25
                       for index in range(row * columns, min(len(titles), (row + 1) * columns)))
                   for row in range(grid_rows)]
    total = sum(row_heights) + height(lines(heading), FIGURE_TITLE_SIZE) + 0.3
    figure = plt.figure(figsize=(width, total), dpi=DPI, layout="constrained")
    figure.get_layout_engine().set(w_pad=PAD, h_pad=PAD)
    figure.suptitle(heading, fontsize=FIGURE_TITLE_SIZE)
    cells = figure.subfigures(grid_rows, columns, height_ratios=row_heights, squeeze=False).flat
    subfigures = []
    for title, cell in zip(titles, cells):
        cell.suptitle(title, fontsize=TEXT_SIZE)
        cell.subplots()
        subfigures.append(cell)
    return figure, subfigures


def place_labels(figure, points: list[tuple], labels: list[list[str]]) -> None:
    """Labels each point beside it.

    `points` holds per axes `(axis, [(x, y, spread), ...])`, a point drawn with a vertical error bar of ±
    its spread. A label goes at the first of a few offsets where it stays inside its axes. There it must
    cover no label placed before it, no point and no error bar. Failing that, it goes at the offset that
    covers least. The figure's layout is settled first. Labels take no part in it, so placing them moves
    nothing.
    """
    figure.draw_without_rendering()
    renderer = figure.canvas.get_renderer()
    for (axis, drawn), texts in zip(points, labels):
        _place(axis, drawn, texts, renderer)


def _place(axis, points: list[tuple[float, float, float]], labels: list[str], renderer) -> None:
    from matplotlib.transforms import Bbox

    inside = axis.get_window_extent(renderer)
    marks = []  # each point's marker and error bar, in pixels
    for x, y, spread in points:
        (left, bottom), (right, top) = axis.transData.transform([(x, y - spread), (x, y + spread)])
        marks.append(Bbox.from_extents(left - 5, bottom - 3, right + 5, top + 3))
    offsets = [(5, 3, "left", "bottom"), (5, -3, "left", "top"), (-5, 3, "right", "bottom"),
               (-5, -3, "right", "top"), (0, 8, "center", "bottom"), (0, -8, "center", "top"),
               (9, 12, "left", "bottom"), (-9, -12, "right", "top"), (9, -12, "left", "top"),
               (-9, 12, "right", "bottom")]
    placed = []
    for (x, y, _), text in zip(points, labels):
        annotation = axis.annotate(text, (x, y), xytext=offsets[0][:2], textcoords="offset points",
                                   fontsize=TEXT_SIZE - 1, annotation_clip=False)
        annotation.set_in_layout(False)
        best = None
        for dx, dy, horizontal, vertical in offsets:
            _move(annotation, dx, dy, horizontal, vertical)
            box = annotation.get_window_extent(renderer)
            outside = box.width * box.height - _overlap(box, inside)
            cost = (3 * sum(_overlap(box, other) for other in placed) + sum(_overlap(box, mark) for mark in marks)
                    + 10 * outside)  # another label is worse than a mark, the axes' edge worst
            if best is None or cost < best[0]:
                best = (cost, dx, dy, horizontal, vertical)
            if cost == 0:
                break
        _move(annotation, *best[1:])
        placed.append(annotation.get_window_extent(renderer))


def _move(annotation, dx: float, dy: float, horizontal: str, vertical: str) -> None:
    annotation.xyann = (dx, dy)
    annotation.set_horizontalalignment(horizontal)
    annotation.set_verticalalignment(vertical)


def _overlap(first, second) -> float:
    """The area (square pixels) two boxes share."""
    width = min(first.x1, second.x1) - max(first.x0, second.x0)
    tall = min(first.y1, second.y1) - max(first.y0, second.y0)
    return max(0.0, width) * max(0.0, tall)


def save(figure, path: Path) -> Path:
    """Writes `figure` as a PNG atomically at `DPI` and closes it. It keeps the constrained layout that
    keeps these figures' texts apart; a tight layout would replace it."""
    return save_figure(figure, path, DPI, tight=False)
