"""Benchmark: training zoo members one at a time vs as populations, against a matrix product.

For each family it trains the same runs, in the same process, on one thread, as a Ray trial does.
It trains them three ways.

(a) One at a time, with the family's plain PyTorch loop (`train_run`). The reference zoos were
trained this way.
(b) As populations (`train_population`), with the per-member generators
(`training.rng: torch-generator`, every bundled spec).
(c) As populations, with counter-v1 draws (`zoo.training.draws`).

It prints checkpoints per second for each, and the ratios. It prints the achieved training FLOP/s,
by the family's own FLOP count of the work (`run_flops`). It sets that beside the FLOP/s of a large
float32 matrix product, measured in the same run. `--hotspots N` also prints each population mode's
top N functions by own time (cProfile).

Run: `make bench-generation` or `python -m benchmarks.perf.generation --families cnn`."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import time
from pathlib import Path

import torch

from zoo.training.device import exact_float32, to_device, training_device
from zoo.planning.estimate import THROUGHPUT_FILE
from zoo.families import create_family, list_families
from zoo.planning.plan import plan_runs
from zoo.training.population import populations
from zoo.validation.schema import to_data
from zoo.planning.spec import load_spec, spec_from_data

CPU = torch.device("cpu")

# Per family: the spec and profile to draw runs from, how many runs, and spec overrides that
# keep one measurement short on a small CPU. The runs are whole populations as the driver packs
# them (`representative_runs`). The CNN's come from 3,000 runs sampled as the full spec samples
# them (all optimizers, activations, dropout rates), on the demo's data.
WORKLOADS = {
    "cnn": ("cnn-mnist", "demo", 32, {"training": {"epochs": 3, "checkpoint_epochs": [3]},
                                      "search_space": {"sampled": {"count": 3000,
                                                                   "axes": {"dropout": {"uniform": [0.0, 0.7]}}}}}),
    "inr": ("inr-mnist", "demo", 128, {"training": {"epochs": 200, "checkpoint_epochs": [100, 200]}}),
    "transformer": ("transformer-mnist", None, 32, {
        "dataset": {"train_size": 2000, "validation_size": 500, "test_size": 1000, "eval_train_size": 500},
        "search_space": {"fixed": {"warmup_epochs": 1}},
        "training": {"epochs": 2, "checkpoint_epochs": [2], "keep_best": False}}),
}


def representative_runs(family, runs: list, count: int, size: int) -> list:
    """`count` runs as whole populations of `size`, as the driver packs them.

    Runs are sorted by the family's population key, then cut. They are taken at evenly spaced places
    of that order. So they span the keys: optimizers, train fractions, activations."""
    packed = populations(sorted(runs, key=family.population_key), size, family.population_key)
    full = [population for population in packed if len(population) == size] or packed
    wanted = max(1, count // size)
    chosen = [full[i * len(full) // wanted] for i in range(min(wanted, len(full)))]
    return [run for population in chosen for run in population][:count]


def matmul_flops(size: int = 2048, repeat: int = 3, device: torch.device = CPU) -> float:
    """FLOP/s of a float32 matrix product (on CUDA: 8192^2, TF32 off, as training runs)."""
    if device.type == "cuda":
        size = max(size, 8192)
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    a @ b
    best = min(_timed(lambda: a @ b, device) for _ in range(repeat))
    return 2 * size ** 3 / best


def _timed(function, device: torch.device = CPU) -> float:
    _synchronize(device)
    start = time.perf_counter()
    function()
    _synchronize(device)
    return time.perf_counter() - start


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _merge(base: dict, override: dict) -> dict:
    for key, value in override.items():
        base[key] = _merge(base.get(key, {}), value) if isinstance(value, dict) else value
    return base


@dataclasses.dataclass
class Measurement:
    family: str
    runs: int
    checkpoints: int
    solo_s: float | None  # None: not measured (on a GPU only the populations are timed)
    population_s: float | None  # populations, training.rng: torch-generator (None: not timed)
    counter_s: float | None  # populations, training.rng: counter-v1 (None: not timed)
    flops: float
    reproducibility: str = "native"  # the trained spec's training.reproducibility

    HEADER = (f"{'family':<12}{'runs':>6}{'ckpts':>8}{'solo ck/s':>11}{'pop ck/s':>10}{'pop/solo':>9}"
              f"{'ctr ck/s':>10}{'ctr/pop':>9}{'solo x mm':>10}{'pop x mm':>10}{'ctr x mm':>10}")

    def row(self, peak: float) -> str:
        def cell(value: float | None, width: int, form: str) -> str:
            return f"{'-':>{width}}" if value is None else f"{value:>{width}{form}}"

        def ratio(numerator: float | None, denominator: float | None) -> str:
            return f"{'-':>9}" if None in (numerator, denominator) else f"{numerator / denominator:>8.2f}x"

        def rate(seconds: float | None) -> float | None:
            return None if seconds is None else self.checkpoints / seconds

        def share(seconds: float | None) -> float | None:
            return None if seconds is None else self.flops / seconds / peak

        return (f"{self.family:<12}{self.runs:>6}{self.checkpoints:>8}{cell(rate(self.solo_s), 11, '.2f')}"
                f"{cell(rate(self.population_s), 10, '.2f')}{ratio(self.solo_s, self.population_s)}"
                f"{cell(rate(self.counter_s), 10, '.2f')}{ratio(self.population_s, self.counter_s)}"
                f"{cell(share(self.solo_s), 10, '.3f')}{cell(share(self.population_s), 10, '.3f')}"
                f"{cell(share(self.counter_s), 10, '.3f')}")


def with_rng(spec, rng: str):
    """The spec with `training.rng` replaced (the runs keep their hyperparameters and seeds)."""
    return dataclasses.replace(spec, training=dataclasses.replace(spec.training, rng=rng))


def hotspots(function, top: int) -> str:
    """cProfile's top `top` functions by own time while `function` runs."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(function)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return "\n".join(line for line in text.getvalue().splitlines() if line.strip())


