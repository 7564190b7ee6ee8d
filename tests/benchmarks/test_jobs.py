"""A track's resumable jobs: records kept, matching fingerprints reused, failures keep the rest."""

from __future__ import annotations

import io
import json
import math
import sys

import pytest

from benchmarks.jobs import Job, JobsFailed, fingerprint, run_jobs


def _jobs(b_argument=-1.0, a_print="f-a"):
    return [Job("bench/a/seed0", dict, ([("v", 1)],), a_print),
            Job("bench/b/seed0", math.sqrt, (b_argument,), "f-b"),  # sqrt(-1) raises ValueError
            Job("bench/c/seed0", dict, ([("v", 3)],), "f-c")]


@pytest.mark.parametrize("on_ray", [False, True])  # in this process, and as Ray tasks on the shared test cluster
def test_a_failure_keeps_the_finished_jobs_and_a_rerun_runs_only_the_rest(tmp_path, on_ray, request):
    # (a local instance per run_jobs call is covered by tests/benchmarks/test_bench_commands.py and
    # test_bench_resume.py; here the cluster saves two Ray starts)
    where = {"address": request.getfixturevalue("ray_cluster").address} if on_ray else {}
    messages = []
    with pytest.raises(JobsFailed, match="math domain error") as failed:
        run_jobs(_jobs(), tmp_path, 1, messages.append, **where)
    assert [key for key, _ in failed.value.errors] == ["bench/b/seed0"]
    assert isinstance(failed.value.errors[0][1], ValueError)  # its own type, not Ray's wrapper
    assert set(failed.value.outcomes) == {"bench/a/seed0", "bench/c/seed0"}  # every other job still finishes
    assert (tmp_path / "bench/a/seed0.json").exists() and (tmp_path / "bench/c/seed0.json").exists()
    assert "bench/b/seed0 failed: ValueError: math domain error" in messages
    fixed = [Job(j.key, dict, ([("v", 2)],), j.fingerprint) if j.key.endswith("b/seed0") else j for j in _jobs()]
    messages.clear()
    outcomes = run_jobs(fixed, tmp_path, 1, messages.append, **where)
    assert outcomes == {"bench/a/seed0": {"v": 1}, "bench/b/seed0": {"v": 2}, "bench/c/seed0": {"v": 3}}
    assert messages[0].startswith("2 of 3 job(s) already done")
    record = json.loads((tmp_path / "bench/b/seed0.json").read_text())
    assert record["fingerprint"] == "f-b" and record["outcome"] == {"v": 2} and record["seconds"] >= 0


def test_a_changed_fingerprint_or_a_damaged_record_runs_the_job_again(tmp_path):
    jobs = [j for j in _jobs(b_argument=4.0) if not j.key.endswith("b/seed0")]
    run_jobs(jobs, tmp_path)
    changed = [Job(jobs[0].key, dict, ([("v", 10)],), "f-a-2"), jobs[1]]
    (tmp_path / "bench/c/seed0.json").write_text("{ not json")
    messages = []
    outcomes = run_jobs(changed, tmp_path, 1, messages.append)
    assert outcomes == {"bench/a/seed0": {"v": 10}, "bench/c/seed0": {"v": 3}}
    assert sum(m.startswith("[") for m in messages) == 2  # both ran again
    assert run_jobs(changed, tmp_path) == outcomes  # and now both are kept


def test_keys_and_workers_are_checked():
    for key in ("../escape", "/abs", "a//b", "a/../b", ""):
        with pytest.raises(ValueError, match="job key"):
            Job(key, dict, (), "f")
    with pytest.raises(ValueError, match="distinct"):
        run_jobs([Job("a", dict, (), "f"), Job("a", dict, (), "g")], "unused")
    with pytest.raises(ValueError, match="at least 1"):
        run_jobs([], "unused", workers=0)


def test_the_fingerprint_follows_every_setting():
    base = fingerprint({"lr": 0.1}, (1, 2), 42)
    assert base == fingerprint({"lr": 0.1}, [1, 2], 42)  # tuples and lists are the same data
    assert base != fingerprint({"lr": 0.2}, (1, 2), 42) and base != fingerprint({"lr": 0.1}, (1, 2), 40)


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal, so that `run_jobs`' progress bar draws on it."""

    def isatty(self) -> bool:
        return True


def test_a_progress_line_is_printed_above_the_bar_not_into_it(monkeypatch):
    """An in-process seed's epoch lines (`stderr_printer`) clear the terminal's bar, print, and
    redraw it; a plain print (the negative control) lands on the bar's line."""
    from benchmarks.jobs import _progress_bar, stderr_printer

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    bar = _progress_bar(3, 1, True)
    try:
        bar.refresh()
        drawn = terminal.getvalue()
        assert "1/3" in drawn and not drawn.endswith("\n")  # the bar is on the current line
        print("raw: epoch 1/5", file=sys.stderr, flush=True)
        after_raw = terminal.getvalue()[len(drawn):]
        assert after_raw.startswith("raw: epoch 1/5")  # the control: it runs on from the bar's text
        stderr_printer("suite s: np")("epoch 2/5")
        written = terminal.getvalue()[len(drawn) + len(after_raw):]
        before, line, after = written.partition("suite s: np: epoch 2/5\n")
        assert line and before.endswith("\r") and "1/3" not in before  # the bar's line was cleared first
        assert "1/3" in after  # and the bar is drawn again below the line
    finally:
        bar.close()
