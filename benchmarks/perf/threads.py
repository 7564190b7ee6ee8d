"""Benchmark: `bench run` and `bench check-model` at the default thread count and at each count, alone and loaded.

On a busy machine, torch's inherited one thread per CPU can make a `bench run` many times slower.
This measures what `benchmarks.threads` chooses against every fixed choice.

A tiny CNN zoo is trained without Ray and packed in a temporary folder. It is the bundled cnn-mnist
spec's `tiny` profile, shrunk as `tests/conftest.py` shrinks it, with `--zoo-runs` runs. Then each
command runs as a user runs it: a child `python -P -m zoo.cli ...`, whose wall time is measured.
The commands are `bench run --task generalization` and `bench check-model` (on `--spaces`). The
first runs 1 seed: the claims check on the zoo's spaces, then the training.

Each round runs every setting once, in turn, so that a noisy neighbour hurts them alike. The
settings are the default and `NFNZOO_THREADS=1..CPUs`. The default sets neither `NFNZOO_THREADS`
nor `OMP_NUM_THREADS`.

There are two phases. Alone runs beside whatever else the machine runs; the idle CPUs at its start
are printed. Loaded runs beside one busy-looping process per CPU. These start in a process group of
their own, and stop after the phase.

It prints each setting's best and median over `--rounds`. It prints the count the default chose:
the results' `hardware.threads`, and check-model's `threads:` line. Per phase and command, it
prints the default's best over the best fixed count's, against `TARGETS`. Nothing is written into
the repository.

Run: `python -m benchmarks.perf.threads`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from benchmarks.threads import VARIABLE, affinity_cpus, available_cpus, measure_idle, quota_cpus
from zoo.named_import import python_command

TARGETS = {"alone": 1.1, "loaded": 1.3}  # the most default / best may be: alone, and beside a load on every core


def make_zoo(folder: Path, runs: int) -> Path:
    """A packed tiny cnn-mnist zoo of `runs` sampled runs (3 checkpoints each), trained without Ray."""
    from zoo.dataset.pack import pack
    from zoo.planning.plan import plan_runs
    from zoo.planning.spec import load_spec, spec_from_data
    from zoo.storage.folder import STAGING_FOLDER, save_spec
    from zoo.storage.staging import Staging
    from zoo.training.worker import train_runs

    data = load_spec("cnn-mnist", "tiny").to_data()
    data["dataset"].update(train_size=1000, validation_size=500, test_size=500, eval_train_size=500)
    data["search_space"]["sampled"]["count"] = runs
    spec = spec_from_data(data, "benchmarks/perf/threads.py")
    save_spec(spec, folder)
    train_runs(spec, plan_runs(spec), Staging(folder / STAGING_FOLDER))
    pack(folder)
    return folder


# a process that forks into `count` processes (itself and count - 1 children), each spinning
_SPIN = ("import os, sys\nfor _ in range(int(sys.argv[1]) - 1):\n    if os.fork() == 0:\n        break\n"
         "while True:\n    pass\n")


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """`count` processes spinning on a core each, in one process group of their own, stopped on exit."""
    leader = subprocess.Popen([sys.executable, "-c", _SPIN, str(count)], start_new_session=True)
    try:
        time.sleep(1.0)  # every loop running before the first measurement
        yield
    finally:
        os.killpg(leader.pid, signal.SIGKILL)  # the group: the leader and the children it forked
        leader.wait()


def _environment(setting: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in (VARIABLE, "OMP_NUM_THREADS")}
    env.update(HF_HUB_OFFLINE="1", RAY_AUTH_MODE="disabled")
    if setting != "default":
        env[VARIABLE] = setting
    return env


def run_command(command: str, setting: str, zoo: Path, out: Path, args: argparse.Namespace) -> tuple[float, int]:
    """One command as a child at `setting`: its wall seconds and the thread count it reported."""
    if command == "bench run":
        argv = ["bench", "run", "--task", "generalization", "--model", args.model, "--data", str(zoo),
                "--seeds", "0", "--out", str(out / "results.json"), "--set", f"task.epochs={args.epochs}"]
    else:
        argv = ["bench", "check-model", args.model, "--seeds", "0", "--spaces", args.spaces]
    start = time.perf_counter()
    done = subprocess.run(python_command("-m", "zoo.cli", *argv), env=_environment(setting), capture_output=True,
                          text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command} at {setting} failed:\n{done.stderr[-2000:]}")
    if command == "bench run":
        threads = json.loads((out / "results.json").read_text())["hardware"]["threads"]
    else:
        threads = int(re.search(r"^threads: (\d+) torch thread", done.stdout, re.M).group(1))
    return seconds, threads


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="statnn", help="the model both commands run (default: statnn)")
    parser.add_argument("--zoo-runs", type=int, default=16, help="training runs of the zoo (3 checkpoints each)")
    parser.add_argument("--epochs", type=int, default=30, help="bench run's task.epochs (default: the task's 30)")
    parser.add_argument("--spaces", default="cnn-relu", help="check-model's spaces (default: cnn-relu)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of every setting per phase (default: 3)")
    parser.add_argument("--phases", default="alone,loaded")
    args = parser.parse_args(argv)
    from zoo.distributed.machine import describe_machine

    cpus = available_cpus(None, quota_cpus())
    settings = ["default", *(str(count) for count in range(1, cpus + 1))]
    commands = ("bench run", "check-model")
    machine = describe_machine()
    print(f"threads: {args.model}, bench run (generalization, 1 seed, {args.epochs} epochs, {args.zoo_runs * 3}-"
          f"checkpoint zoo) and check-model ({args.spaces}); {machine['cpu_model']}, {cpus} CPUs; best and median of "
          f"{args.rounds} rounds, wall seconds of the command (best: the least of the rounds)", flush=True)
    ratios = []
    with tempfile.TemporaryDirectory(prefix="nfnzoo-threads-") as scratch:
        zoo = make_zoo(Path(scratch) / "zoo", args.zoo_runs)
        for phase in args.phases.split(","):
            with busy_loops(cpus) if phase == "loaded" else contextlib.nullcontext():
                idle = measure_idle(affinity_cpus(), 1.0)
                times: dict[tuple[str, str], list[float]] = {}
                chosen: dict[str, set[int]] = {command: set() for command in commands}
                for _ in range(args.rounds):
                    for setting in settings:
                        for command in commands:
                            seconds, threads = run_command(command, setting, zoo, Path(scratch), args)
                            times.setdefault((command, setting), []).append(seconds)
                            if setting == "default":
                                chosen[command].add(threads)
            print(f"\n{phase} ({'none' if idle is None else f'{idle:.1f}'} of {cpus} CPUs idle at its start)")
            print(f"{'command':<13}{'setting':<10}{'threads':>8}{'best s':>8}{'median s':>10}{'/best':>8}")
            for command in commands:
                fastest = {setting: min(times[command, setting]) for setting in settings}
                best = min(fastest[setting] for setting in settings[1:])  # the best fixed count
                for setting in settings:
                    threads = ",".join(map(str, sorted(chosen[command]))) if setting == "default" else setting
                    print(f"{command:<13}{setting:<10}{threads:>8}{fastest[setting]:>8.1f}"
                          f"{statistics.median(times[command, setting]):>10.1f}{fastest[setting] / best:>7.2f}x",
                          flush=True)
                ratios.append((phase, command, fastest["default"] / best))
    print()
    for phase, command, ratio in ratios:
        target = TARGETS.get(phase)
        verdict = "" if target is None else f" (target <= {target}x: {'met' if ratio <= target else 'MISSED'})"
        print(f"default / best, {phase}, {command}: {ratio:.2f}x{verdict}")


if __name__ == "__main__":
    main()
