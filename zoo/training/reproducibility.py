"""Reproducibility modes of generation on the CPU: `native` and `portable` (a spec's `training.reproducibility`).

`native` is the mode of every spec that names none, and of every zoo made before the modes.
It lets each library use the best instructions of the processor it runs on.
The bytes of a zoo are then reproducible on machines of one instruction set (README, "Reproducibility").
An AVX-512 machine and an AVX2-only one make different zoos from one spec.

`portable` pins every numeric path a trial takes to x86-64-v3.
That is AVX2, FMA, BMI1/2, F16C, LZCNT and MOVBE: every x86-64 server processor of the last decade has them.
A checkpoint's bytes then depend on the spec, the run and the software versions only.
The mode pins these paths:

ATen's CPU kernels (elementwise, reductions, SLEEF's transcendentals) dispatch by `ATEN_CPU_CAPABILITY=avx2`.

MKL (torch's CPU matrix products) gets `MKL_CBWR=COMPATIBLE`.
That is Intel's conditional numerical reproducibility on its SSE2 code path.
It is the one branch MKL documents for Intel *and* non-Intel processors alike.
On an AMD processor, its AVX2 branch (and with it the `STRICT` modifier) runs as `AUTO`, the host's own path.
MKL_VERBOSE on this project's AMD EPYC shows that.

For oneDNN (torch's CPU convolutions), the mode sets `ONEDNN_MAX_CPU_ISA=AVX2`.
It also sets `DNNL_MAX_CPU_ISA`, its older name.

NumPy's SIMD kernels (`zoo.training.simd`'s sin, cos and tanh) get `NPY_ENABLE_CPU_FEATURES=X86_V3`.
That limits NumPy's dispatch to the x86-64-v3 targets.

The optimizers' square roots (`exact_sqrt`) are IEEE's correctly rounded sqrt, not torch's CPU sqrt.
That one calls MKL's vector math, whose kernel (and last bit) MKL picks by processor.
`MKL_CBWR` does not change that (`zoo.training.optim_stacked`).
Running the recorded generations on emulated processors found it (tests/zoo/portable_emulated.py).

Threads: `OMP_NUM_THREADS=MKL_NUM_THREADS=1`.
A trial trains on one thread anyway (`zoo.training.worker.TRAINING_THREADS`).

NumPy's matrix products run in OpenBLAS, whose kernel follows the processor.
Nothing here pins it, and no path a trial takes reaches it.
(The grayscale sources convert colour in integers, `zoo.data.images._grayscale`.)

Each library reads its setting when it initialises.
So the settings go on a process before it starts.
`nfnzoo generate` (and `verify --retrain`) runs itself again as a child process with `portable_environment()`.
Its local Ray instance's workers inherit them.
On a cluster (`--address`) the trials carry them as Ray `runtime_env` environment variables.
The user's environment may hold settings for these libraries.
(These are `ATEN_*`, `MKL_*`, `ONEDNN_*`, `DNNL_*`, `NPY_*CPU_FEATURES`, `OMP_*`, `KMP_*` and `GOMP_*`.)
They are replaced, not merged.
Every trial checks its own process (`process_problem`) before it trains.
A setting that did not take is an error, never a silent other zoo.
A processor without x86-64-v3, or not x86-64, is refused in one line before NumPy is imported.
A GPU device (or `auto` beside a GPU) is refused before Ray starts (`zoo.portable_command`).

Each setting's effect on the tiny zoos' hashes is on docs/reproducibility.md.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any, Mapping

MODES = ("native", "portable")
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2",
                "DNNL_MAX_CPU_ISA": "AVX2", "NPY_ENABLE_CPU_FEATURES": "X86_V3", "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1"}
# the environment's settings of the pinned libraries, replaced under the mode
REPLACED = re.compile(r"(ATEN_|MKL_|ONEDNN_|DNNL_|OMP_|KMP_|GOMP_)\w*|NPY_(ENABLE|DISABLE)_CPU_FEATURES")
# /proc/cpuinfo flags of x86-64-v3 (`abm` is how Linux names LZCNT on some processors)
X86_64_V3 = ("avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe")
CPU_ARCHITECTURES = ("x86_64", "amd64")


def processor_problem(cpuinfo: str | None = None, machine: str | None = None) -> str | None:
    """Why this processor cannot generate in the portable mode (not x86-64, or without x86-64-v3), or None.

    The flags are those both `/proc/cpuinfo` lists and CPUID reports to this process (`zoo.training.cpuid`).
    An emulator shows the host's file and its own CPUID.
    A kernel that turned AVX off leaves CPUID's bits and drops the file's.
    `cpuinfo` (a file's text) replaces both.
    """
    machine = (machine or platform.machine()).lower()
    if machine not in CPU_ARCHITECTURES:
        return (f"the portable mode pins x86-64 instruction sets; this machine is {machine}: generate in the native "
                "mode (training.reproducibility: native), whose bytes are this machine's own")
    if cpuinfo is not None:
        flags = _listed_flags(cpuinfo)
    else:
        from zoo.training.cpuid import cpuid_flags

        try:
            listed = _listed_flags(Path("/proc/cpuinfo").read_text(errors="replace")[:1_000_000])
        except OSError:
            listed = None  # not Linux
        known = [found for found in (listed, cpuid_flags()) if found is not None]
        if not known:
            return None  # no flags to read; every trial checks its own process
        flags = set.intersection(*known)
    missing = [flag for flag in X86_64_V3 if flag not in flags]
    if "lzcnt" not in flags and "abm" not in flags:
        missing.append("lzcnt")
    if missing:
        return (f"the portable mode needs x86-64-v3 (AVX2 + FMA); this processor lacks {', '.join(missing)}: generate "
                "in the native mode (training.reproducibility: native), whose bytes are this machine's own")
    return None


def _listed_flags(cpuinfo: str) -> set[str]:
    """The first `flags` line of a /proc/cpuinfo text, as a set."""
    return set(next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), []))


def mode_of(entry: Mapping[str, Any]) -> str:
    """The mode a manifest's config entry was made in: its spec's, or native for configs made before the modes."""
    return str(entry.get("spec", {}).get("training", {}).get("reproducibility", "native"))


def exact_sqrt(spec: Any) -> bool:
    """Whether `spec`'s training takes IEEE's correctly rounded square roots (`zoo.training.optim_stacked`).

    It does in the portable mode, where torch's CPU sqrt (MKL's vector math) gives processor-dependent bits.
    """
    return spec.training.reproducibility == "portable"


def portable_environment(base: Mapping[str, str]) -> dict[str, str]:
    """`base` with the pinned libraries' settings replaced by `PORTABLE_ENV`."""
    return {**{key: value for key, value in base.items() if not REPLACED.fullmatch(key)}, **PORTABLE_ENV}


