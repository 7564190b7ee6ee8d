"""The pull-request check of the leaderboard (`deploy/ci/audit-submission.sh`, which
`.github/workflows/leaderboard.yml` runs): a PR-shaped folder with a good verified entry passes; a
tampered entry, or a PR changing code besides data, is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness import run_benchmark
from leaderboards import submit
from benchmarks.run_options import RunOptions

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "ci" / "audit-submission.sh"


@pytest.fixture(scope="module")
def pull_request(tiny_zoo, tmp_path_factory) -> Path:
    """A checkout whose leaderboards/ holds one verified entry submitted from a real run."""
    folder = tmp_path_factory.mktemp("pr")
    results = folder / "runs" / "mlp.json"
    run_benchmark("generalization", "mlp", tiny_zoo, None,
                  RunOptions([0, 1, 2], model_overrides={"hidden_sizes": [4]}, task_overrides={"epochs": 1},
                             progress=False),
                  results)
    submit(results, folder / "leaderboards", tiny_zoo)
    return folder


def _check(folder: Path, changed: list[str] | None = None) -> subprocess.CompletedProcess:
    args = [str(SCRIPT), str(folder / "leaderboards")]
    if changed is not None:
        (folder / "changed.txt").write_text("".join(f"{path}\n" for path in changed))
        args.append(str(folder / "changed.txt"))
    env = {**os.environ, "NFNZOO": f"{sys.executable} -m zoo.cli", "PYTHONPATH": str(ROOT),
           "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)


def _changed(folder: Path) -> list[str]:
    files = (folder / "leaderboards").rglob("*")  # what git would commit: the lock file is ignored
    return sorted(p.relative_to(folder).as_posix() for p in files if p.is_file() and p.name != ".nfnzoo.lock")


def test_a_good_submission_passes(pull_request):
    done = _check(pull_request, _changed(pull_request))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 entries: 1 verified, 0 with problems" in done.stdout


def test_a_tampered_entry_is_refused(pull_request, tmp_path):
    folder = Path(shutil.copytree(pull_request, tmp_path / "pr"))
    (entry,) = (folder / "leaderboards" / "entries").rglob("*.json")
    data = json.loads(entry.read_text())
    data["results"]["summary"]["kendall_tau"]["mean"] = 0.99  # a better score than the run's
    entry.write_text(json.dumps(data))
    done = _check(folder, _changed(folder))
    assert done.returncode == 1 and "PROBLEM" in done.stdout and "1 with problems" in done.stdout, done.stdout
    assert "the entry file changed since it was accepted" in done.stdout


def test_a_pull_request_changing_code_is_refused_before_anything_runs(pull_request):
    done = _check(pull_request, [*_changed(pull_request), "benchmarks/tasks/generalization.py"])
    assert done.returncode == 1 and done.stdout == ""
    assert "also changes: benchmarks/tasks/generalization.py" in done.stderr
