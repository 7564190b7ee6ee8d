"""Benchmark: what the portable reproducibility mode costs against the native paths, per family.

The settings of `zoo.training.reproducibility` are read when the libraries start, so each
measurement is a child process: the workload of `benchmarks.perf.generation` (the same
representative runs, as populations, one thread, `training.rng: torch-generator`) trained once in
the native environment and once in `portable_environment`, alternated `--repeats` times (native,
portable, native, ...) so that a noisy neighbour hurts both. It prints each family's checkpoints
per second in each mode (the best of the repeats) and the ratio native / portable, measured in this
one run. Run: `make bench-generation` (after the generation benchmark) or
`python -m benchmarks.perf.portable --families cnn --repeats 3`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

FAMILIES = ("cnn", "inr", "transformer")


def child(family: str, runs: int | None) -> dict:
    """One family's population training in this process (whatever mode its environment sets)."""
    import torch

    from benchmarks.perf.generation import measure

    torch.set_num_threads(1)
    found = measure(family, runs_count=runs, schemes=("torch-generator",), solo=False)
    return {"family": family, "checkpoints": found.checkpoints, "seconds": found.population_s,
            "aten": torch.backends.cpu.get_cpu_capability()}


def _run(family: str, runs: int | None, env: dict[str, str]) -> dict:
    argv = [sys.executable, "-m", "benchmarks.perf.portable", "--child", family, *(["--runs", str(runs)] if runs else [])]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{family}: the child failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--runs", type=int, default=None, help="runs per family (default: the generation workload's)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per mode, alternated (default: 2)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.runs)))
        return
    from zoo.distributed.machine import describe_machine
    from zoo.training.reproducibility import portable_environment, processor_problem

    problem = processor_problem()
    if problem is not None:
        raise SystemExit(problem)
    native = dict(os.environ)
    portable = portable_environment(os.environ)
    machine = describe_machine()
    print(f"portable mode against native, one thread, populations (training.rng torch-generator); "
          f"{machine['cpu_model']}, native ATen {machine['aten_isa']}, {args.repeats} alternated repeats, best of each")
    print(f"{'family':<12}{'ckpts':>7}{'native ck/s':>13}{'portable ck/s':>15}{'native/portable':>17}")
    for family in args.families.split(","):
        best: dict[str, float] = {}
        for _ in range(args.repeats):
            for mode, env in (("native", native), ("portable", portable)):
                found = _run(family, args.runs, env)
                best[mode] = max(best.get(mode, 0.0), found["checkpoints"] / found["seconds"])
        print(f"{family:<12}{found['checkpoints']:>7}{best['native']:>13.2f}{best['portable']:>15.2f}"
              f"{best['native'] / best['portable']:>16.2f}x", flush=True)


if __name__ == "__main__":
    main()