def environment_problem(environ: Mapping[str, str]) -> str | None:
    """Why `environ` is not the portable environment (a setting missing, different or extra), or None."""
    for key, value in sorted(environ.items()):
        if REPLACED.fullmatch(key) and PORTABLE_ENV.get(key) != value:
            return f"{key}={value!r} is set; the portable mode sets {PORTABLE_ENV[key]!r}" if key in PORTABLE_ENV \
                else f"{key}={value!r} is set; the portable mode leaves it unset"
    unset = [key for key in PORTABLE_ENV if key not in environ]
    return f"{', '.join(unset)} not set" if unset else None


def process_problem() -> str | None:
    """Why this process does not compute as the portable mode needs, or None.

    The reason is its environment, or what its libraries initialised to.
    Imports torch and NumPy.
    """
    problem = environment_problem(os.environ)
    if problem is not None:
        return problem
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX2":
        return f"ATen dispatches to {capability}, not AVX2 (ATEN_CPU_CAPABILITY is read once, when torch starts)"
    features = _numpy_features()
    beyond = sorted(name for name in ("X86_V4", "AVX512_SKX", "AVX512_ICL", "AVX512_SPR") if features.get(name))
    if beyond:
        return f"NumPy dispatches to {', '.join(beyond)} (NPY_ENABLE_CPU_FEATURES is read when NumPy is imported)"
    return None


def _numpy_features() -> dict[str, bool]:
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return {name: bool(__cpu_features__.get(name)) for name in __cpu_dispatch__}


def record(mode: str) -> dict[str, Any]:
    """What a manifest records of the mode.

    That is the mode, its settings, and the versions of the libraries whose kernels decide the bytes.
    The same versions and mode give the same bytes on any x86-64-v3.
    """
    import numpy
    import torch

    shown = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", shown)
    onednn = re.search(r"(?:MKL-DNN|oneDNN) v([\w.]+)", shown)
    return {"mode": mode, "settings": dict(PORTABLE_ENV) if mode == "portable" else {},
            "versions": {"torch": torch.__version__, "numpy": numpy.__version__, "mkl": mkl and mkl.group(1),
                         "onednn": onednn and onednn.group(1), "python": platform.python_version()}}
