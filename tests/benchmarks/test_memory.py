"""benchmarks.memory: glibc keeps freed blocks for reuse, and a job's peak does not count them."""

import pytest
import torch

from benchmarks.memory import _glibc, _high_water_kib, keep_freed_memory, peak_mb, reset_peak

pytestmark = pytest.mark.skipif(_glibc() is None or _high_water_kib() is None,
                                reason="needs glibc and Linux's /proc/self/status")

BLOCK_MB = 512


def _allocate_and_free() -> None:
    block = torch.ones(BLOCK_MB * 2**18)  # 512 MiB of float32, touched
    del block


def test_freed_blocks_stay_in_the_heap_and_a_reset_peak_hands_them_back():
    assert keep_freed_memory()
    _allocate_and_free()
    # negative control: the block is kept by the heap, so a reset without the trim starts above it
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
    kept = peak_mb()
    assert reset_peak()  # trims first
    after = peak_mb()
    assert kept - after > 0.8 * BLOCK_MB, (kept, after)
