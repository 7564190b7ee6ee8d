"""The tree passes the house's linter, and every exception to it says why.

`ruff check` (configured in pyproject.toml, pinned in the `dev` extra) runs over the repository
and must find nothing. A `# noqa` marker must name its codes and then give its reason, in
parentheses or as colon-free words: `# noqa: F401 (re-exported)`. Each check has a negative
control: ruff reports a planted unused import, and the marker check flags a marker without a reason.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("zoo", "nfn_models", "benchmarks", "leaderboards", "tests", "examples")
NOQA = re.compile(r"#\s*noqa\b", re.IGNORECASE)
# the codes, then whitespace, then a reason: "(...)", or words without a colon (ruff reads `CODE: text` as a bad code)
REASONED = re.compile(r"#\s*noqa:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*\s+(?:\(.*[^\s()].*\)|[^\s(:][^:]*)")


def _ruff(*arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *arguments], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, timeout=300)


def noqa_problems(source: str, where: str) -> list[str]:
    """`where:line: comment` for each `noqa` comment in `source` that does not say why."""
    problems = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and NOQA.search(token.string):
            comment = token.string[NOQA.search(token.string).start():].rstrip()
            if not REASONED.fullmatch(comment):
                problems.append(f"{where}:{token.start[0]}: {comment}")
    return problems


def test_ruff_is_the_pinned_version():
    pinned = [r for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
              if r.startswith("ruff==")]
    done = _ruff("--version")
    assert done.returncode == 0, f"ruff is not installed ({done.stderr.strip()}): pip install -e '.[dev]'"
    assert pinned and done.stdout.split() == ["ruff", pinned[0].removeprefix("ruff==")], (pinned, done.stdout)


def test_ruff_finds_nothing_in_the_tree():
    done = _ruff("check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, f"ruff check (fix, or mark `# noqa: CODE (why)`):\n{done.stdout}{done.stderr}"


def test_negative_control_ruff_reports_a_planted_unused_import():
    done = _ruff("check", "--no-cache", "--output-format", "concise", "--stdin-filename", "zoo/planted.py", "-",
                 stdin="import os\n")
    assert done.returncode == 1 and "F401" in done.stdout, (done.stdout, done.stderr)


def test_every_noqa_says_why():
    problems = [problem for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
                for problem in noqa_problems(path.read_text(), str(path.relative_to(ROOT)))]
    assert not problems, "a noqa without its reason (write `# noqa: CODE (why)`):\n" + "\n".join(problems)


def test_negative_control_a_noqa_without_a_reason_is_flagged():
    reasoned = ("import os  # noqa: F401 (re-exported)\n"
                "import re  # noqa: F401, E402 (after the path is set: the module's name (kept))\n"
                "x = 1  # noqa: E731 a lambda the caller names\n"
                "y = '# noqa'  # a string is no marker\n")
    assert noqa_problems(reasoned, "sample.py") == []
    unreasoned = ("import os  # noqa: F401\n"
                  "import re  # noqa\n"
                  "import io  # noqa: F401 ()\n"
                  "try:\n    pass\nexcept Exception:  # noqa: BLE001: ruff reads this as a bad code\n    pass\n")
    assert [p.split(":")[1] for p in noqa_problems(unreasoned, "sample.py")] == ["1", "2", "3", "6"]
