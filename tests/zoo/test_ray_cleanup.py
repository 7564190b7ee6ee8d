"""The watchdog of a local Ray instance ends the instance's processes, and spares what its
driver ran before the instance started (another cluster, a server): a driver that started a
Ray cluster of its own and then a local instance must not lose the cluster when the instance ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.slow

DRIVER = textwrap.dedent("""
    import os, subprocess, sys, time
    bystander = subprocess.Popen(["sleep", "120"])  # running before the instance: not the instance's
    sys.stdout.write(f"{bystander.pid}\\n"); sys.stdout.flush()
    from zoo.distributed.ray_session import connected
    import ray
    with connected(None, 1):
        worker = ray.get(ray.remote(lambda: os.getpid()).remote())
        sys.stdout.write(f"{worker}\\n"); sys.stdout.flush()
    sys.stdout.write("done\\n"); sys.stdout.flush()
    time.sleep(2)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_the_instance_goes_and_what_the_driver_ran_before_it_stays():
    process = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    bystander = int(process.stdout.readline())
    worker = int(process.stdout.readline())
    assert process.stdout.readline().strip() == "done"
    deadline = time.monotonic() + 20
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert not _alive(worker), "the instance's worker outlived it"
        assert _alive(bystander), "the watchdog ended a process the driver ran before the instance"
    finally:
        process.wait(timeout=30)
        try:
            os.kill(bystander, signal.SIGKILL)
        except ProcessLookupError:
            pass
