"""Benchmark: every registered NFN model's cost, and NP/HNP against the authors' `nfn` package.

It runs each model in the `nfn_models` registry at its preset, on random weights, with no training.
The fitted tree ensembles take no gradient steps and are left out. Each model runs on the weight
spaces it reads. These are the Small CNN zoo member (1-16-16-16-10 with 3x3 kernels) and the SIREN
2-32-32-1. The third is the Small Transformer Zoo's MNIST member, 2 blocks x 2 heads of width 32.

The pseudo-space `inr-tasks` (SIRENs) has a row `MODEL@PRESET` for every INR-task preset a model
has. These are the papers' `inr-classification`/`inr-editing`, and their `-budget` versions. An
editing row's step is the task's: the render of w + s * f(w)
(`benchmarks.tasks.inr_editing.EditedRender`). On the transformer space, the graph models that read
it are rows `MODEL@PRESET`. Their presets are the transformer-generalization suite's
(`benchmarks.suite.GRAPH_TRANSFORMER_MODELS`).

It prints four figures.

1. Trainable parameters.
2. Forward+backward time of a batch of `--batch` checkpoints, in train mode, with loss = mean
   squared output. It is the median of `--repeat`, after a warm-up step.
3. Evaluation throughput: checkpoints/s of a forward under `no_grad` in eval mode at
   `--eval-batch` (median of `--repeat`).
4. Peak memory of one forward+backward step at `--batch`, above what the process held before the
   model was built. It counts parameters, gradients, saved activations and temporaries.

On CUDA, peak memory is `torch.cuda.max_memory_allocated` minus the allocated bytes before, in this
process. On the CPU, torch's allocator keeps no statistics, and tracemalloc does not see it. So each
(space, model) is measured in fresh subprocesses on one thread. They run after the timing, several
side by side. After the imports and the input batch, with transparent huge pages off, the kernel's
peak-RSS mark is reset (`/proc/self/clear_refs`, "5"). The figure is the peak RSS afterwards minus
the RSS at the reset. It is the least of `--memory-repeat` processes. Heap fragmentation only ever
adds pages, and one process varies a little.

A fresh process matters. In a shared one, a later model would reuse heap pages an earlier one left
resident, and look smaller. Resetting matters too. Importing torch peaks above most models' whole
step, so `ru_maxrss` minus a baseline would read 0. Resident pages are counted, so the allocator's
granularity is included.

Beside `np` and `hnp` it measures the `nfn` package's equivalent stack. That is its
`NPLinear`/`HNPLinear` layers with `TupleOp` activations, its `NPPool`/`HNPPool`, and an MLP head of
the same widths. The head is our `mlp`, the same `nn.Linear` stack. `nfn.common.network_spec_from_wsfeat`
builds it from the same weights. It runs in the same run, interleaved with ours step by step, so
that a busy machine slows both alike. It prints ours/nfn for the training step's time, the
evaluation's time and the peak memory. `nfn` is the optional `nfn-reference` extra (in `dev`).
Without it the reference rows are left out.

Run: `make bench-nfn` or `python -m benchmarks.perf.nfn --models np,hnp --device cuda`."""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import json
import os
import statistics
import subprocess
import time
from typing import Callable

import torch
from torch import nn

import nfn_models
from benchmarks.suite import GRAPH_TRANSFORMER_MODELS
from nfn_models.features import NetworkDescription
from nfn_models.layers import ACTIVATIONS, mlp
from zoo.families import create_family
from zoo.named_import import python_command
from zoo.weightspace import WeightBatch, WeightSpace

# Weight-space name -> (zoo family, architecture overrides); {} is the family's default.
SPACES: dict[str, tuple[str, dict]] = {"cnn": ("cnn", {}), "siren": ("inr", {}), "transformer": ("transformer", {}),
                                       "inr-tasks": ("inr", {})}
INR_TASK_PRESETS = ("inr-classification-budget", "inr-classification", "inr-editing-budget", "inr-editing")
# Our model name -> the names of the `nfn` package's equivariant layer and pool it mirrors.
REFERENCES: dict[str, tuple[str, str]] = {"np": ("NPLinear", "NPPool"), "hnp": ("HNPLinear", "HNPPool")}
REFERENCE_PREFIX = "nfn:"  # a reference row is named e.g. "nfn:np"
PR_SET_THP_DISABLE = 41  # linux/prctl.h
WARMUP = 1  # the first call pays the allocator's and autograd's one-time setup
SEED = 0


