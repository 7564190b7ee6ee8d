"""`nfnzoo generate` on a full disk: one line naming the folder, staged checkpoints kept, resumable.

A small tmpfs is the output folder (root only: mounting needs it). Before, ENOSPC in a
trial's staging write was retried, then Tune failed writing its own bookkeeping into the same
full folder and the command ended in Ray's `EOFError` traceback. Now the trial reports the
full disk and ends, the fit stops, and the command exits 1 with "<staging>: No space left on
device" and how many checkpoints are staged; after the disk grows, the same command resumes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.planning.plan import plan_runs
from zoo.planning.spec import load_spec
from zoo.storage.staging import Staging

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
ENV.pop("RAY_ADDRESS", None)


@pytest.fixture
def small_disk(tmp_path: Path):
    """mount(size) -> a fresh tmpfs of that size at tmp_path/disk; remount(size) grows it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted: list[Path] = []

    def mount(size: str, remount: bool = False) -> Path:
        options = f"remount,size={size}" if remount else f"size={size}"
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
        if not remount:
            mounted.append(mount_point)
        return mount_point

    yield mount
    for point in mounted:
        subprocess.run(["umount", str(point)], check=False)


def _generate(out: Path, *where: str) -> subprocess.CompletedProcess:
    """`generate` on a local instance of 1 CPU, or where `where` says (`--address ...`)."""
    return subprocess.run([sys.executable, "-m", "zoo.cli", "generate", "cnn-mnist", "--profile", "tiny", "--out",
                           str(out), *(where or ("--num-cpus", "1"))], capture_output=True, text=True, timeout=480,
                          env=ENV)


def test_a_disk_too_small_for_the_spec_is_one_line(small_disk):
    out = small_disk("4k") / "zoo"  # the lock file takes the only page: the spec cannot be saved
    result = _generate(out)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfnzoo generate: error: "), result.stderr
    assert f"{out / 'specs'}" in lines[0] and lines[0].endswith("No space left on device"), lines[0]


@pytest.mark.slow
def test_a_full_disk_during_training_is_one_line_and_a_rerun_resumes(small_disk, ray_cluster):
    out = small_disk("300k") / "zoo"  # room for about half of the 24 checkpoints
    on_the_cluster = ("--address", ray_cluster.address)  # the shared one: no instance to start, twice
    planned = sorted(m for run in plan_runs(load_spec("cnn-mnist", "tiny")) for m in run.model_ids)
    result = _generate(out, *on_the_cluster)
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("nfnzoo generate: error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    staged = Staging(out / "staging").model_ids()
    assert 0 < len(staged) < len(planned)
    assert errors[0] == (f"nfnzoo generate: error: {out / 'staging'}: No space left on device; {len(staged)} of "
                         f"{len(planned)} planned checkpoints are staged and kept (nothing was packed): free some "
                         "space and run the same command again to resume"), errors[0]
    assert not list((out / "staging").glob("*/.*.tmp")) and not (out / "data").exists()

    small_disk("4m", remount=True)
    result = _generate(out, *on_the_cluster)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"({len(staged)} already staged)" in result.stdout, result.stdout
    assert Staging(out / "staging").model_ids() == planned and (out / "manifest.json").is_file()
