"""The recorded portable bytes (`portable_bytes.json`) made again on other processor models, emulated:

    python tests/zoo/portable_emulated.py [--cpu Haswell --cpu EPYC-Rome ...] [--mode portable|native]

Each `--cpu` is a QEMU processor model (`qemu-x86_64 -cpu help`); the probe (`portable_probe.py`) runs
under QEMU's user-mode emulation of it (`apt install qemu-user`), which presents that model's CPUID (its
vendor and instruction sets) to ATen, oneDNN, MKL and NumPy, so each library takes the kernels it
would take on that processor; the instructions themselves are computed by QEMU's exact IEEE
emulation. It starts from a hostile environment (ATen capability `default`, two OpenMP threads,
oneDNN at SSE4.1, MKL's `AUTO` branch) passed through `portable_environment`, as `nfnzoo generate`
does, and prints one Markdown row per processor model: what ATen and NumPy dispatch to there, and how
many of each generation's recorded checkpoint files it made bit for bit. `--mode native` is the
negative control: the native mode on an AVX2-only processor makes other bytes.

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
DISPATCH = ("import torch; from numpy._core._multiarray_umath import __cpu_features__ as f; "
            "print(torch.backends.cpu.get_cpu_capability(), "
            "'+'.join(k for k in ('AVX2', 'FMA3', 'AVX512F') if f.get(k)))")


def emulated(cpu: str, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["qemu-x86_64", "-cpu", cpu, sys.executable, *argv], env=env, capture_output=True,
                          text=True, cwd=ROOT)


def environment(mode: str) -> dict[str, str]:
    sys.path.insert(0, str(ROOT))
    from zoo.training.reproducibility import portable_environment

    hostile = {**os.environ, **HOSTILE}
    env = portable_environment(hostile) if mode == "portable" else {**os.environ, "OMP_NUM_THREADS": "1"}
    return {**env, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


def row(cpu: str, mode: str) -> str:
    env = environment(mode)
    dispatch = emulated(cpu, ["-c", DISPATCH], env)
    seen = dispatch.stdout.strip() if dispatch.returncode == 0 else f"failed: {dispatch.stderr.strip()[-200:]}"
    start = time.monotonic()
    done = emulated(cpu, [str(HERE / "portable_probe.py"), "--mode", mode], env)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        return f"| {cpu} | {mode} | {seen} | probe failed: {done.stderr.strip()[-300:]} | {seconds:.0f} |"
    found = json.loads(done.stdout)
    recorded = json.loads((HERE / "portable_bytes.json").read_text())["generations"]
    counts = []
    for generation, files in recorded.items():
        equal = sum(found.get(generation, {}).get(name) == digest for name, digest in files.items())
        counts.append(f"{generation.split('/')[0]} {generation.split('/')[-1]}: {equal}/{len(files)}")
    return f"| {cpu} | {mode} | {seen} | {'; '.join(counts)} | {seconds:.0f} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="append", default=None,
                        help="a QEMU processor model (default: Haswell and EPYC-Rome)")
    parser.add_argument("--mode", choices=("portable", "native"), default="portable")
    args = parser.parse_args()
    if shutil.which("qemu-x86_64") is None:
        print("portable_emulated: qemu-x86_64 is not installed (apt install qemu-user)", file=sys.stderr)
        return 2
    print("| processor model (QEMU) | mode | ATen / NumPy dispatch there | recorded checkpoint files made bit for bit "
          "| seconds |")
    print("|---|---|---|---|---|")
    for cpu in args.cpu or ["Haswell", "EPYC-Rome"]:
        print(row(cpu, args.mode), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
