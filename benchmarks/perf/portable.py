"""Benchmark: what the portable reproducibility mode costs against the native paths, per family.

The settings of `zoo.training.reproducibility` are read when the libraries start. So each
measurement is a child process. It trains the workload of `benchmarks.perf.generation`: the same
representative runs, as populations, on one thread, with `training.rng: torch-generator`. It runs
once in the native environment and once in `portable_environment`. They alternate `--repeats`
times (native, portable, native, ...), so that a noisy neighbour hurts both. It prints each
family's checkpoints per second in each mode, the best of the repeats. It prints the ratio
native / portable, measured in this one run.

Run: `make bench-generation` (after the generation benchmark) or
`python -m benchmarks.perf.portable --families cnn --repeats 3`.

`--each` adds one row per part of the mode, each alone on the native paths. A part is one
environment setting, or the spec's IEEE square root in the optimizers. So what costs what is
measured in the same run."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from zoo.named_import import python_command

FAMILIES = ("cnn", "inr", "transformer")


# The mode's parts, each measurable alone: environment settings (PORTABLE_ENV's keys) and the spec's mode.
PARTS = {"ATen avx2": ("ATEN_CPU_CAPABILITY",), "MKL COMPATIBLE": ("MKL_CBWR",),
         "oneDNN AVX2": ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"), "NumPy X86_V3": ("NPY_ENABLE_CPU_FEATURES",),
         "IEEE sqrt": ()}


def child(family: str, runs: int | None, reproducibility: str) -> dict:
    """One family's population training in this process (its environment's settings, the spec's mode)."""
    import torch

    from benchmarks.perf.generation import measure

    torch.set_num_threads(1)
    found = measure(family, runs_count=runs, schemes=("torch-generator",), solo=False, reproducibility=reproducibility)
    return {"family": family, "checkpoints": found.checkpoints, "seconds": found.population_s,
            "reproducibility": found.reproducibility,
            "aten": torch.backends.cpu.get_cpu_capability()}


def _run(family: str, runs: int | None, env: dict[str, str], reproducibility: str) -> dict:
    argv = [*python_command("-m", "benchmarks.perf.portable"), "--child", family, "--reproducibility", reproducibility,
            *(["--runs", str(runs)] if runs else [])]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{family}: the child failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--runs", type=int, default=None, help="runs per family (default: the generation workload's)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per mode, alternated (default: 2)")
    parser.add_argument("--each", action="store_true", help="also each part of the mode alone on the native paths")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--reproducibility", default="native", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.runs, args.reproducibility)))
        return
    from zoo.distributed.machine import describe_machine
    from zoo.training.reproducibility import PORTABLE_ENV, portable_environment, processor_problem

    problem = processor_problem()
    if problem is not None:
        raise SystemExit(problem)
    native = dict(os.environ)
    modes = {"native": (native, "native"), "portable": (portable_environment(os.environ), "portable")}
    if args.each:  # each part alone: the native environment with one setting, or the spec's square root
        modes.update({part: ({**native, **{key: PORTABLE_ENV[key] for key in keys}}, "native" if keys else "portable")
                      for part, keys in PARTS.items()})
    machine = describe_machine()
    print(f"portable mode against native, one thread, populations (training.rng torch-generator); "
          f"{machine['cpu_model']}, native ATen {machine['aten_isa']}, {args.repeats} alternated repeats, best of each")
    print(f"{'family':<12}{'mode':<16}{'ckpts':>7}{'ck/s':>9}{'native/mode':>13}")
    for family in args.families.split(","):
        best: dict[str, float] = {}
        for _ in range(args.repeats):
            for mode, (env, reproducibility) in modes.items():
                found = _run(family, args.runs, env, reproducibility)
                best[mode] = max(best.get(mode, 0.0), found["checkpoints"] / found["seconds"])
        for mode in modes:
            print(f"{family:<12}{mode:<16}{found['checkpoints']:>7}{best[mode]:>9.2f}"
                  f"{best['native'] / best[mode]:>12.2f}x", flush=True)


if __name__ == "__main__":
    main()
