"""The recorded portable bytes (`portable_bytes.json`) made again on other processor models, emulated:

    python tests/zoo/portable_emulated.py [--cpu Haswell --cpu EPYC-Rome ...] [--mode portable|native]
        [--specs cnn-cifar10-gs,...]

Each `--cpu` is a QEMU processor model (`qemu-x86_64 -cpu help`); the probe (`portable_probe.py`) runs
under QEMU's user-mode emulation of it (`apt install qemu-user`), which presents that model's CPUID (its
vendor and instruction sets) to ATen, oneDNN, MKL and NumPy, so each library takes the kernels it
would take on that processor; the instructions themselves are computed by QEMU's exact IEEE
emulation. It starts from a hostile environment (ATen capability `default`, two OpenMP threads, oneDNN
at SSE4.1, MKL's `AUTO` branch, OpenBLAS choosing its kernel by the presented processor) passed through
`portable_environment`, as `nfnzoo generate` does, and prints one Markdown row per processor model: what
ATen and NumPy dispatch to there, how many recorded checkpoint files it made bit for bit in all, and how
many of each generation's (the colour generation, `cnn-cifar10-gs`, among them). `--specs` runs some
generations only. `--mode native` is the negative control: the native mode on an AVX2-only processor
makes other bytes.

It is a script, not a test: emulation makes the probe's seconds into minutes (QEMU 7.2 emulates
AVX2 and FMA, not AVX-512, so the models it can present are AVX2 processors, which are exactly the
ones a physical AVX-512 machine cannot stand in for). Every run's table goes into the reproducibility
page with its date.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HOSTILE = {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "2", "ONEDNN_MAX_CPU_ISA": "SSE41",
           "MKL_CBWR": "AUTO"}
UNPINNED = ("OPENBLAS_CORETYPE",)  # removed: OpenBLAS reads the emulated CPUID
DISPATCH = ("import torch; from numpy._core._multiarray_umath import __cpu_features__ as f; "
            "print(torch.backends.cpu.get_cpu_capability(), "
            "'+'.join(k for k in ('AVX2', 'FMA3', 'AVX512F') if f.get(k)))")


def emulated(cpu: str, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["qemu-x86_64", "-cpu", cpu, sys.executable, *argv], env=env, capture_output=True,
                          text=True, cwd=ROOT)


def environment(mode: str) -> dict[str, str]:
    sys.path.insert(0, str(ROOT))
    from zoo.training.reproducibility import portable_environment

    hostile = {key: value for key, value in {**os.environ, **HOSTILE}.items() if key not in UNPINNED}
    env = portable_environment(hostile) if mode == "portable" else {**os.environ, "OMP_NUM_THREADS": "1"}
    return {**env, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


def row(cpu: str, mode: str, specs: list[str]) -> str:
    env = environment(mode)
    dispatch = emulated(cpu, ["-c", DISPATCH], env)
    seen = dispatch.stdout.strip() if dispatch.returncode == 0 else f"failed: {dispatch.stderr.strip()[-200:]}"
    start = time.monotonic()
    done = emulated(cpu, [str(HERE / "portable_probe.py"), "--mode", mode, "--specs", ",".join(specs)], env)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        return f"| {cpu} | {mode} | {seen} | probe failed: {done.stderr.strip()[-300:]} | {seconds:.0f} |"
    found = json.loads(done.stdout)
    recorded = json.loads((HERE / "portable_bytes.json").read_text())["generations"]
    counts, equal_in_all, files_in_all = [], 0, 0
    for generation, files in recorded.items():
        if generation.split("/")[0] not in specs:
            continue
        equal = sum(found.get(generation, {}).get(name) == digest for name, digest in files.items())
        counts.append(f"{generation.split('/')[0]} {generation.split('/')[-1]}: {equal}/{len(files)}")
        equal_in_all, files_in_all = equal_in_all + equal, files_in_all + len(files)
    return f"| {cpu} | {mode} | {seen} | {equal_in_all} of {files_in_all} ({'; '.join(counts)}) | {seconds:.0f} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="append", default=None,
                        help="a QEMU processor model (default: Haswell and EPYC-Rome)")
    parser.add_argument("--mode", choices=("portable", "native"), default="portable")
    parser.add_argument("--specs", default=None, help="comma-separated generations' specs (default: every "
                                                      "recorded one, portable_probe.SPECS)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from portable_probe import SPECS

    specs = args.specs.split(",") if args.specs else list(SPECS)
    unknown = sorted(set(specs) - set(SPECS))
    if unknown:
        print(f"portable_emulated: --specs: unknown {', '.join(unknown)}; expected some of {', '.join(SPECS)}",
              file=sys.stderr)
        return 2
    if shutil.which("qemu-x86_64") is None:
        print("portable_emulated: qemu-x86_64 is not installed (apt install qemu-user)", file=sys.stderr)
        return 2
    print("| processor model (QEMU) | mode | ATen / NumPy dispatch there | recorded checkpoint files made bit for bit "
          "| seconds |")
    print("|---|---|---|---|---|")
    for cpu in args.cpu or ["Haswell", "EPYC-Rome"]:
        print(row(cpu, args.mode, specs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
