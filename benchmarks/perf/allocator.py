"""Benchmark: a CPU training step with glibc's default malloc against `keep_freed_memory`.

A benchmark job calls `benchmarks.memory.keep_freed_memory()` before it starts. Then glibc serves
every block from its heap, and keeps freed blocks for the next tensor. Otherwise it maps each large
block afresh, pays its page faults again, and unmaps it when freed. This measures what that buys,
and what it costs in peak memory.

It runs the models whose steps allocate the most: the graph metanetworks, at the presets the suites
run them at. Rows are `benchmarks.perf.nfn`'s, `MODEL@PRESET`. By default they are NG-GNN and GMN
on the transformer member's 523-node neural graphs, and NG-GNN on the Small CNN.

Each round runs every row once in a fresh process per setting. Settings alternate, so that a busy
machine slows both alike. A process times `--steps` training steps after one warm-up, and takes
the median. It reports its peak resident set. The benchmark prints each row's medians over
`--rounds`, and the ratios kept / default.

Run: `python -m benchmarks.perf.allocator --rounds 2 --threads 1`."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
from zoo.named_import import python_command

ROWS = ("transformer:ng_gnn@generalization-budget", "transformer:scalegmn@transformer-generalization-budget",
        "cnn:ng_gnn@generalization-budget")
SETTINGS = ("default", "kept")


def parse_row(row: str) -> tuple[str, str, str]:
    """"SPACE:MODEL@PRESET" -> (space, model, preset), or SystemExit naming the row."""
    from benchmarks.perf.nfn import SPACES

    space_name, _, model_name = row.partition(":")
    name, _, preset = model_name.partition("@")
    if space_name not in SPACES or not name or not preset:
        raise SystemExit(f"row {row!r}: expected SPACE:MODEL@PRESET with SPACE one of {sorted(SPACES)}")
    return space_name, name, preset


def measure(row: str, setting: str, batch: int, steps: int) -> dict:
    """This process's median step and peak RSS for `row` ("SPACE:MODEL@PRESET") under `setting`."""
    from benchmarks.memory import keep_freed_memory, peak_mb, reset_peak
    from benchmarks.perf.nfn import random_weights, training_step, weight_space
    import nfn_models

    if setting == "kept" and not keep_freed_memory():
        raise SystemExit("keep_freed_memory() needs glibc")
    space_name, name, preset = parse_row(row)
    space = weight_space(space_name)
    torch.manual_seed(0)
    model = nfn_models.create_model(name, space, preset=preset)
    weights = random_weights(space, batch, torch.device("cpu"))
    reset_peak()
    training_step(model, weights)  # warm-up
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        training_step(model, weights)
        times.append(time.perf_counter() - start)
    return {"step_s": statistics.median(times), "peak_mb": peak_mb()}


def run_fresh(row: str, setting: str, args) -> dict:
    command = [*python_command("-m", "benchmarks.perf.allocator"), "--measure", f"{row}|{setting}",
               "--batch", str(args.batch), "--steps", str(args.steps), "--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated SPACE:MODEL@PRESET")
    parser.add_argument("--batch", type=int, default=16, help="checkpoints per training step")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per process (the median)")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per row and setting")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # ROW|SETTING: the subprocess's job
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.measure is not None:
        row, setting = args.measure.rsplit("|", 1)
        print(json.dumps(measure(row, setting, args.batch, args.steps)))
        return
    rows = [row for row in args.rows.split(",") if row]
    for row in rows:
        parse_row(row)
    results = {(row, setting): [] for row in rows for setting in SETTINGS}
    for round_index in range(args.rounds):
        for row in rows:
            for setting in SETTINGS:
                results[row, setting].append(run_fresh(row, setting, args))
                print(f"round {round_index + 1}/{args.rounds} {row} {setting}: {results[row, setting][-1]}",
                      file=sys.stderr, flush=True)
    print(f"torch threads {args.threads}, B={args.batch}, median step of {args.steps} per process, "
          f"medians over {args.rounds} process(es) per setting")
    print("| row | default step (s) | kept step (s) | kept / default | default peak MB | kept peak MB | "
          "kept / default |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        default, kept = ({key: statistics.median(r[key] for r in results[row, setting])
                          for key in ("step_s", "peak_mb")}
                         for setting in SETTINGS)
        print(f"| {row} | {default['step_s']:.3g} | {kept['step_s']:.3g} | {kept['step_s'] / default['step_s']:.2f}x "
              f"| {default['peak_mb']:,.0f} | {kept['peak_mb']:,.0f} | {kept['peak_mb'] / default['peak_mb']:.2f}x |")


if __name__ == "__main__":
    main()
