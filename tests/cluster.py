"""A real multi-node Ray cluster on this machine whose worker nodes share no folder with the driver.

Each node is a `ray start --block` in its own process group (`setsid`), so that it is stopped
by its group, never by `ray stop` or a kill by name (other Ray instances may be running). A
worker node runs under `unshare -m --propagation private` with an empty tmpfs mounted over each
folder it must not see (the tests' temporary folders, where every `--out` lives, and the shared
data folder), as a second machine without NFS would be. Every process of the cluster carries
``NFNZOO_TEST_CLUSTER=<token>`` in its environment, so that what a group kill misses (Ray's
agents, which may leave the group) is found and ended too (`zoo.distributed.ray_cleanup`).

Not a test module: `tests/conftest.py` builds one `LocalCluster` per test session (the
`ray_cluster` fixture) and tests add or kill nodes of their own on it.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from zoo.distributed.ray_cleanup import instance_processes

MARKER = "NFNZOO_TEST_CLUSTER"
RAY = str(Path(sys.executable).with_name("ray"))


def private_mounts_work() -> str | None:
    """None when `unshare -m` with a tmpfs works here, else the reason it does not."""
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs tmpfs /mnt && umount /mnt"], capture_output=True, text=True)
    if probe.returncode:
        return f"unshare -m with a tmpfs is not permitted here: {probe.stderr.strip()[:200]}"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclasses.dataclass
class Node:
    process: subprocess.Popen
    name: str
    hidden: tuple[str, ...]
    log: Path

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


class LocalCluster:
    """A head node (the driver's view of the files) and worker nodes with private folders."""

    def __init__(self, logs: Path, hidden: tuple[str | Path, ...]) -> None:
        self.logs = logs
        self.hidden = tuple(str(Path(h).resolve()) for h in hidden)
        self.token = secrets.token_hex(8)
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard_port = _free_port()
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"  # the job server (`ray job submit`)
        self.nodes: list[Node] = []

    def _environment(self) -> dict[str, str]:
        environment = {**os.environ, MARKER: self.token, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1",
                       "RAY_USAGE_STATS_ENABLED": "0",
                       # a killed node is declared dead after ~3 s of missed health checks (default ~15 s)
                       "RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
                       "RAY_health_check_failure_threshold": "3"}
        environment.pop("RAY_ADDRESS", None)
        environment.pop("NFNZOO_DATA", None)  # a worker node must find no data folder of the driver's
        return environment

    def _start(self, name: str, arguments: list[str], hidden: tuple[str, ...]) -> Node:
        log = self.logs / f"{name}.log"
        command = [RAY, "start", "--block", "--disable-usage-stats", *arguments]
        if hidden:
            mounts = " && ".join(f"mount -t tmpfs -o size=64m tmpfs {shlex.quote(h)}" for h in hidden)
            command = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                       f"{mounts} && exec {shlex.join(command)}"]
        with open(log, "w") as output:
            process = subprocess.Popen(command, env=self._environment(), stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        node = Node(process, name, hidden, log)
        self.nodes.append(node)
        return node

    def start_head(self, num_cpus: int = 1, resources: str | None = None) -> Node:
        # every port a free one: the suite's workers each start a cluster on this machine (Ray's default
        # agent port, 52365, would let only one head's job agent bind)
        arguments = ["--head", f"--port={self.port}", f"--num-cpus={num_cpus}", "--include-dashboard=true",
                     f"--dashboard-port={self.dashboard_port}", "--node-ip-address=127.0.0.1",
                     f"--dashboard-agent-listen-port={_free_port()}"]
        if resources:
            arguments.append(f"--resources={resources}")
        node = self._start("head", arguments, ())
        self.wait_for_nodes(1)
        return node

    def add_node(self, name: str, num_cpus: int = 1, num_gpus: int | None = None, hidden: bool = True,
                 wait: bool = True) -> Node:
        """A worker node; `hidden`: with the cluster's private folders (the default)."""
        arguments = [f"--address={self.address}", f"--num-cpus={num_cpus}", "--node-ip-address=127.0.0.1",
                     f"--dashboard-agent-listen-port={_free_port()}"]
        if num_gpus is not None:
            arguments.append(f"--num-gpus={num_gpus}")
        before = len(self.alive_nodes())
        node = self._start(name, arguments, self.hidden if hidden else ())
        if wait:
            self.wait_for_nodes(before + 1)
        return node

    def alive_nodes(self) -> list[dict]:
        """The cluster's live nodes as Ray's state API lists them (through the ray CLI's Python)."""
        script = ("import json, ray; ray.init(address=%r, logging_level='ERROR');"
                  "print(json.dumps([n for n in ray.nodes() if n['Alive']]))") % self.address
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                                env={**self._environment(), MARKER: ""})
        if result.returncode:
            return []
        import json

        return json.loads(result.stdout.strip().splitlines()[-1])

    def head_node_id(self) -> str:
        """The Ray node id of the head node (the driver's node)."""
        return next(n["NodeID"] for n in self.alive_nodes() if n.get("Resources", {}).get("node:__internal_head__"))

    def wait_for_nodes(self, count: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.alive_nodes()) >= count:
                return
            dead = [n for n in self.nodes if not n.alive]
            if dead:
                raise RuntimeError(f"ray node {dead[0].name} exited: {dead[0].log.read_text()[-2000:]}")
            time.sleep(1.0)
        raise TimeoutError(f"the cluster at {self.address} did not reach {count} nodes in {timeout_s:.0f} s")

    def kill(self, node: Node) -> None:
        """Ends a node as a machine loss would: every process of its group, SIGKILL, no goodbye."""
        try:
            os.killpg(node.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        node.process.wait(timeout=30)

    def stop(self) -> None:
        """Ends every node at once (SIGKILL to each group: nothing of a test cluster needs saving)."""
        for node in reversed(self.nodes):
            if node.alive:
                try:
                    os.killpg(node.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for node in self.nodes:
            node.process.wait(timeout=20)
        for pid in self.leftover_processes():  # what left its group (Ray's agents may), by the marker
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while self.leftover_processes() and time.monotonic() < deadline:
            time.sleep(0.1)

    def leftover_processes(self) -> list[int]:
        return instance_processes(self.token, exclude=(os.getpid(),), variable=MARKER)
