"""`audit` covers the whole entry file: its seal, its place, its submission block's claims."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from leaderboards import submit
from leaderboards.audit import audit
from leaderboards.seal import sealed


def _entry(root, write_results):
    accepted = submit(write_results(), root)
    return accepted.path, json.loads(accepted.path.read_text())


@pytest.mark.parametrize("key, value, reason", [
    ("code_url", "https://evil.example/code", "changed since it was accepted"),
    ("rescoring", "re-scored: everything", "changed since it was accepted"),
    ("accepted", "2020-01-01T00:00:00+00:00", "changed since it was accepted"),
    ("source", "other.json", "changed since it was accepted"),
])
def test_a_hand_edited_submission_block_fails_the_audit(root, write_results, key, value, reason):
    path, data = _entry(root, write_results)
    assert audit(root)[0].problems == ()
    data["submission"][key] = value
    path.write_text(json.dumps(data, indent=2))
    assert any(reason in problem for problem in audit(root)[0].problems)


@pytest.mark.parametrize("edit, reason", [
    (lambda s: s.update(rescoring="re-scored: everything"), "does not say why"),
    (lambda s: s.update(verified=True), "a verified entry keeps its predictions"),
    (lambda s: s.update(rescoring="accepted because"), "does not say why"),
    (lambda s: s.update(accepted="last tuesday"), "not an ISO 8601 time"),
    (lambda s: s.update(id="statnn-" + "0" * 32), "is not the file's stem"),
])
def test_a_resealed_but_inconsistent_entry_fails_the_audit(root, write_results, edit, reason):
    """Recomputing the seal after an edit does not help: the structure is checked on its own."""
    path, data = _entry(root, write_results)
    del data["submission"]["seal"]
    edit(data["submission"])
    path.write_text(json.dumps(sealed(data), indent=2))
    problems = audit(root)[0].problems
    assert any(reason in problem for problem in problems), problems
    assert not any("changed since" in problem for problem in problems)


def test_an_entry_without_a_seal_or_filed_elsewhere_is_a_problem(root, write_results):
    path, data = _entry(root, write_results)
    del data["submission"]["seal"]
    path.write_text(json.dumps(data))
    assert any("no seal" in problem for problem in audit(root)[0].problems)
    moved = path.parent.parent / "0123456789ab" / path.name
    moved.parent.mkdir()
    path.rename(moved)
    moved.write_text(json.dumps(sealed(data)))
    assert any("is filed at" in problem for problem in audit(root)[0].problems)


def test_an_unreadable_entry_is_one_problem_line_and_the_cli_exits_1(root, write_results):
    path, _ = _entry(root, write_results)
    path.write_text("[" * 1_000 + "]" * 1_000)
    (report,) = audit(root)
    assert len(report.problems) == 1 and "nested too deeply" in report.problems[0]
    done = subprocess.run([sys.executable, "-m", "zoo.cli", "leaderboard", "audit", "--root", str(root)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 1 and "Traceback" not in done.stderr and "PROBLEM" in done.stdout
