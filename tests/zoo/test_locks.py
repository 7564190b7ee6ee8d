"""One `generate` or `pack` per output folder, with real concurrent processes.

Two `generate` runs on one `--out` used to both train everything, and concurrent `pack` runs
deleted each other's building folders (a `FileExistsError` traceback). Each now takes the
folder's lock (`zoo.storage.lock`: an flock on <folder>/.nfnzoo.lock) before any work; a second one
fails at once with one line naming the holder's PID and command, and a lock left by a process
killed with SIGKILL is free again (the kernel drops an flock with its holder).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zoo.storage.folder import MANIFEST
from zoo.storage.lock import LOCK_FILE

HOLD = """
import sys, time
from zoo.storage.lock import FolderLock
lock = FolderLock(sys.argv[1], sys.argv[2]).acquire()
print("held", flush=True)
time.sleep(120)
"""
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}


def _hold(folder: Path, command: str) -> subprocess.Popen:
    """A process holding the folder's lock as `command` would, until killed."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), command], stdout=subprocess.PIPE, text=True,
                              env=ENV)
    assert holder.stdout.readline().strip() == "held"
    return holder


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV)


@pytest.fixture
def holder_of():
    started: list[subprocess.Popen] = []

    def start(folder: Path, command: str) -> subprocess.Popen:
        started.append(_hold(folder, command))
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _assert_in_use(result: subprocess.CompletedProcess, command: str, folder: Path, holder: subprocess.Popen,
                   held_as: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert re.fullmatch(rf"nfnzoo {command}: error: {re.escape(str(folder))} is in use by PID {holder.pid} "
                        rf"\({held_as} since \S+\); wait for it to finish, or stop it first", lines[0]), lines[0]


def test_pack_while_a_generate_holds_the_folder_fails_at_once(tiny_zoo, tiny_zoo_copy, holder_of):
    holder = holder_of(tiny_zoo_copy, "nfnzoo generate")
    start = time.monotonic()
    result = _cli("pack", str(tiny_zoo_copy))
    _assert_in_use(result, "pack", tiny_zoo_copy, holder, "nfnzoo generate")
    assert time.monotonic() - start < 60
    assert (tiny_zoo_copy / MANIFEST).read_bytes() == (tiny_zoo / MANIFEST).read_bytes()


def test_generate_while_a_pack_holds_the_folder_fails_before_any_work(tmp_path, holder_of):
    out = tmp_path / "zoo"
    holder = holder_of(out, "nfnzoo pack")
    result = _cli("generate", "cnn-mnist", "--profile", "tiny", "--out", str(out), "--num-cpus", "1")
    _assert_in_use(result, "generate", out, holder, "nfnzoo pack")
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # no spec saved, nothing staged, no Ray


def test_a_lock_left_by_a_killed_process_is_taken_over(tiny_zoo_copy, holder_of):
    holder = holder_of(tiny_zoo_copy, "nfnzoo generate")
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert (tiny_zoo_copy / LOCK_FILE).exists()  # the file stays; its flock went with its holder
    result = _cli("pack", str(tiny_zoo_copy))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("packed cnn-mnist:"), result.stdout


def test_concurrent_packs_of_one_folder_never_interleave(tiny_zoo, tiny_zoo_copy):
    """Three real `nfnzoo pack` processes at once: each packs alone or is refused in one line."""
    processes = [subprocess.Popen([sys.executable, "-m", "zoo.cli", "pack", str(tiny_zoo_copy)], env=ENV,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outcomes = [(p.wait(timeout=300), *p.communicate()) for p in processes]
    for code, out, err in outcomes:
        if code != 0:
            assert code == 1 and len(err.strip().splitlines()) == 1, err
            assert f"{tiny_zoo_copy} is in use by PID " in err and "(nfnzoo pack since" in err, err
        else:
            assert out.startswith("packed cnn-mnist:"), out
    assert any(code == 0 for code, _, _ in outcomes)
    print(f"concurrent packs: {sum(code == 0 for code, _, _ in outcomes)} packed, "
          f"{sum(code == 1 for code, _, _ in outcomes)} refused")
    assert (tiny_zoo_copy / MANIFEST).read_bytes() == (tiny_zoo / MANIFEST).read_bytes()
    data = tiny_zoo_copy / "data"
    assert sorted(p.relative_to(data).as_posix() for p in data.rglob("*")) == \
        sorted(p.relative_to(tiny_zoo / "data").as_posix() for p in (tiny_zoo / "data").rglob("*"))
