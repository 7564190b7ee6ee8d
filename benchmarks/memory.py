"""A job's own peak memory: the resident set's high-water mark reset when the job starts.

`reset_peak(device)` marks the start of a job and `peak_mb(device)` reads the peak since then.
On the CPU that is Linux's per-process high-water mark of the resident set (`VmHWM` in
`/proc/self/status`), which writing "5" to `/proc/self/clear_refs` resets to the current
resident set (proc(5), since Linux 4.0): a job's peak, not the peak of whatever ran in the
process before it (the harness process of a suite reported its largest entry's 5.8 GB for every
later one). What the process holds when the job starts (the interpreter, torch, the job's
arguments) is part of the peak, as it is in a fresh process. Where the reset is not available
(not Linux, or /proc read-only) the peak is the process's since it started (`ru_maxrss`),
which a fresh process per job (`benchmarks.jobs` on Ray) makes the job's own again. On CUDA
it is `torch.cuda.max_memory_allocated` since `reset_peak_memory_stats`.
"""

from __future__ import annotations

import sys

_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"


def _is_cuda(device) -> bool:
    return device is not None and str(device).startswith("cuda")


def reset_peak(device=None) -> bool:
    """Starts a job's peak here (and on `device` when it is CUDA); False when the CPU peak could
    not be reset (it then counts from the process's start)."""
    if _is_cuda(device):
        import torch

        torch.cuda.reset_peak_memory_stats(device)
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
