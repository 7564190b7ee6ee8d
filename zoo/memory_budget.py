"""How much more memory this process may take, so that a load too large for it is refused early.

The refusal is one line, before the load starts. Without it the kernel kills the process halfway, or a
laptop starts swapping.

`available_bytes()` is the least of what the machine and the process's memory cgroup allow. The machine
allows `MemAvailable` from /proc/meminfo. The cgroup allows its limit (v2 `memory.max`, v1
`memory.limit_in_bytes`) less what it holds beyond reclaimable file pages (`memory.stat`: v2 `file`, v1
`total_cache`). It is None where none of these can be read (not Linux), and nothing is refused there.
`allocation_problem(need)` says why `need` more bytes would not fit, or returns None.
"""

from __future__ import annotations

from pathlib import Path

GIB = 2**30
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return None if not text.isdigit() else int(text)  # "max" (v2's no limit) is None


def _stat(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _cgroup_available() -> int | None:
    """The memory cgroup's limit less its non-file usage, or None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if controllers == "":  # v2
            folder = CGROUP_ROOT / group.lstrip("/")
            limit, usage, files = _read_int(folder / "memory.max"), _read_int(folder / "memory.current"), "file"
        elif "memory" in controllers.split(","):  # v1
            folder = CGROUP_ROOT / "memory" / group.lstrip("/")
            limit, usage = _read_int(folder / "memory.limit_in_bytes"), _read_int(folder / "memory.usage_in_bytes")
            files = "total_cache"
        else:
            continue
        if limit is None or usage is None or limit >= 2**60:  # v1 writes "no limit" as a huge number
            continue
        return max(0, limit - (usage - _stat(folder / "memory.stat", files)))
    return None


def available_bytes() -> int | None:
    """Bytes this process may still allocate (module docstring), or None where that cannot be read."""
    known = [value for value in (_meminfo_available(), _cgroup_available()) if value is not None]
    return min(known) if known else None


def allocation_problem(need: int) -> str | None:
    """Why `need` more bytes would not fit in memory now, or None."""
    available = available_bytes()
    if available is None or need <= available:
        return None
    return f"needs {need / GIB:.2f} GiB of memory and {available / GIB:.2f} GiB is available"
