"""How many torch threads a benchmark process runs on: chosen from the CPUs it may use, never inherited.

By default torch starts one OpenMP thread per CPU it may run on. It ignores whatever else runs
there, and whatever its cgroup's CPU quota allows. On a busy machine that oversubscribes the cores.
A training step is thousands of small parallel regions. Each one waits for its slowest thread,
spinning under OpenMP's default policy. That thread waits for a core another process holds. The
step then takes many times what one thread alone takes. The figures are on docs/performance.md,
"Threads on a busy machine".

So every benchmark process takes its count from `choose_threads`. That covers `nfnzoo bench run`,
`bench suite`, `bench check-model`, and the child that runs its checks. The count is chosen in this
order.

1. `NFNZOO_THREADS`, when set, gives that many, from 1 to the machine's CPUs.
2. Else `OMP_NUM_THREADS`, when the user set it, gives that many. Its first level counts, as OpenMP
   reads it, at most the machine's CPUs.
3. Else it takes the CPUs this process may use: its affinity mask (`os.sched_getaffinity`). Its
   cgroup's CPU quota bounds them: v2 `cpu.max`, or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
   So does how many of the mask's CPUs are idle now (`/proc/stat` over `LOAD_WINDOW_S`). A CPU
   counts when mostly idle, since a thread fewer costs a fraction of the speed, and a thread too
   many a multiple. It never exceeds what the process already runs, so a caller that set fewer
   keeps them. It is divided among the `shares` runs that use them side by side, at least one each.

The choice is made once, when the command starts. Load that comes later is not seen; set
`NFNZOO_THREADS=1` then. Only intra-op threads are set. Nothing here runs inter-op work
(`torch.jit.fork`), whose pool starts idle. Ray tasks set their own (`benchmarks.jobs`: one each)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from pathlib import Path
from typing import Iterator, Mapping

VARIABLE = "NFNZOO_THREADS"
LOAD_WINDOW_S = 0.1  # /proc/stat counts 10 ms ticks: 10 a CPU tell a busy core from an idle one
FREE_SLACK = 0.25  # a CPU counts as free when at least 3/4 idle
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_STAT = Path("/proc/stat")
OWN_CGROUP = Path("/proc/self/cgroup")
_MAX_READ = 1 << 20  # bytes of a /proc or /sys file read (a machine with thousands of CPUs fits)


@dataclasses.dataclass(frozen=True)
class ThreadChoice:
    """The thread count a process uses and what decided it."""

    threads: int
    source: str  # "NFNZOO_THREADS", "OMP_NUM_THREADS" or "CPUs"
    cpus: int  # the CPUs the process may use (affinity and quota)
    idle: float | None = None  # of those, how many were idle when it chose (None: not measured)
    shares: int = 1  # runs sharing the CPUs

    def describe(self) -> str:
        """One line for the run's first progress line."""
        count, cpus = _plural(self.threads, "torch thread"), _plural(self.cpus, "CPU")
        if self.source != "CPUs":
            return f"{count} (from {self.source}; {cpus})"
        idle = f", {self.idle:.1f} idle" if self.idle is not None else ""
        shared = f", shared by {self.shares} runs" if self.shares > 1 else ""
        return f"{count} ({cpus}{idle}{shared}; {VARIABLE}=N chooses)"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def affinity_cpus() -> set[int]:
    """The CPUs this process may run on (all of the machine's where the platform cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def _read(path: Path) -> str | None:
    try:
        with open(path, "rb") as stream:
            return stream.read(_MAX_READ).decode("ascii", errors="replace")
    except OSError:
        return None


def _own_paths(own_cgroup: Path) -> tuple[str, str]:
    """This process's cgroup v2 path and v1 `cpu` controller path ("/" where not listed)."""
    v2 = v1 = "/"
    for line in (_read(own_cgroup) or "").splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            v2 = path or "/"
        elif "cpu" in controllers.split(","):
            v1 = path or "/"
    return v2, v1


def _levels(base: Path, path: str) -> list[Path]:
    """`base/path` and each folder above it up to `base` (an ancestor's quota bounds its children)."""
    parts = [part for part in path.split("/") if part and part not in (".", "..")]
    return [base.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]


def _quota(text: str | None, period_text: str | None = None) -> float | None:
    """CPUs a quota allows: v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD"), or v1's quota and period."""
    if text is None:
        return None
    fields = text.split()
    if period_text is not None:
        fields = fields[:1] + period_text.split()[:1]
    if len(fields) < 2 or fields[0] in ("max", "-1"):
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def quota_cpus(root: Path = CGROUP_ROOT, own_cgroup: Path = OWN_CGROUP) -> float | None:
    """The CPUs this process's cgroup quota allows (the tightest of its cgroup's and its ancestors'),
    or None without a quota. `root` is where the cgroup file system is mounted."""
    v2, v1 = _own_paths(own_cgroup)
    found = [_quota(_read(level / "cpu.max")) for level in _levels(root, v2)]
    for controller in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        found += [_quota(_read(level / "cpu.cfs_quota_us"), _read(level / "cpu.cfs_period_us"))
                  for level in _levels(root / controller, v1)]
    quotas = [quota for quota in found if quota is not None]
    return min(quotas) if quotas else None


