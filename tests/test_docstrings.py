"""Docstrings say what and why in short sentences, and code text holds no measurements or history.

The house's anchors (nanoGPT, timm, nfn) write 10-14 words a sentence. Here every docstring in the
four packages is split into sentences (at `.`, `;`, `?` or `!` before a capital, a backtick or a
bracket) and the tree's mean must stay at or under `MEAN_WORDS`, no sentence over `MAX_WORDS`.
Measurements (timings, speed-ups, dates measured) live on the docs pages, where they can be dated
and rerun; issue numbers and review rounds live in the history. Each check has a negative control.
"""

from __future__ import annotations

import ast
import io
import re
import statistics
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("zoo", "nfn_models", "benchmarks", "leaderboards")
MEAN_WORDS = 16
MAX_WORDS = 40
SENTENCE_END = re.compile(r"(?<=[.;!?])\s+(?=[A-Z`(\[])")
# a figure the code cannot keep true: a speed-up, a timing on a named machine, a measuring date, a history marker
HISTORY = re.compile(
    r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x (?:faster|slower|less|more|fewer)\b"
    r"|\b\d+-core\b"
    r"|\bmeasured 20\d\d-\d\d-\d\d\b"
    r"|\b[Ii]ssue \d+\b"
    r"|\breview rounds?\b",
)


def sentences(text: str) -> list[str]:
    """The sentences of one docstring, whitespace folded."""
    return [s for s in SENTENCE_END.split(" ".join(text.split())) if s.strip()]


def docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of the module's, classes' and functions' docstrings."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node)
            if text:
                found.append((getattr(node, "lineno", 1), text))
    return found


def comments(source: str) -> list[tuple[int, str]]:
    return [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT]


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text()


def sentence_lengths(modules) -> tuple[list[int], list[str]]:
    """Every docstring sentence's word count, and `where: words: start` for each over MAX_WORDS."""
    lengths, long = [], []
    for where, source in modules:
        for line, text in docstrings(source):
            for sentence in sentences(text):
                words = len(sentence.split())
                lengths.append(words)
                if words > MAX_WORDS:
                    long.append(f"{where}:{line}: {words} words: {sentence[:70]}...")
    return lengths, long


def history_problems(modules) -> list[str]:
    problems = []
    for where, source in modules:
        for line, text in docstrings(source) + comments(source):
            for match in HISTORY.finditer(" ".join(text.split())):
                problems.append(f"{where}:{line}: {match.group(0)!r}")
    return problems


def test_docstring_sentences_are_short():
    lengths, long = sentence_lengths(_modules())
    mean = statistics.mean(lengths)
    assert mean <= MEAN_WORDS and not long, (
        f"docstring sentences average {mean:.1f} words (at most {MEAN_WORDS}); "
        f"{len(long)} over {MAX_WORDS}:\n" + "\n".join(long[:40]))


def test_code_text_holds_no_measurement_or_history():
    problems = history_problems(_modules())
    assert not problems, "move measurements to docs/, history to the commit log:\n" + "\n".join(problems)


def test_negative_control_a_long_sentence_and_a_measurement_are_caught():
    planted = ('"""One short sentence. Words ' + " ".join(["word"] * MAX_WORDS) + '."""\n'
               "x = 1  # 3x faster than before, measured on a 2-core box in issue 12\n")
    lengths, long = sentence_lengths([("zoo/planted.py", planted)])
    assert lengths == [3, MAX_WORDS + 1] and len(long) == 1, (lengths, long)
    assert len(history_problems([("zoo/planted.py", planted)])) == 3
    assert sentences("What it is. Why: `x`; (a) then e.g. this.") == ["What it is.", "Why: `x`;", "(a) then e.g. this."]
