"""docs/security.md's threat model names, for each boundary, the tests that hold its guarantee: each named
test exists, and each hostile-input test file of the suite is named in a row (so a new one finds its
boundary, and a renamed one its page)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "security.md"
NAMED = re.compile(r"`(tests/[^`:]+\.py)(?:::([A-Za-z_][A-Za-z0-9_]*))?`")


def table_rows(text: str) -> list[str]:
    """The rows of the page's boundary table (after its header and rule)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| boundary |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def missing_tests(rows: list[str]) -> list[str]:
    """The named test files or functions that do not exist."""
    missing = []
    for row in rows:
        for path, name in NAMED.findall(row):
            file = ROOT / path
            if not file.is_file():
                missing.append(path)
            elif name and not re.search(rf"^def {name}\(", file.read_text(), re.MULTILINE):
                missing.append(f"{path}::{name}")
    return missing


def test_every_row_names_tests_that_exist():
    rows = table_rows(PAGE.read_text())
    assert len(rows) >= 10
    assert all(NAMED.search(row.split("|")[-2]) for row in rows), "a row without a test"
    assert missing_tests(rows) == []


def test_the_check_finds_a_test_that_does_not_exist():  # the negative control
    row = "| x | y | z | `tests/security/test_threat_model.py::test_no_such_test`, `tests/no_such_file.py` |"
    assert missing_tests([row]) == ["tests/security/test_threat_model.py::test_no_such_test", "tests/no_such_file.py"]


def test_every_hostile_input_test_file_is_under_a_boundary():
    named = {path for row in table_rows(PAGE.read_text()) for path, _ in NAMED.findall(row)}
    hostile = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
               if "hostile" in path.name or path.parent.name == "security"}
    hostile.discard("tests/security/test_threat_model.py")
    assert sorted(hostile - named) == []