def weight_space(space_name: str) -> WeightSpace:
    family, architecture = SPACES[space_name]
    return create_family(family).weight_space(architecture)


def random_weights(space: WeightSpace, batch: int, device: torch.device, seed: int = SEED) -> WeightBatch:
    generator = torch.Generator().manual_seed(seed)
    tensors = tuple(0.1 * torch.randn(batch, *spec.shape, generator=generator) for spec in space.tensors)
    return WeightBatch(space, tensors).to(device)


class NFNReference(nn.Module):
    """The `nfn` package's stack for one of our NP/HNP models' presets; takes a WeightBatch.

    The conversion to nfn's features runs inside `forward`, as ours does: a channel axis on every
    weight and bias, in layer order. So both are timed from the same input."""

    def __init__(self, model_name: str, space: WeightSpace):
        super().__init__()
        from nfn import common as nfn_common
        from nfn import layers as nfn_layers

        self.nfn_common = nfn_common
        self.description = NetworkDescription.from_weight_space(space)
        config = nfn_models.model_config(model_name)
        layer_name, pool_name = REFERENCES[model_name]
        layer_cls, pool_cls = getattr(nfn_layers, layer_name), getattr(nfn_layers, pool_name)
        probe = random_weights(space, 1, torch.device("cpu"))
        spec = nfn_common.network_spec_from_wsfeat(self._features(probe))
        blocks: list[nn.Module] = []
        width = 1
        for channels in config.channels:
            blocks += [layer_cls(spec, width, channels), nfn_layers.TupleOp(ACTIVATIONS[config.activation]())]
            width = channels
        pooled = pool_cls.get_num_outs(spec) * width
        self.stack = nn.Sequential(*blocks, pool_cls(spec), nn.Flatten(1),
                                   mlp(pooled, config.hidden_sizes, config.out_features, config.activation,
                                       config.dropout))

    def _features(self, weights: WeightBatch):
        tensors = dict(zip(weights.space.names, weights.tensors))
        return self.nfn_common.WeightSpaceFeatures(
            [tensors[layer.weight_name].unsqueeze(1) for layer in self.description.layers],
            [tensors[layer.bias_name].unsqueeze(1) for layer in self.description.layers])

    def forward(self, weights: WeightBatch) -> torch.Tensor:
        return self.stack(self._features(weights))  # (B, out_features)


def reference_available() -> bool:
    try:
        import nfn.layers  # noqa: F401 (only whether it imports)
    except ImportError:
        return False
    return True