SCHEMES = ("torch-generator", "counter-v1")


def measure(name: str, device: torch.device = CPU, runs_count: int | None = None,
            population_size: int | None = None, profile: str | None = None, top: int = 0,
            schemes: tuple[str, ...] = SCHEMES, solo: bool = True, reproducibility: str | None = None) -> Measurement:
    """Times the workload's runs one at a time, and as populations on `device`, with each draw scheme.

    The one-at-a-time runs are CPU only, unless `solo` is False. `profile` replaces the workload's;
    "full" is the spec without a profile. `reproducibility` sets the spec's
    `training.reproducibility`. That is what the spec itself changes in training: the optimizers'
    square root. The environment is the caller's. With `top` > 0 it prints each population mode's
    hotspots."""
    spec_name, default_profile, count, overrides = WORKLOADS[name]
    profile = default_profile if profile is None else (None if profile == "full" else profile)
    data = _merge(to_data(load_spec(spec_name, profile)), overrides)
    if reproducibility is not None:
        data["training"]["reproducibility"] = reproducibility
    spec = spec_from_data(data)
    family = create_family(name, population_size=population_size)
    runs = representative_runs(family, plan_runs(spec), runs_count or count, family.population_size_on(device))
    data = family.load_data(spec)
    checkpoints: list = []
    solo_s = (_timed(lambda: [family.train_run(spec, run, data, checkpoints.append) for run in runs])
              if device.type == "cpu" and solo else None)
    placed = to_device(data, device)
    seconds, produced = {}, {}
    for scheme in schemes:
        scheme_spec, results = with_rng(spec, scheme), []
        seconds[scheme] = _timed(lambda: family.train_population(scheme_spec, runs, placed,
                                                                 lambda run, r: results.append(r)), device)
        produced[scheme] = len(results)
    if solo_s is not None:
        produced["one at a time"] = len(checkpoints)
    assert len(set(produced.values())) == 1, f"every mode must produce every checkpoint: {produced}"
    for scheme in schemes if top else ():
        print(f"--- {name} population, training.rng: {scheme}: top {top} by own time")
        print(hotspots(lambda: family.train_population(with_rng(spec, scheme), runs, placed, lambda run, r: None), top))
    return Measurement(name, len(runs), next(iter(produced.values())), solo_s, seconds.get("torch-generator"),
                       seconds.get("counter-v1"), sum(family.run_flops(spec, run.hparams) for run in runs),
                       spec.training.reproducibility)


