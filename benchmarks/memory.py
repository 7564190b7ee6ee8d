"""A job's own peak memory: the resident set's high-water mark reset when the job starts.

`reset_peak(device)` marks the start of a job, and `peak_mb(device)` reads the peak since then.

On the CPU that is Linux's per-process high-water mark of the resident set (`VmHWM` in
`/proc/self/status`). Writing "5" to `/proc/self/clear_refs` resets it to the current resident set
(proc(5), since Linux 4.0). So it is a job's peak, not the peak of whatever ran in the process
before it. Without the reset, a suite's harness process would report its largest entry's peak for
every later one. What the process holds when the job starts is part of the peak, as it is in a
fresh process: the interpreter, torch, the job's arguments.

Where the reset is not available (not Linux, or /proc read-only), the peak is the process's since
it started (`ru_maxrss`). A fresh process per job (`benchmarks.jobs` on Ray) makes that the job's
own again. On CUDA it is `torch.cuda.max_memory_allocated` since `reset_peak_memory_stats`.

`keep_freed_memory()` tells glibc's malloc to serve every block from its heap, and keep freed blocks
there (mallopt(3): M_MMAP_MAX 0, M_TRIM_THRESHOLD 2 GiB). Otherwise it maps each large tensor afresh
and unmaps it when freed. A CPU training step of the graph models allocates and frees tensors of
tens of MB by the dozen. Each fresh mapping is paid again in page faults, a large share of an
NG-GNN step (docs/performance.md). A job calls it before `reset_peak`. That hands what the heap
keeps free back to the system (malloc_trim(3)). So a job's peak does not start from what an earlier
job freed."""

from __future__ import annotations

import sys

_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # <malloc.h>
_TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: at most 2 GiB free at the heap's top is kept


def _glibc():
    """The C library when it is glibc (it has mallopt and malloc_trim), else None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None)  # the symbols this process has loaded: no library search (find_library runs ldconfig)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def keep_freed_memory() -> bool:
    """Large blocks from the heap, and freed ones kept for reuse (module docstring).

    False where the C library is not glibc, or refused a setting."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


def trim_freed_memory() -> bool:
    """Returns the heap's free memory to the system (malloc_trim(0)): True when some was."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def _is_cuda(device) -> bool:
    return device is not None and str(device).startswith("cuda")


def reset_peak(device=None) -> bool:
    """Starts a job's peak here, and on `device` when it is CUDA.

    Returns False when the CPU peak could not be reset; it then counts from the process's start."""
    if _is_cuda(device):
        import torch

        torch.cuda.reset_peak_memory_stats(device)
    trim_freed_memory()  # what an earlier job freed is not this job's
    try:
        with open(_CLEAR_REFS, "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _high_water_kib() -> int | None:
    try:
        with open(_STATUS) as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])  # "VmHWM:   123456 kB"
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_mb(device=None) -> float | None:
    """The peak in MiB since `reset_peak`: allocated CUDA memory on a CUDA device, else the
    resident set; None where neither is measurable."""
    if _is_cuda(device):
        import torch

        return torch.cuda.max_memory_allocated(device) / 2**20
    high_water = _high_water_kib()
    if high_water is not None:
        return high_water / 2**10
    try:
        import resource
    except ImportError:  # not on Unix
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10