def available_cpus(mask: set[int] | None = None, quota: float | None = None) -> int:
    """The CPUs a process may keep busy: its affinity `mask` (default: its own), at least 1.

    A cgroup `quota` in CPUs bounds it, rounded down, since a thread beyond it is throttled."""
    cpus = len(affinity_cpus() if mask is None else mask)
    if quota is not None:
        cpus = min(cpus, math.floor(quota))
    return max(1, cpus)


def cpu_times(path: Path = PROC_STAT) -> dict[int, tuple[int, int]]:
    """Each CPU's (idle, total) ticks from `/proc/stat` (idle counts I/O wait); {} where unreadable."""
    times = {}
    for line in (_read(path) or "").splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or not name[3:].isdigit() or len(fields) < 4:
            continue
        try:
            ticks = [int(field) for field in fields[:8]]  # user nice system idle iowait irq softirq steal
        except ValueError:
            continue
        times[int(name[3:])] = (ticks[3] + (ticks[4] if len(ticks) > 4 else 0), sum(ticks))
    return times


def idle_cpus(before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]],
              mask: set[int]) -> float | None:
    """How many of `mask`'s CPUs were idle between two `cpu_times` readings (None: none of them read)."""
    idle, seen = 0.0, False
    for cpu in mask:
        if cpu in before and cpu in after:
            elapsed = after[cpu][1] - before[cpu][1]
            idle += (after[cpu][0] - before[cpu][0]) / elapsed if elapsed > 0 else 1.0
            seen = True
    return idle if seen else None


def measure_idle(mask: set[int], window_s: float = LOAD_WINDOW_S, path: Path = PROC_STAT) -> float | None:
    """Idle CPUs of `mask` now: `/proc/stat` read `window_s` apart; else the load average's complement
    (a platform without /proc/stat); None where neither is known."""
    before = cpu_times(path)
    if before:
        time.sleep(window_s)
        return idle_cpus(before, cpu_times(path), mask)
    if hasattr(os, "getloadavg"):
        return max(0.0, len(mask) - os.getloadavg()[0])
    return None


def _count(text: str) -> int:
    """`NFNZOO_THREADS`'s count: 1 to the machine's CPUs, else a `ValueError` saying so."""
    value, limit = text.strip(), os.cpu_count() or 1
    if not (value.isdigit() and len(value) < 8 and 1 <= int(value) <= limit):
        raise ValueError(f"{VARIABLE}={ascii(text[:40])}: expected a number of threads from 1 to this machine's "
                         f"{limit} CPUs (more only contend)")
    return int(value)


def choose_threads(shares: int = 1, *, environ: Mapping[str, str] | None = None, cpus: int | None = None,
                   idle: float | None = None, measure: bool = True, current: int | None = None) -> ThreadChoice:
    """The thread count for a process whose CPUs `shares` runs use side by side (module docstring).

    `environ` defaults to `os.environ`. `cpus` defaults to `available_cpus()`, this process's affinity
    and quota. `idle` defaults to the idle CPUs measured now; with `measure=False` they are not
    measured. `current` defaults to torch's count now.

    A malformed `NFNZOO_THREADS` is a `ValueError` saying what is expected. An `OMP_NUM_THREADS`
    OpenMP cannot read is ignored, as OpenMP ignores it. One beyond the machine's CPUs is taken as its
    CPUs."""
    environ = os.environ if environ is None else environ
    if shares < 1:
        raise ValueError(f"shares must be at least 1, got {shares}")
    cpus = available_cpus(None, quota_cpus()) if cpus is None else cpus
    if environ.get(VARIABLE, "").strip():
        return ThreadChoice(_count(environ[VARIABLE]), VARIABLE, cpus, shares=shares)
    openmp = environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()  # OpenMP ignores a value it cannot read
    if openmp.isdigit() and len(openmp) < 8 and int(openmp) >= 1:
        return ThreadChoice(min(int(openmp), os.cpu_count() or 1), "OMP_NUM_THREADS", cpus, shares=shares)
    if current is None:
        import torch

        current = torch.get_num_threads()
    if idle is None and measure and min(cpus, current) // shares > 1:  # else one thread whatever the load
        idle = measure_idle(affinity_cpus())
    free = cpus if idle is None else min(cpus, max(1, math.floor(idle + FREE_SLACK)))
    return ThreadChoice(max(1, min(free, current) // shares), "CPUs", cpus, idle, shares)


_ACTIVE: list[ThreadChoice] = []  # the choices of the `benchmark_threads` blocks running, innermost last


@contextlib.contextmanager
def benchmark_threads(shares: int = 1) -> Iterator[ThreadChoice]:
    """torch on `choose_threads(shares)`'s count while the block runs; the count it had after."""
    import torch

    choice = choose_threads(shares)
    previous = torch.get_num_threads()
    torch.set_num_threads(choice.threads)
    _ACTIVE.append(choice)
    try:
        yield choice
    finally:
        _ACTIVE.pop()
        torch.set_num_threads(previous)


def threads_line() -> str:
    """What torch runs on in this process, for a run's first progress line.

    That is the command's choice and why. In a library caller's process, it is the count it set."""
    import torch

    threads = torch.get_num_threads()
    if _ACTIVE and _ACTIVE[-1].threads == threads:
        return _ACTIVE[-1].describe()
    return f"{_plural(threads, 'torch thread')} (this process's setting)"
