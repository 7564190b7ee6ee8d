"""A command run under a memory limit, so that a memory bomb fails its test instead of the machine.

`run_limited(argv, limit_bytes=...)` starts the command in a memory cgroup of its own, created
below this process's cgroup and removed afterwards: cgroup v1's `memory` controller
(`memory.limit_in_bytes`) where it is mounted, else cgroup v2 (`memory.max`) where this process
may create a child group with the memory controller. The child joins the group between fork and
exec (`preexec_fn`), so nothing it allocates escapes the limit. The kernel kills the command when
it exceeds the limit; the result says so (`oom_killed`) and gives the group's peak usage.

Where neither cgroup hierarchy can be written (an unprivileged container), the limit falls back to
`RLIMIT_DATA` (private writable memory: the heap and anonymous mappings, which is what a bomb
allocates); `mechanism` says which one applied, so a test's failure message tells them apart.
A test asserts on `returncode`/`stderr` as it would for an unlimited run, and asserts `not
result.oom_killed`: a regression that allocates what a file declares then fails that assertion.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import uuid
from pathlib import Path
from typing import Sequence

GIB = 2**30
V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOTS = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


@dataclasses.dataclass
class LimitedResult:
    returncode: int | None  # None: the timeout passed and the command was killed
    stdout: str
    stderr: str
    oom_killed: bool  # the kernel killed it for exceeding the limit
    peak_bytes: int | None  # the group's peak memory (None under the rlimit fallback)
    mechanism: str  # "cgroup-v1", "cgroup-v2" or "rlimit-data"

    def describe(self) -> str:
        return (f"exit {self.returncode}, oom_killed={self.oom_killed}, peak={self.peak_bytes} "
                f"({self.mechanism})\nstderr: {self.stderr[-2000:]}")


def _own_cgroup(controller: str) -> str | None:
    """This process's path in the v1 hierarchy of `controller` ("" for v2's unified line)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller and controller in controllers.split(",")) or (not controller and controllers == ""):
            return path
    return None


class MemoryGroup:
    """A fresh memory cgroup with a limit (`path`), or none where none can be made (`path` None: the
    rlimit fallback); `tests/forked_cli.py` puts a forked child into one the same way."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes = limit_bytes
        self.path: Path | None = None
        self.mechanism = "rlimit-data"
        name = f"nfnzoo-test-{uuid.uuid4().hex[:12]}"
        own = _own_cgroup("memory")
        if own is not None and V1_ROOT.is_dir():
            candidate = V1_ROOT / own.lstrip("/") / name
            if self._make(candidate, "memory.limit_in_bytes", limit_bytes):
                self.mechanism = "cgroup-v1"
                return
        own = _own_cgroup("")
        for root in V2_ROOTS:
            if own is None or not (root / "cgroup.controllers").is_file():
                continue
            parent = root / own.lstrip("/")
            try:
                if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                    (parent / "cgroup.subtree_control").write_text("+memory")
            except OSError:
                continue
            if self._make(parent / name, "memory.max", limit_bytes):
                self.mechanism = "cgroup-v2"
                return

    def _make(self, path: Path, limit_file: str, limit_bytes: int) -> bool:
        try:
            path.mkdir()
        except OSError:
            return False
        try:
            (path / limit_file).write_text(str(limit_bytes))
            if (path / "memory.swappiness").exists():
                (path / "memory.swappiness").write_text("0")  # over the limit means killed, not swapped
        except OSError:
            path.rmdir()
            return False
        self.path = path
        return True

    @property
    def procs(self) -> Path | None:
        """The file a process writes its PID into to join the group (None under the rlimit fallback)."""
        return None if self.path is None else self.path / "cgroup.procs"

    def join(self) -> None:  # in the child, before exec
        if self.path is not None:
            self.procs.write_text(str(os.getpid()))

    def result(self, returncode: int | None, stdout: str, stderr: str) -> "LimitedResult":
        return LimitedResult(returncode, stdout, stderr, self.oom_killed(), self.peak(), self.mechanism)

    def oom_killed(self) -> bool:
        if self.path is None:
            return False
        for name, key in (("memory.oom_control", "oom_kill"), ("memory.events", "oom_kill")):
            file = self.path / name
            if file.exists():
                for line in file.read_text().splitlines():
                    field, _, value = line.partition(" ")
                    if field == key and int(value) > 0:
                        return True
        return False

    def peak(self) -> int | None:
        if self.path is None:
            return None
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            if (self.path / name).exists():
                return int((self.path / name).read_text().split()[0])
        return None

    def remove(self) -> None:
        if self.path is not None:
            try:
                self.path.rmdir()
            except OSError:
                pass  # a process still in it (it was killed: it leaves in a moment); the parent lives on


def run_limited(argv: Sequence[str], *, limit_bytes: int = 3 * GIB, timeout: float = 120,
                env: dict[str, str] | None = None, cwd: str | Path | None = None) -> LimitedResult:
    """Runs `argv` with at most `limit_bytes` of memory (module docstring); never raises on its exit."""
    group = MemoryGroup(limit_bytes)

    def prepare() -> None:
        os.setsid()  # its own process group, so the timeout kills what it started too
        if group.path is not None:
            group.join()
        else:
            resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))

    process = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, cwd=cwd, preexec_fn=prepare)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        stdout, stderr = process.communicate()
        code = None
    result = group.result(code, stdout, stderr)
    group.remove()
    return result
