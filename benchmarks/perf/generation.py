"""Benchmark: training zoo members one at a time vs as populations, against a matrix product.

For each family it trains the same runs, in the same process, on one thread (as a Ray
trial does): (a) one at a time with the family's plain PyTorch loop (`train_run`, the way the
reference zoos were trained), (b) as populations (`train_population`). It prints checkpoints
per second for both, their ratio, the achieved training FLOP/s (the family's own FLOP count
of the work, `run_flops`) and that as a fraction of the FLOP/s of a large float32 matrix
product measured in the same run. Run: `make bench-generation` or
`python -m benchmarks.perf.generation --families cnn`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import time
from pathlib import Path

import torch

from zoo.estimate import THROUGHPUT_FILE
from zoo.families import create_family, list_families
from zoo.plan import plan_runs
from zoo.schema import to_data
from zoo.spec import load_spec, spec_from_data

# Per family: the spec and profile to draw runs from, how many runs, and spec overrides that
# keep one measurement to tens of seconds on two cores.
WORKLOADS = {
    "cnn": ("cnn-mnist", "demo", 24, {"training": {"epochs": 2, "checkpoint_epochs": [2]}}),
    "inr": ("inr-mnist", "tiny", 64, {}),
    "transformer": ("transformer-mnist", "tiny", 16, {}),
}


def matmul_flops(size: int = 2048, repeat: int = 3) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeat))
    return 2 * size ** 3 / best


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _merge(base: dict, override: dict) -> dict:
    for key, value in override.items():
        base[key] = _merge(base.get(key, {}), value) if isinstance(value, dict) else value
    return base


@dataclasses.dataclass
class Measurement:
    family: str
    runs: int
    checkpoints: int
    solo_s: float
    population_s: float
    flops: float

    def row(self, peak: float) -> str:
        solo_rate, pop_rate = self.checkpoints / self.solo_s, self.checkpoints / self.population_s
        return (f"{self.family:<12}{self.runs:>6}{self.checkpoints:>8}{solo_rate:>12.2f}{pop_rate:>12.2f}"
                f"{self.solo_s / self.population_s:>8.2f}x{self.flops / self.solo_s / 1e9:>10.2f}"
                f"{self.flops / self.population_s / 1e9:>10.2f}{self.flops / self.population_s / peak:>9.2f}")


def measure(name: str) -> Measurement:
    spec_name, profile, count, overrides = WORKLOADS[name]
    spec = spec_from_data(_merge(to_data(load_spec(spec_name, profile)), overrides))
    family = create_family(name)
    runs = plan_runs(spec)[:count]
    data = family.load_data(spec)
    checkpoints = []
    solo = _timed(lambda: [family.train_run(spec, run, data, checkpoints.append) for run in runs])
    together = []
    population = _timed(lambda: family.train_population(spec, runs, data, lambda run, r: together.append(r)))
    assert len(checkpoints) == len(together), "both modes must produce every checkpoint"
    return Measurement(name, len(runs), len(together), solo, population,
                       sum(family.run_flops(spec, run.hparams) for run in runs))


# Hyperparameters every member of a memory measurement shares, so that all K form one population.
SHARED = {"cnn": {"optimizer": "adam", "train_fraction": 0.5}, "inr": {}}


def _peak_memory(name: str, size: int, queue) -> None:
    """In a fresh process: RSS after loading the data, and the peak while training one population."""
    import resource

    torch.set_num_threads(1)
    spec_name, profile, _, overrides = WORKLOADS[name]
    spec = spec_from_data(_merge(to_data(load_spec(spec_name, profile)), overrides))
    family = create_family(name)
    family.population_size = size
    data = family.load_data(spec)
    runs = [dataclasses.replace(run, hparams={**run.hparams, **SHARED[name]}) for run in plan_runs(spec)]
    runs = (runs * (size // len(runs) + 1))[:size]  # repeats are fine: memory depends on K, not on the runs
    with open("/proc/self/statm") as statm:  # resident pages now (ru_maxrss would include the load's peak)
        baseline = int(statm.read().split()[1]) * resource.getpagesize() / 2**20
    family.train_population(spec, runs, data, lambda run, result: None)
    queue.put((baseline, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def memory_table(families: list[str], sizes: tuple[int, ...] = (1, 16, 64)) -> None:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    print(f"{'family':<12}{'K':>5}{'after data (MB)':>18}{'peak (MB)':>12}{'peak-data (MB)':>15}")
    for name in families:
        for size in sizes:
            queue = context.Queue()
            process = context.Process(target=_peak_memory, args=(name, size, queue))
            process.start()
            baseline, peak = queue.get()
            process.join()
            print(f"{name:<12}{size:>5}{baseline:>18.0f}{peak:>12.0f}{peak - baseline:>15.0f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(f for f in WORKLOADS if f in list_families()))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a Ray trial uses one)")
    parser.add_argument("--save", action="store_true",
                        help="record the population throughput for `nfnzoo generate --dry-run` (zoo/throughput.json)")
    parser.add_argument("--memory", action="store_true",
                        help="instead: peak memory of one worker training a population of K (1, 16, 64)")
    args = parser.parse_args(argv)
    if args.memory:
        memory_table([f for f in args.families.split(",") if f in SHARED])
        return
    torch.set_num_threads(args.threads)
    peak = matmul_flops()
    rows = [measure(name) for name in args.families.split(",")]
    peak = max(peak, matmul_flops())  # measured before and after, against drift
    print(f"float32 matrix product (2048^2, {args.threads} thread(s)): {peak / 1e9:.1f} GFLOP/s")
    print(f"{'family':<12}{'runs':>6}{'ckpts':>8}{'solo ck/s':>12}{'pop ck/s':>12}{'ratio':>9}"
          f"{'solo GF/s':>10}{'pop GF/s':>10}{'x matmul':>9}")
    for row in rows:
        print(row.row(peak))
    if args.save:
        save_throughput(rows, "cuda" if torch.cuda.is_available() else "cpu")


def save_throughput(rows: list[Measurement], device: str, path: Path = THROUGHPUT_FILE) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    today = datetime.date.today().isoformat()
    for row in rows:
        data.setdefault(device, {})[row.family] = {"flops_per_second": row.flops / row.population_s, "measured": today}
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"saved the population throughput of {[r.family for r in rows]} on {device} to {path}")


if __name__ == "__main__":
    main()
