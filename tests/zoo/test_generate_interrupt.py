"""Integration: `nfnzoo generate` ends cleanly however it is stopped, with a real local Ray.

Interrupted (SIGINT early, while Ray starts, and mid-training) it exits 130, says how many
checkpoints are staged and how to resume, packs nothing, and leaves no process of its Ray
instance behind; killed (SIGKILL of the driver) its watchdog ends the instance. (An output
folder named `zoo` in the working directory: tests/zoo/test_portable_mode.py.) Each
generation runs as a subprocess of the console script; its processes are found by a tag in
their environment, which every Ray process inherits from the driver.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from zoo.planning.plan import plan_runs
from zoo.distributed.ray_cleanup import instance_processes
from zoo.planning.spec import load_spec
from zoo.planning.spec_files import SPECS_DIR
from zoo.storage.staging import Staging

pytestmark = pytest.mark.slow

TAG = "NFNZOO_TEST_GENERATION"
NFNZOO = Path(sys.executable).parent / "nfnzoo"  # the console script: no working directory on its sys.path


def _spec_file(folder: Path, runs: int, epochs: int = 1) -> Path:
    raw = yaml.safe_load((SPECS_DIR / "cnn-mnist.yaml").read_text())
    raw["name"] = "cnn-mnist-stop"
    raw["profiles"]["tiny"]["search_space"]["sampled"]["count"] = runs
    raw["profiles"]["tiny"]["training"] = {"epochs": epochs, "batch_size": 64,
                                           "checkpoint_epochs": list(range(1, epochs + 1))}
    path = folder / "cnn-mnist-stop.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _start(spec: Path, out: str | Path, tag: str, *extra: str, cwd: Path | None = None) -> subprocess.Popen:
    command = [str(NFNZOO), "generate", str(spec), "--profile", "tiny", "--out", str(out), "--num-cpus", "2", *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled", "PYTHONFAULTHANDLER": "1", TAG: tag}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _tagged(tag: str) -> list[int]:
    """The generation's processes: the driver, its watchdog, and every Ray process it started."""
    return instance_processes(tag, exclude=(os.getpid(),), variable=TAG)


def _wait_for(condition, what: str, process: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"generation ended before {what}: {process.communicate()[0][-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _ray_started(tag: str) -> bool:
    for pid in _tagged(tag):
        try:
            if b"raylet" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            pass
    return False


def _assert_nothing_left(tag: str, within_s: float = 15.0) -> None:
    deadline = time.monotonic() + within_s
    while _tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in _tagged(tag)}
    assert not left, f"processes of the generation's Ray instance left behind: {left}"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds processes through /proc (Linux)")
@pytest.mark.parametrize("when", ["while Ray starts", "mid-training"])
def test_sigint_exits_130_packs_nothing_and_leaves_no_ray_process(tmp_path, when):
    spec_path = _spec_file(tmp_path, runs=8)
    spec = load_spec(spec_path, "tiny")
    planned = sum(len(run.model_ids) for run in plan_runs(spec))
    out, tag = tmp_path / "out", uuid.uuid4().hex
    staging = Staging(out / "staging")
    process = _start(spec_path, out, tag, "--runs-per-trial", "2")
    if when == "while Ray starts":  # the window that crashed (exit 139) or orphaned Ray's agents
        _wait_for(lambda: _ray_started(tag), "Ray's start", process)
    else:
        _wait_for(staging.model_ids, "a staged checkpoint", process)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)

    assert process.returncode == 130, output[-3000:]
    assert "Segmentation fault" not in output and "Fatal Python error" not in output, output[-3000:]
    if when == "mid-training":
        staged = len(staging.model_ids())
        assert 0 < staged < planned, f"the interrupt did not land mid-job: {staged} of {planned}"
        assert (f"interrupted (SIGINT); {staged:,} of {planned:,} planned checkpoints are staged" in output
                and "nothing was packed" in output and "Run the same command again to resume" in output), output
    else:
        assert "interrupted" in output and "resume" in output, output
    assert "staged 0 new checkpoints" not in output and "packed " not in output, output
    assert not (out / "data").exists(), "an interrupted generation must not pack"
    _assert_nothing_left(tag)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds processes through /proc (Linux)")
def test_sigkill_of_the_driver_leaves_no_ray_process(tmp_path):
    out, tag = tmp_path / "out", uuid.uuid4().hex
    process = _start(_spec_file(tmp_path, runs=8), out, tag, "--runs-per-trial", "2")
    _wait_for(lambda: Staging(out / "staging").model_ids(), "a staged checkpoint", process)
    process.kill()  # the driver alone: Ray's processes and the watchdog live in other process groups
    process.communicate(timeout=60)
    _assert_nothing_left(tag, within_s=20.0)

