"""Escaping free text for each output format the board writes: one helper per format.

Entries carry text their submitters chose. That is a device string, a model config's values, a dataset's
name, or a protocol description built from a task config. Every such value reaches an output only through
the helper of that output's format. So a `|` cannot shift a Markdown table's cells, and a
`[x](javascript:...)` cannot become a link. A `<script>` stays text, and a newline cannot end a heading. A
`$...$` is never parsed as matplotlib mathtext.

`markdown_text` is for inline Markdown: headings, paragraphs, list items, table cells. Line breaks become
spaces, and Markdown's punctuation is backslash-escaped. CommonMark allows that before any ASCII
punctuation. `|` is included, so the same text is safe in a table cell (`markdown_cell`).

`yaml_string` gives a double-quoted YAML scalar, for the Hub card's front matter. It uses JSON's string
syntax, ASCII only, which YAML 1.2 reads as the same string.

`plot_text` is for a label or title drawn by matplotlib. `$` is escaped (no mathtext), and line breaks are
folded. It is cut to `PLOT_TEXT` characters, since a long label would make the figure too large to save.

HTML uses `zoo.validation.text.html_text` in `leaderboards.site` (`site._e`), for text and attribute values
alike.

Every helper starts from `zoo.validation.text`, the program's one sanitiser for text that leaves it.
Control, bidi, zero-width and invisible characters are written as their escapes (`\\x1b`, `\\u202e`) in every
output. The Markdown rules are that module's.
"""

from __future__ import annotations

import json
import textwrap

from zoo.validation.text import MARKDOWN_SPECIAL, markdown_text, one_line, visible

__all__ = ["MARKDOWN_SPECIAL", "PLOT_TEXT", "markdown_cell", "markdown_text", "plot_text", "yaml_string"]

PLOT_TEXT = 80  # characters of one plot label


def markdown_cell(text: object) -> str:
    """`text` as a literal Markdown table cell (an escaped `|` does not end the cell)."""
    return markdown_text(text)


def yaml_string(text: object) -> str:
    """`text` as a double-quoted YAML scalar (JSON string syntax, ASCII-only: valid YAML 1.2), made visible."""
    return json.dumps(visible(text, lines=True), ensure_ascii=True)


def plot_text(text: object, limit: int = PLOT_TEXT, width: int | None = None) -> str:
    """`text` as literal matplotlib text: at most `limit` characters, wrapped at `width` (else one line).
    `$` is escaped after wrapping, so no break falls between a `\\` and its `$`."""
    line = one_line(text)
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    if width is not None:
        line = textwrap.fill(line, width)
    return line.replace("$", r"\$")  # every `$` escaped: no even count of bare ones, so no mathtext
