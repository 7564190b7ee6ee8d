"""Leave no process behind: find and end every process of a Ray instance this run started.

Ray's own shutdown ends the instance on a normal exit.
It does not when the driver dies (SIGKILL, an OOM kill) or is interrupted while Ray starts.
The dashboard agent and the runtime-env agent then live on as orphans, and they ignore SIGTERM.

So the driver marks its instance.
Before `ray.init` it sets ``NFNZOO_RAY_INSTANCE=<token>`` in its environment.
Every Ray process it starts (GCS, raylet, agents, workers) inherits it.
The driver also starts a watchdog, in its own session.
The watchdog is this file, run as a script with ``python -I``.
Isolated mode means no stray ``zoo`` folder in the working directory can be imported instead of it.
The watchdog reads a pipe from the driver.
At end of file, when the driver closed it or died, the watchdog ends every marked process.
A marked process holds the marker in ``/proc/<pid>/environ``; it gets SIGTERM, then SIGKILL.

The marker alone is not enough.
Ray's agents rename themselves (setproctitle), which overwrites the memory `/proc/<pid>/environ` shows.
So the marker can vanish from it.
(Under load, `ray::DashboardAgent` was seen to keep the test's variable and lose ours.)
So while the driver lives, the watchdog also records its descendants twice a second (pid and start time).
It ends those too: the agents are descendants from the moment the raylet starts them.
What the driver was already running when the watchdog started is spared, with everything below it.
That may be another Ray cluster it had started, or a server; it is not this instance's.

The module uses the standard library only, and runs on Linux only (``/proc``).
Elsewhere the scan finds nothing and cleanup is left to Ray.
Nothing here imports Ray or the rest of `zoo`.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

MARKER_VARIABLE = "NFNZOO_RAY_INSTANCE"
PROC = Path("/proc")


def new_marker() -> str:
    """A token naming one Ray instance (unique per generation)."""
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def instance_processes(marker: str, exclude: tuple[int, ...] = (), variable: str = MARKER_VARIABLE) -> list[int]:
    """Pids of the live processes whose environment holds ``NFNZOO_RAY_INSTANCE=<marker>``.

    With `variable`, the environment must hold ``<variable>=<marker>`` instead.
    Processes that cannot be read (another user's, gone meanwhile) are skipped.
    Without ``/proc`` the answer is empty.
    Zombies are skipped: they are dead already.
    """
    needle = f"{variable}={marker}".encode()
    found = []
    try:
        entries = os.listdir(PROC)
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            environment = (PROC / entry / "environ").read_bytes()
            state = (PROC / entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and needle in environment.split(b"\0"):
            found.append(int(entry))
    return sorted(found)


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) of every live, non-zombie process (from /proc/<pid>/stat)."""
    table = {}
    try:
        entries = os.listdir(PROC)
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            fields = (PROC / entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):
            table[int(entry)] = (int(fields[1]), fields[19])
    return table


def descendants(root: int, spare: dict[int, str] | None = None) -> dict[int, str]:
    """The live descendants of process `root`: pid -> start time (which tells a reused pid apart).

    The processes of `spare` (pid -> start time) and everything below them are left out.
    """
    table = _process_table()
    spare = spare or {}
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = {}, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid not in found and spare.get(pid) != table[pid][1]:
            found[pid] = table[pid][1]
            stack.extend(children.get(pid, []))
    return found


def _alive(known: dict[int, str]) -> list[int]:
    """The processes of `known` (pid -> start time) that still run (not a later process on the pid)."""
    table = _process_table()
    return [pid for pid, started in known.items() if pid in table and table[pid][1] == started]


def end_instance(marker: str, exclude: tuple[int, ...] = (), grace_s: float = 3.0,
                 known: dict[int, str] | None = None) -> list[int]:
    """Ends the processes of instance `marker`, and those of `known` still alive.

    Each gets SIGTERM, then SIGKILL after `grace_s`.

    Returns the pids that were still alive and had to be signalled.
    """
    exclude = (*exclude, os.getpid())
    known = {pid: started for pid, started in (known or {}).items() if pid not in exclude}

    def remaining() -> list[int]:
        return sorted(set(instance_processes(marker, exclude)) | set(_alive(known)))

    targets = remaining()
    for pid in targets:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while remaining() and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in remaining():
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while remaining() and time.monotonic() < deadline:
        time.sleep(0.05)
    return targets


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Watchdog:
    """The driver's end of the watchdog: start it, and `close()` it to clean up now.

    `close()` closes the pipe and waits for the watchdog to end what is left.
    So when it returns, no process of the instance runs any more (the driver itself excepted).
    """

    def __init__(self, marker: str, driver_pid: int | None = None) -> None:
        self.marker = marker
        environment = {k: v for k, v in os.environ.items() if k != MARKER_VARIABLE}  # never its own target
        driver_pid = driver_pid or os.getpid()
        # what the driver runs already (another Ray cluster it started, a server) is not the
        # instance's, nor anything those start later: spared, with all below them
        spare = ",".join(f"{pid}:{started}" for pid, started in descendants(driver_pid).items())
        self.process = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve()), marker, str(driver_pid), spare],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment,
            start_new_session=True, close_fds=True)  # its own session: a Ctrl-C to the driver's group spares it

    def close(self, timeout_s: float = 20.0) -> None:
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:  # still ending processes; it finishes on its own
            pass


def _started(pid: int) -> str | None:
    """A live process's start time (field 22 of /proc/<pid>/stat), None once it is gone or a zombie.

    With the pid it tells a process apart from a later one that reuses the pid.
    """
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _watch(marker: str, driver_pid: int, spare: dict[int, str], poll_s: float = 0.5) -> None:
    """The watchdog's body: wait until the pipe closes or the driver is gone, then end the instance.

    End of file alone is not enough.
    A process the driver forked (without exec) keeps a copy of the pipe's write end.
    So the pipe can stay open after a SIGKILL of the driver.
    Hence the driver's own liveness is polled too.
    """
    import select

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # only the driver's end ends the watch
    started = _started(driver_pid)
    stream = sys.stdin.buffer
    known: dict[int, str] = {}  # every descendant of the driver seen so far: pid -> start time
    while started is not None and _started(driver_pid) == started:
        known.update(descendants(driver_pid, spare=spare))
        try:
            readable, _, _ = select.select([stream], [], [], poll_s)
            if readable and not os.read(stream.fileno(), 4096):
                break  # end of file: the driver closed it, or died
        except OSError:
            break
    if end_instance(marker, exclude=(driver_pid,), known=known):
        time.sleep(1.0)  # a process forked just before the end shows up a moment later: a second sweep
        end_instance(marker, exclude=(driver_pid,), known=known)


if __name__ == "__main__":
    _watch(sys.argv[1], int(sys.argv[2]),
           {int(pid): started for pid, _, started in (item.partition(":") for item in sys.argv[3].split(",") if item)})