# Hyperparameters every member of a memory measurement shares, so that all K form one population.
SHARED = {"cnn": {"optimizer": "adam", "train_fraction": 0.5, "activation": "relu"}, "inr": {},
          "transformer": {"optimizer": "adam", "train_fraction": 1.0}}


def _peak_memory(name: str, size: int, queue) -> None:
    """In a fresh process: RSS after loading the data, and the peak while training one population."""
    import resource

    torch.set_num_threads(1)
    spec_name, profile, _, overrides = WORKLOADS[name]
    spec = spec_from_data(_merge(to_data(load_spec(spec_name, profile)), overrides))
    family = create_family(name, population_size=size)
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
    parser.add_argument("--device", default=None,
                        help="where the populations train (default: $NFNZOO_DEVICE, else CUDA when available); "
                             "the one-at-a-time loop is timed on the CPU only")
    parser.add_argument("--runs", type=int, default=None, help="runs per family (default: the workload's)")
    parser.add_argument("--profile", default=None,
                        help="spec profile to draw the runs from (default: the workload's; 'full': the whole spec)")
    parser.add_argument("--population-size", type=int, default=None,
                        help="members per population (default: the family's)")
    parser.add_argument("--hotspots", type=int, default=0, metavar="N",
                        help="also print each population mode's top N functions by own time (cProfile)")
    parser.add_argument("--rng", default=",".join(SCHEMES),
                        help="the draw schemes whose populations are timed (default: both)")
    parser.add_argument("--save", action="store_true",
                        help="record the population throughput for `nfnzoo generate --dry-run` (zoo/throughput.json)")
    parser.add_argument("--memory", action="store_true",
                        help="instead: peak memory of one worker training a population of K (1, 16, 64)")
    args = parser.parse_args(argv)
    if args.memory:
        memory_table([f for f in args.families.split(",") if f in SHARED])
        return
    torch.set_num_threads(args.threads)
    device = training_device(args.device)
    exact_float32()
    peak = matmul_flops(device=device)
    schemes = tuple(args.rng.split(","))
    rows = [measure(name, device, args.runs, args.population_size, args.profile, args.hotspots, schemes)
            for name in args.families.split(",")]
    peak = max(peak, matmul_flops(device=device))  # measured before and after, against drift
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{cpu_name()}, {args.threads} thread(s)"
    print(f"float32 matrix product ({where}): {peak / 1e9:.1f} GFLOP/s")
    print(Measurement.HEADER)
    for row in rows:
        print(row.row(peak))
    if args.save:
        save_throughput(rows, device.type, where)


def cpu_name() -> str:
    """The CPU's model name and its widest vector unit torch uses, e.g. "AMD EPYC (AVX2)"."""
    import platform

    name = platform.processor() or "CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            name = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), name)
    except OSError:
        pass
    return f"{name} ({torch.backends.cpu.get_cpu_capability()})"


def save_throughput(rows: list[Measurement], device: str, where: str, path: Path = THROUGHPUT_FILE) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    today = datetime.date.today().isoformat()
    for row in rows:  # the faster scheme's rate: a paper-scale generation would use it
        seconds, rng = min((s, rng) for s, rng in ((row.population_s, "torch-generator"), (row.counter_s, "counter-v1"))
                           if s is not None)
        data.setdefault(device, {})[row.family] = {"flops_per_second": row.flops / seconds, "where": where,
                                                   "rng": rng, "measured": today}
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"saved the population throughput of {[r.family for r in rows]} on {device} to {path}")


if __name__ == "__main__":
    main()
