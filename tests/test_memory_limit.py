"""The memory limit the bomb tests run under (`tests/memory_limit.py`) holds, and lets a small command through."""

from __future__ import annotations

import sys

from memory_limit import GIB, run_limited


def test_a_command_over_the_limit_is_killed_and_reported():
    result = run_limited([sys.executable, "-c", "x = bytearray(2 * 2**30); print(len(x))"], limit_bytes=GIB // 2)
    assert result.returncode != 0, result.describe()
    assert "2147483648" not in result.stdout
    if result.mechanism != "rlimit-data":
        assert result.oom_killed, result.describe()
        assert result.peak_bytes <= GIB // 2, result.describe()


def test_a_command_under_the_limit_runs_to_the_end():  # the negative control: the limit is not a blanket failure
    result = run_limited([sys.executable, "-c", "x = bytearray(100 * 2**20); print(len(x))"], limit_bytes=GIB // 2)
    assert result.returncode == 0 and result.stdout.strip() == str(100 * 2**20), result.describe()
    assert not result.oom_killed


def test_a_forked_cli_child_runs_inside_its_memory_group(tmp_path):
    """`ForkedCLI.run_limited` puts the forked child in the group: the group's peak is the child's use
    (a child that never joined would leave it at zero), and the child answers as usual."""
    import os

    from forked_cli import ForkedCLI

    forked = ForkedCLI(tmp_path)
    try:
        result = forked.run_limited(["--help"], cwd=tmp_path, env=dict(os.environ), timeout=60, limit_bytes=GIB)
    finally:
        forked.close()
    assert result.returncode == 0 and "nfnzoo" in result.stdout, result.describe()
    assert not result.oom_killed
    if result.mechanism != "rlimit-data":
        assert result.peak_bytes and result.peak_bytes > 2**20, result.describe()