def build(row_name: str, space: WeightSpace, device: torch.device) -> nn.Module:
    """Our model `row_name`, or the nfn stack for "nfn:<model>", with seeded parameters."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        if row_name.startswith(REFERENCE_PREFIX):
            model = NFNReference(row_name[len(REFERENCE_PREFIX):], space)
        elif "@" in row_name:  # an INR-task preset; an editing model is timed through the task's render
            name, preset = row_name.split("@", 1)
            model = nfn_models.create_model(name, space, preset=preset)
            if getattr(model.config, "output", "invariant") == "weights":
                from benchmarks.tasks.inr_editing import EditedRender
                from zoo.families.inr import INRArchitecture

                model = EditedRender(model, space, INRArchitecture(**SPACES["inr-tasks"][1]), delta_scale=0.01)
        else:
            model = nfn_models.create_model(row_name, space)
    return model.to(device)


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def training_step(model: nn.Module, weights: WeightBatch) -> None:
    model.train()
    model.zero_grad(set_to_none=True)
    model(weights).square().mean().backward()


def evaluation(model: nn.Module, weights: WeightBatch) -> None:
    model.eval()
    with torch.no_grad():
        model(weights)


def timed(function: Callable[[], None], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    function()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def median_times(models: dict[str, nn.Module], step, weights: WeightBatch, repeat: int,
                 device: torch.device) -> dict[str, float]:
    """Median seconds of `step(model, weights)` per model, the models interleaved per repeat."""
    for model in models.values():
        for _ in range(WARMUP):
            timed(lambda: step(model, weights), device)
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeat):
        for name, model in models.items():
            times[name].append(timed(lambda: step(model, weights), device))
    return {name: statistics.median(values) for name, values in times.items()}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def step_peak_bytes(row_name: str, space_name: str, batch: int, device: torch.device) -> int:
    """Peak bytes of one training step above the process before the model (see the docstring)."""
    space = weight_space(space_name)
    weights = random_weights(space, batch, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        training_step(build(row_name, space, device), weights)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    ctypes.CDLL(None).prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)  # count 4 KiB pages, never a 2 MiB one
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets the peak-RSS mark (VmHWM) to the current RSS
    before = _status_kb("VmRSS")
    training_step(build(row_name, space, device), weights)
    return (_status_kb("VmHWM") - before) * 1024


def peak_memory(row_name: str, space_name: str, batch: int, device: torch.device) -> int:
    """`step_peak_bytes`, in this process on CUDA, in one fresh subprocess on the CPU."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        return step_peak_bytes(row_name, space_name, batch, device)
    # One thread: with two, the OpenMP workers' own malloc arenas make the same step's peak
    # vary from run to run (docs/performance.md, NFN models).
    command = [*python_command("-m", "benchmarks.perf.nfn"), "--memory-of", f"{space_name}:{row_name}",
               "--batch", str(batch), "--threads", "1"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_bytes"]


def row_names(models: list[str], with_reference: bool) -> list[str]:
    names = []
    for name in models:
        names.append(name)
        if with_reference and name in REFERENCES:
            names.append(REFERENCE_PREFIX + name)
    return names


def measure_space(space_name: str, models: list[str], args, device: torch.device, with_reference: bool) -> list[dict]:
    """One row per model (and per nfn reference) on one weight space."""
    space = weight_space(space_name)
    kind = nfn_models.weight_space_kind(space)
    classes = {m: nfn_models.registry.MODELS.get(m) for m in models}
    models = [m for m, cls in classes.items()
              if nfn_models.trained_by(cls) == "gradient" and kind in getattr(cls, "weight_spaces", (kind,))]
    if space_name == "inr-tasks":
        names = [f"{m}@{preset}" for m in models for preset in INR_TASK_PRESETS if preset in nfn_models.list_presets(m)]
    elif kind == "transformer":  # the graph models at the suite's presets (GMN's mode, d 32: 523-node graphs)
        names = [f"{m}@{GRAPH_TRANSFORMER_MODELS[m]}" if m in GRAPH_TRANSFORMER_MODELS else m
                 for m in row_names(models, with_reference)]
    else:
        names = row_names(models, with_reference)
    built = {name: build(name, space, device) for name in names}
    train_times = median_times(built, training_step, random_weights(space, args.batch, device), args.repeat, device)
    eval_times = median_times(built, evaluation, random_weights(space, args.eval_batch, device), args.repeat, device)
    return [{"space": space_name, "model": name, "params": num_params(built[name]), "train_s": train_times[name],
             "eval_per_s": args.eval_batch / eval_times[name]} for name in names]


def add_peak_memory(rows: list[dict], args, device: torch.device) -> None:
    """Fills each row's "peak_bytes"; the CPU's subprocesses run side by side (after the timing)."""
    def measure(row: dict) -> int:
        return peak_memory(row["model"], row["space"], args.batch, device)

    repeat = 1 if device.type == "cuda" else args.memory_repeat  # CUDA's allocator counts exactly
    workers = 1 if device.type == "cuda" else max(1, os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        peaks = list(pool.map(measure, [row for row in rows for _ in range(repeat)]))
    for i, row in enumerate(rows):
        row["peak_bytes"] = min(peaks[i * repeat:(i + 1) * repeat])


def ratios(rows: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """(space, our model) -> ours/nfn of the training time, the evaluation time and the memory."""
    by_key = {(row["space"], row["model"]): row for row in rows}
    out = {}
    for (space, name), row in by_key.items():
        reference = by_key.get((space, REFERENCE_PREFIX + name))
        if reference is not None:
            out[space, name] = {"train": row["train_s"] / reference["train_s"],
                                "eval": reference["eval_per_s"] / row["eval_per_s"],
                                "memory": row["peak_bytes"] / max(reference["peak_bytes"], 1)}
    return out


def format_table(rows: list[dict], args) -> str:
    ratio = ratios(rows)
    header = (f"{'space':<13}{'model':<32}{'params':>11}{f'fwd+bwd ms (B={args.batch})':>22}"
              f"{f'eval ckpt/s (B={args.eval_batch})':>24}{'peak MB':>10}"
              f"{'train x nfn':>13}{'eval x nfn':>12}{'mem x nfn':>11}")
    lines = [header]
    for row in rows:
        r = ratio.get((row["space"], row["model"]))
        tail = f"{r['train']:>13.2f}{r['eval']:>12.2f}{r['memory']:>11.2f}" if r else f"{'':>13}{'':>12}{'':>11}"
        lines.append(f"{row['space']:<13}{row['model']:<32}{row['params']:>11,}{row['train_s'] * 1e3:>22.2f}"
                     f"{row['eval_per_s']:>24,.0f}{row['peak_bytes'] / 1e6:>10.1f}{tail}")
    return "\n".join(lines)


def profile_slower(rows: list[dict], args, device: torch.device, top: int = 12) -> None:
    """torch.profiler's top ops, ours and nfn's, where ours is slower (by time) or larger (by memory)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    by_time = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    by_memory = "self_cuda_memory_usage" if device.type == "cuda" else "self_cpu_memory_usage"
    for (space_name, name), r in ratios(rows).items():
        steps = [(label, function, batch, sort_by) for label, function, batch, sort_by, ratio in (
            ("training step", training_step, args.batch, by_time, r["train"]),
            ("evaluation", evaluation, args.eval_batch, by_time, r["eval"]),
            ("training step's memory", training_step, args.batch, by_memory, r["memory"])) if ratio > 1.0]
        space = weight_space(space_name)
        for row_name in (name, REFERENCE_PREFIX + name) if steps else ():
            model = build(row_name, space, device)
            for label, function, batch, sort_by in steps:
                weights = random_weights(space, batch, device)
                function(model, weights)  # warm-up
                with profile(activities=activities, profile_memory=True) as prof:
                    for _ in range(args.repeat):
                        function(model, weights)
                print(f"\n== {space_name} {row_name}: {label} at B={batch}, {args.repeat} steps, by {sort_by} ==")
                print(prof.key_averages().table(sort_by=sort_by, row_limit=top))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(nfn_models.list_models()),
                        help="comma-separated registered models (default: all)")
    parser.add_argument("--spaces", default=",".join(SPACES), help=f"comma-separated, from {sorted(SPACES)}")
    parser.add_argument("--batch", type=int, default=32, help="checkpoints per training step")
    parser.add_argument("--eval-batch", type=int, default=128, help="checkpoints per evaluation forward")
    parser.add_argument("--repeat", type=int, default=5, help="timed steps per model (the median is printed)")
    parser.add_argument("--memory-repeat", type=int, default=2,
                        help="fresh processes per CPU memory figure (the least is printed)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads")
    parser.add_argument("--no-reference", action="store_true", help="leave out the nfn package's rows")
    parser.add_argument("--profile", action="store_true",
                        help="print torch.profiler's top ops where ours is slower or larger than nfn's")
    parser.add_argument("--memory-of", default=None, help=argparse.SUPPRESS)  # SPACE:ROW, the subprocess's job
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    if args.memory_of is not None:
        space_name, row_name = args.memory_of.split(":", 1)
        print(json.dumps({"peak_bytes": step_peak_bytes(row_name, space_name, args.batch, device)}))
        return

    models = [m for m in args.models.split(",") if m]
    spaces = [s for s in args.spaces.split(",") if s]
    for name in models:
        nfn_models.model_config(name)  # raises on an unknown name, listing the valid ones
    unknown = sorted(set(spaces) - set(SPACES))
    if unknown:
        raise SystemExit(f"unknown weight space(s) {unknown}; choose from {sorted(SPACES)}")
    with_reference = not args.no_reference and reference_available()

    rows = [row for space_name in spaces for row in measure_space(space_name, models, args, device, with_reference)]
    add_peak_memory(rows, args, device)
    memory_kind = ("torch.cuda.max_memory_allocated" if device.type == "cuda"
                   else f"least peak RSS of {args.memory_repeat} fresh processes, from after the inputs")
    print(f"device {device}, torch threads {torch.get_num_threads()}, median of {args.repeat}; "
          f"peak MB: one training step at B={args.batch} ({memory_kind}); x nfn: ours / nfn's"
          + ("" if with_reference else "; nfn not installed: no reference rows"))
    print(format_table(rows, args))
    if args.profile:
        profile_slower(rows, args, device)


if __name__ == "__main__":
    main()
