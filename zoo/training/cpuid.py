"""The x86-64-v3 feature flags the CPUID instruction reports to this process, without NumPy or torch.

`/proc/cpuinfo` is the kernel's view of the host.
An emulator (QEMU's user mode) presents its own processor to the process.
It leaves the host's `/proc/cpuinfo` in place.
So a check that reads only that file passes on an emulated processor the libraries then refuse.
NumPy's import, for one, stops with an illegal instruction.
Hence `zoo.training.reproducibility.processor_problem` also asks CPUID, as NumPy and the other libraries do.
It places a few bytes of x86-64 code (System V calling convention) in an executable page.
It calls them through `ctypes`.
Some kernels forbid writable executable memory, so no such page can be made.
There, or where the platform is not Linux on x86-64, it answers None.
Then the file's flags stand alone.

Leaves and bits: Intel SDM Vol. 2A, CPUID; AMD APM Vol. 3, Appendix E.
LZCNT is `abm`, as Linux names it.
"""

from __future__ import annotations

import platform
import sys

# void cpuid(uint32 leaf, uint32 subleaf, uint32 out[4]): leaf in edi, subleaf in esi, out in rdx
CODE = bytes([
    0x53,                    # push rbx          (callee-saved; cpuid writes it)
    0x89, 0xF8,              # mov eax, edi      leaf
    0x89, 0xF1,              # mov ecx, esi      subleaf
    0x49, 0x89, 0xD0,        # mov r8, rdx       out
    0x0F, 0xA2,              # cpuid
    0x41, 0x89, 0x00,        # mov [r8], eax
    0x41, 0x89, 0x58, 0x04,  # mov [r8+4], ebx
    0x41, 0x89, 0x48, 0x08,  # mov [r8+8], ecx
    0x41, 0x89, 0x50, 0x0C,  # mov [r8+12], edx
    0x5B,                    # pop rbx
    0xC3,                    # ret
])
# name -> (leaf, subleaf, register index in (eax, ebx, ecx, edx), bit)
FLAGS = {"fma": (1, 0, 2, 12), "movbe": (1, 0, 2, 22), "avx": (1, 0, 2, 28), "f16c": (1, 0, 2, 29),
         "bmi1": (7, 0, 1, 3), "avx2": (7, 0, 1, 5), "bmi2": (7, 0, 1, 8), "abm": (0x80000001, 0, 2, 5)}


def cpuid_flags() -> set[str] | None:
    """The names in `FLAGS` whose bits CPUID sets for this process, or None where it cannot be asked."""
    if sys.platform != "linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    import ctypes
    import mmap

    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, ValueError):
        return None
    try:
        page.write(CODE)
        anchor = ctypes.c_char.from_buffer(page)  # the page's buffer is exported while it lives
        try:
            return _flags(ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32,
                                           ctypes.c_void_p)(ctypes.addressof(anchor)))
        finally:
            del anchor
    finally:
        page.close()


def _flags(call) -> set[str]:
    import ctypes

    def registers(leaf: int, subleaf: int = 0) -> tuple[int, ...]:
        out = (ctypes.c_uint32 * 4)()
        call(leaf, subleaf, ctypes.addressof(out))
        return tuple(out)

    highest = {0: registers(0)[0], 0x80000000: registers(0x80000000)[0]}  # the last leaf of each range
    return {name for name, (leaf, subleaf, register, bit) in FLAGS.items()
            if leaf <= highest[leaf & 0x80000000] and registers(leaf, subleaf)[register] >> bit & 1}
