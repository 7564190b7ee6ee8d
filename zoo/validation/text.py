"""Text that leaves the program: the one sanitiser for every output that shows a file's content.

A file can hold any character, and some of them act on whatever shows them. ESC starts a terminal escape
sequence, which can move the cursor, retitle the window or rewrite an earlier line. U+202E reverses the
text after it. Zero-width and format characters hide text or make two strings look alike. A few letters
and fillers (U+3164, U+2800, the variation selectors, U+034F) show nothing at all.

Such characters are `unsafe_character`s, and two rules hold for them.

Text stored as data (a manifest, a spec, a results file, a board entry) may not hold one.
`stored_text_problem` says why. `zoo.validation.inputs.text_problem`, `value_problem` and the schema
apply it to every string they check. `nfnzoo verify` reports a manifest that holds one.

Text that is shown is made visible. `visible` writes each unsafe character as its Python escape
(`\\x1b`, `\\u202e`, `\\U000e0100`). So a message echoing a hostile file shows what is there and does
nothing. The CLI's one error line (`zoo.cli.main`), `nfnzoo info`, the dataset card and every view of
the leaderboard go through it.

On top of `visible` there is one helper per markup the program writes. `leaderboards.escape` uses them
for the board.

`markdown_text` is for inline Markdown: a table cell, a list item, a heading. It gives one line, with
every Markdown and HTML metacharacter backslash-escaped. CommonMark allows that before any ASCII
punctuation.

`markdown_code` is for the inside of a Markdown code span, which is literal. Only a backtick could end
it.

`markdown_block` is for several lines of prose, such as a spec's description in the dataset card. Line
breaks are kept and `<` and `&` escaped. So no tag, comment or entity reaches the Hub's renderer.

`html_text` is for an HTML text node or attribute value.
"""

from __future__ import annotations

import html
import re
import unicodedata

# characters that print nothing or act on the display, beyond the categories below (Unicode's
# Default_Ignorable_Code_Point letters and marks, and look-alike blanks)
INVISIBLE = frozenset([0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0,
                       *range(0x180B, 0x1810), *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])
# control (ESC, NUL, DEL, C1), format (bidi overrides and isolates, zero-width joiners, BOM),
# surrogates, private use, line and paragraph separators
UNSAFE_CATEGORIES = frozenset(["Cc", "Cf", "Cs", "Co", "Zl", "Zp"])
LINE_BREAKS = frozenset("\n\t")  # allowed in stored multi-line text and kept by `visible(..., lines=True)`
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|$~&])")  # what can make markup: code, emphasis, links, HTML, cells, math


def unsafe_character(character: str) -> bool:
    """Whether `character` acts on a display or shows nothing (see the module docstring)."""
    return ord(character) in INVISIBLE or unicodedata.category(character) in UNSAFE_CATEGORIES


def escaped(character: str) -> str:
    """`character` as its Python escape: `\\x1b`, `\\u202e`, `\\U000e0100`."""
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: object, *, lines: bool = False) -> str:
    """`text` with every unsafe character written as its escape (newline and tab too, unless `lines`)."""
    text = str(text)
    if text.isascii() and text.isprintable():  # the common case, in one pass of C
        return text
    return "".join(escaped(c) if (unsafe_character(c) and not (lines and c in LINE_BREAKS)) else c for c in text)


def stored_text_problem(text: str, max_length: int) -> str | None:
    """Why `text` may not be stored as data, or None.

    It may not when it is too long, or holds an unsafe character other than newline and tab.
    """
    if len(text) > max_length:
        return f"{len(text):,} characters; at most {max_length:,}"
    if text.isascii() and (text.isprintable() or all(c.isprintable() or c in LINE_BREAKS for c in text)):
        return None
    for index, character in enumerate(text):
        if character not in LINE_BREAKS and unsafe_character(character):
            return (f"holds the invisible or control character U+{ord(character):04X} at position {index} "
                    "(control, bidi, zero-width, format and blank characters are not allowed)")
    return None


def one_line(text: object) -> str:
    """`text` made visible, its runs of spaces, tabs and line breaks folded into one space."""
    return visible(" ".join(str(text).split()))


def markdown_text(text: object) -> str:
    """`text` as literal inline Markdown: one visible line, every Markdown metacharacter escaped."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", one_line(text))


def markdown_code(text: object) -> str:
    """`text` as the inside of a Markdown code span: one visible line, a backtick shown as `\\x60`."""
    return one_line(text).replace("`", "\\x60")


def markdown_block(text: object) -> str:
    """Prose of several lines for a Markdown page: line breaks kept, `&` and `<` escaped.

    Those two are all that can start an HTML tag, comment or entity. A lone `>` cannot, so `2 -> 32`
    stays as written.
    """
    return visible(text, lines=True).replace("&", "&amp;").replace("<", "&lt;")


def html_text(text: object) -> str:
    """`text` for an HTML text node or a quoted attribute value."""
    return html.escape(visible(text), quote=True)
