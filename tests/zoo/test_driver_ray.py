"""Integration: a tiny zoo generated on the shared Ray test cluster, the driver killed, and resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from zoo.planning.plan import plan_runs
from zoo.planning.spec import load_spec
from zoo.planning.spec_files import SPECS_DIR
from zoo.storage.staging import Staging

pytestmark = pytest.mark.slow


def _spec_file(tmp_path: Path) -> Path:
    raw = yaml.safe_load((SPECS_DIR / "cnn-mnist.yaml").read_text())
    raw["name"] = "cnn-mnist-ray"
    raw["profiles"]["tiny"]["search_space"]["sampled"]["count"] = 8
    raw["profiles"]["tiny"]["training"] = {"epochs": 2, "batch_size": 64, "checkpoint_epochs": [1, 2]}
    path = tmp_path / "cnn-mnist-ray.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _generate(spec: Path, out: Path, *where: str, **popen) -> subprocess.Popen:
    """`generate` on a local instance of 2 CPUs, or where `where` says (`--address ...`)."""
    command = [sys.executable, "-m", "zoo.cli", "generate", str(spec), "--profile", "tiny", "--out", str(out),
               "--runs-per-trial", "2", *(where or ("--num-cpus", "2"))]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def test_interrupted_generation_resumes_without_duplicates(tmp_path, ray_cluster):
    """The driver killed mid-job and run again, on the shared cluster (a local instance's driver killed:
    tests/zoo/test_generate_interrupt.py): the staging folder is what carries over."""
    spec_path = _spec_file(tmp_path)
    out = tmp_path / "zoo"
    spec = load_spec(spec_path, "tiny")
    planned = [m for run in plan_runs(spec) for m in run.model_ids]
    staging = Staging(out / "staging")

    on_the_cluster = ("--address", ray_cluster.address)
    first = _generate(spec_path, out, *on_the_cluster, start_new_session=True)
    deadline = time.monotonic() + 240
    while not staging.model_ids() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # the driver (a crash, not a polite stop)
    first.wait(timeout=60)
    # Ray reaps the dead driver's workers within seconds; a trial may finish its run first.
    settled, count = time.monotonic(), len(staging.model_ids())
    while time.monotonic() - settled < 5:
        time.sleep(0.2)
        if len(staging.model_ids()) != count:
            settled, count = time.monotonic(), len(staging.model_ids())
    survivors = {m: staging.path(m).stat() for m in staging.model_ids()}
    assert 0 < len(survivors) < len(planned), f"interruption did not land mid-job: {len(survivors)} of {len(planned)}"

    second = _generate(spec_path, out, *on_the_cluster)
    output, _ = second.communicate(timeout=300)
    assert second.returncode == 0, output
    assert f"({len(survivors):,} already staged)" in output, output

    assert staging.model_ids() == sorted(planned)
    for model_id, before in survivors.items():  # finished checkpoints were skipped, not rewritten
        after = staging.path(model_id).stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not list((out / "staging").glob("*/*.tmp")), "temporary files left behind"

    ids = pq.read_table(sorted((out / "data" / spec.name).glob("*.parquet")),
                        columns=["model_id"])["model_id"].to_pylist()
    assert sorted(ids) == sorted(planned)  # every checkpoint once: no duplicates, none missing

    third = _generate(spec_path, out, *on_the_cluster)
    output, _ = third.communicate(timeout=120)
    assert third.returncode == 0 and f"staged 0 new checkpoints ({len(planned):,} already staged)" in output, output


def test_a_checkpoint_that_cannot_be_staged_is_reported_and_loses_nothing(tmp_path, ray_cluster):
    spec_path = _spec_file(tmp_path)
    out = tmp_path / "zoo"
    spec = load_spec(spec_path, "tiny")
    planned = [m for run in plan_runs(spec) for m in run.model_ids]
    staging = Staging(out / "staging")
    # A real, persistent I/O failure: a file where one checkpoint's staging sub-folder goes.
    blocked = plan_runs(spec)[5].model_ids[0]
    blocker = staging.path(blocked).parent
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder")
    doomed = [m for m in planned if staging.path(m).parent == blocker]

    on_the_cluster = ("--address", ray_cluster.address)  # the shared one: no instance to start
    first = _generate(spec_path, out, *on_the_cluster)
    output, _ = first.communicate(timeout=300)
    assert first.returncode == 1, output
    assert f"missing after training and retries ({len(doomed)} failure(s), below)" in output, output
    assert all(f"{blocker} is a file, not a folder" in output and f"checkpoint {m} not staged" in output
               for m in doomed), output
    staged = set(staging.model_ids())
    assert staged and staged.isdisjoint(doomed)
    assert not (out / "data").exists(), "an incomplete job must not be packed as if it were whole"

    blocker.unlink()
    second = _generate(spec_path, out, *on_the_cluster)
    output, _ = second.communicate(timeout=300)
    assert second.returncode == 0, output
    assert f"({len(staged):,} already staged)" in output, output
    assert staging.model_ids() == sorted(planned)
