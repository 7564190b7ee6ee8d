"""`python -m zoo.cli ARGV` in a fresh process per call, without paying Python's and torch's start each time.

A server process imports the slow, environment-independent libraries once (numpy, pandas, pyarrow,
torch; nothing of ours, nothing that reads HF_* or NFNZOO_* variables at import) and then, per
request, forks a child that takes the request's working directory, environment, argv and stdin
(/dev/null), writes stdout and stderr to files, and runs `zoo.cli` as the console script would (`-P`:
the working directory is not on its path, so a child in a folder holding `numpy.py` does not import it). The server
waits for the child within the request's timeout and kills it past that, so a read that blocks
still fails its case instead of hanging the suite. The child is a separate process like a
subprocess would be: its own exit code, file descriptors, environment and memory. What it does not
get afresh is what those pre-imported libraries did at their import (their warning filters are
the server's, started with the same PYTHONWARNINGS).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_SERVER = r"""
import json, os, signal, sys, time
import numpy, pandas, pyarrow, pyarrow.parquet, torch  # the slow imports, once

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:  # the child: a fresh `python -m zoo.cli` in all that matters to the CLI
        code = 1
        try:
            if request.get("cgroup_procs"):  # a memory limit: the child's own allocations are charged to its group
                with open(request["cgroup_procs"], "w") as procs:
                    procs.write(str(os.getpid()))
            elif request.get("rlimit_data"):  # no cgroup to be had: the data segment, beyond what the server holds
                import re, resource
                held = int(re.search(r"VmData:\s+(\d+)", open("/proc/self/status").read()).group(1)) * 1024
                resource.setrlimit(resource.RLIMIT_DATA, (held + request["rlimit_data"],) * 2)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                    (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                    (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                opened = os.open(path, flags, 0o600)
                os.dup2(opened, fd)
                os.close(opened)
            sys.argv = ["nfnzoo", *request["argv"]]
            from zoo.cli import main
            code = main(request["argv"])
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
    deadline, status = time.monotonic() + request["timeout"], None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = "timeout"
        else:
            time.sleep(0.01)
    print(json.dumps({"status": status}), flush=True)
"""


class ForkedCLI:
    """Runs the CLI in forked children of one warm server (module docstring); `close` ends the server."""

    def __init__(self, cwd: Path, warnings: str = "ignore"):
        env = {**os.environ, "PYTHONWARNINGS": warnings}
        self.scratch = Path(tempfile.mkdtemp(prefix="forked_cli_"))
        self.server = subprocess.Popen([sys.executable, "-P", "-c", _SERVER], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)

    def run(self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float,
            cgroup_procs: Path | None = None, rlimit_data: int | None = None) -> subprocess.CompletedProcess:
        """Like `subprocess.run([python, -m, zoo.cli, *argv], capture_output=True, timeout=...)`; raises
        `subprocess.TimeoutExpired` past `timeout`."""
        out, err = self.scratch / "stdout", self.scratch / "stderr"
        request = {"argv": argv, "cwd": str(cwd), "env": env, "timeout": timeout, "stdout": str(out),
                   "stderr": str(err), "cgroup_procs": cgroup_procs and str(cgroup_procs), "rlimit_data": rlimit_data}
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        reply = json.loads(self.server.stdout.readline())
        if reply["status"] == "timeout":
            raise subprocess.TimeoutExpired(argv, timeout)

        def read(path: Path) -> str:
            return path.read_bytes().decode(errors="replace")

        return subprocess.CompletedProcess(argv, reply["status"], read(out), read(err))

    def run_limited(self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float, limit_bytes: int):
        """`run` with the child in a memory cgroup of its own (`tests/memory_limit.py`): a
        `LimitedResult`, whose `returncode` is None past the timeout and which says whether the
        kernel killed the child for exceeding `limit_bytes`."""
        from memory_limit import MemoryGroup

        group = MemoryGroup(limit_bytes)
        try:
            done = self.run(argv, cwd=cwd, env=env, timeout=timeout, cgroup_procs=group.procs,
                            rlimit_data=None if group.procs else limit_bytes)
            return group.result(done.returncode, done.stdout, done.stderr)
        except subprocess.TimeoutExpired:
            return group.result(None, "", "")
        finally:
            group.remove()

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=30)
