"""Benchmark: time, peak memory and disk of each step from a published Small CNN Zoo to a benchmark result.

It writes a Small CNN Zoo in its published layout, with random weights. The layout is Unterthiner
et al. 2020's: `weights.npy`, `metrics.csv.gz` and `layout.csv`. It adds the NFN split file
`nfn_split.csv` of Zhou et al. 2023. The zoo has `--rows` checkpoints, nine steps a run. The
default is 270,000, the released zoo's size. It then runs each step in a child process of its own,
and measures it there.

`imports only`: Python with torch, Arrow and this package imported. This is the floor under every
step.

`import`: `nfnzoo import small-cnn-zoo` (`zoo.imports.small_cnn_zoo.import_zoo`). It records the
`nfn` split set and its papers' siblings.

`verify`: `nfnzoo verify` (`zoo.dataset.verify.verify`). It checks every shard's checksum and rows.

`load_split train`: `zoo.loader.load_split` of the zoo's own train split.

`load_split_set nfn`: `zoo.split_set_loader.load_split_set` of the `nfn` set, its shards only.

`datasets.load_dataset`: the Hub library's own loader of the config. It builds its Arrow cache.

`bench run own split / nfn set`: a one-epoch `bench run` of the generalization task with `--model`
(MLP or STATNN). It runs on the zoo's own split, and with `--set task.splits=nfn`.

Per step it reports four figures. The first is wall seconds. The second is peak RSS (`VmHWM`:
anonymous and mapped file pages). The third is peak anonymous memory (`RssAnon`, sampled every 10
ms): the rows a step holds, without the page cache. The fourth is the peak of a memory cgroup made
for the step, where one can be made. That is v1 `memory.max_usage_in_bytes` or v2 `memory.peak`.
The page cache the step reads or writes is charged there too. It also reports the disk the step
writes.

Each size of `--fractions` is its own zoo. The default is 10%, 25% and 100% of --rows.

Run: `python -m benchmarks.perf.full_size --rows 27000` for a quick run. Without `--rows` it runs
the full size: ~5.4 GB of weights. The source and the zoo take twice that on disk, and the Arrow
cache as much again."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from zoo.named_import import python_command

STEPS_OF_A_RUN = (0, 1, 2, 3, 20, 40, 60, 80, 86)  # the release's checkpoint steps
# the release's layout.csv: per layer bias then kernel, kernels in TensorFlow layout (HWIO, (in, out))
LAYOUT = [("sequential/conv2d/bias:0", (16,)), ("sequential/conv2d/kernel:0", (3, 3, 1, 16)),
          ("sequential/conv2d_1/bias:0", (16,)), ("sequential/conv2d_1/kernel:0", (3, 3, 16, 16)),
          ("sequential/conv2d_2/bias:0", (16,)), ("sequential/conv2d_2/kernel:0", (3, 3, 16, 16)),
          ("sequential/dense/bias:0", (10,)), ("sequential/dense/kernel:0", (16, 10))]
COLUMNS = sum(int(np.prod(shape)) for _, shape in LAYOUT)  # 4970
CHUNK_ROWS = 8192
STEP_NAMES = ("imports only", "import", "verify", "load_split train", "load_split_set nfn", "datasets.load_dataset",
              "bench run own split", "bench run nfn set")


def write_source(folder: Path, rows: int, seed: int = 0) -> int:
    """The published layout with random weights and metrics; returns the rows.

    `rows` is rounded to whole runs."""
    import pandas as pd

    runs = max(2, round(rows / len(STEPS_OF_A_RUN)))
    total = runs * len(STEPS_OF_A_RUN)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    weights = np.lib.format.open_memmap(folder / "weights.npy", mode="w+", dtype="<f4", shape=(total, COLUMNS))
    for low in range(0, total, CHUNK_ROWS):  # a chunk at a time: memory stays small at any --rows
        high = min(total, low + CHUNK_ROWS)
        weights[low:high] = rng.standard_normal((high - low, COLUMNS), dtype=np.float32) * 0.1
    weights.flush()
    del weights
    run = np.repeat(np.arange(runs), len(STEPS_OF_A_RUN))
    frame = pd.DataFrame({
        "config.activation": np.array(["relu", "tanh"])[run % 2], "config.b_init": "zeros",
        "config.dataset": "mnist", "config.dnn_architecture": "cnn", "config.dropout": rng.uniform(0, .7, runs)[run],
        "config.epochs": 86, "config.epochs_between_checkpoints": 20,
        "config.init_std": rng.uniform(1e-3, .5, runs)[run],
        "config.l2reg": rng.uniform(1e-8, 1e-2, runs)[run], "config.learning_rate": rng.uniform(5e-4, 5e-2, runs)[run],
        "config.num_layers": 3, "config.num_units": 16,
        "config.optimizer": np.array(["adam", "rmsprop", "sgd"])[run % 3],
        "config.random_seed": 42, "config.train_fraction": np.array([0.1, 0.25, 0.5, 1.0])[run % 4],
        "config.w_init": np.array(["he_normal", "glorot_normal", "RandomNormal"])[run % 3],
        "modeldir": [f"/cns/zoo/mnist/{r:06d}" for r in run], "step": np.tile(STEPS_OF_A_RUN, runs),
        "test_accuracy": rng.uniform(size=total), "test_loss": rng.uniform(0, 3, total),
        "train_accuracy": rng.uniform(size=total), "train_loss": rng.uniform(0, 3, total)})
    frame.to_csv(folder / "metrics.csv.gz", index=False, compression="gzip")
    position, lines = 0, ["varname,start_idx,end_idx,shape"]
    for name, shape in LAYOUT:
        lines.append(f'{name},{position},{position + int(np.prod(shape))},"{shape}"')
        position += int(np.prod(shape))
    (folder / "layout.csv").write_text("\n".join(lines) + "\n")
    # the NFN split file's form: a one-column frame written with its header "0", then a permutation
    (folder / "nfn_split.csv").write_text("0\n" + "\n".join(map(str, rng.permutation(total).tolist())) + "\n")
    return total


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) if Path(folder).exists() else 0


# --- a step, in its own process -------------------------------------------------------------------

def _status(key: str) -> int:
    """A /proc/self/status figure in bytes (kB in the file)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _run_step(step: str, source: Path, zoo_folder: Path, scratch: Path, model: str) -> dict:
    """Runs one step in this process.

    Returns what it wrote on disk, and a short check of its output."""
    if step == "imports only":  # the floor under every other step: Python, torch, Arrow and this package
        import benchmarks.harness  # noqa: F401 (timed: the import is the step)
        import zoo.loader  # noqa: F401 (timed: the import is the step)

        return {"disk": 0, "note": "the other steps' floor"}
    if step == "import":
        from zoo.imports.small_cnn_zoo import import_zoo

        from zoo.loader import split_entries
        from zoo.reader import SPLITS
        from zoo.split_set_loader import split_set_names

        import_zoo(source, zoo_folder)
        shards = sum(len(split_entries(zoo_folder, None, split)) for split in SPLITS)
        return {"disk": folder_bytes(zoo_folder), "note": f"{shards} shards, split sets {split_set_names(zoo_folder)}"}
    if step == "verify":
        from zoo.dataset.verify import verify

        report = verify(zoo_folder)
        if report.problems:
            raise SystemExit(f"verify: {report.problems[:3]}")
        return {"disk": 0, "note": "no problems"}
    if step == "load_split train":
        from zoo.loader import load_split

        return {"disk": 0, "note": f"{len(load_split(zoo_folder, None, 'train')):,} rows"}
    if step == "load_split_set nfn":
        from zoo.split_set_loader import load_split_set

        loaded = load_split_set(zoo_folder, None, "nfn")
        return {"disk": 0, "note": f"{sum(len(s) for s in loaded.values()):,} rows"}
    if step == "datasets.load_dataset":
        import datasets

        cache = scratch / "hf-cache"
        loaded = datasets.load_dataset(str(zoo_folder), cache_dir=str(cache))
        rows = sum(len(split) for split in loaded.values())
        return {"disk": folder_bytes(cache), "note": f"{rows:,} rows"}
    if step.startswith("bench run"):
        from benchmarks.harness import run_benchmark
        from benchmarks.run_options import Placement, RunOptions

        overrides = {"epochs": 1, **({"splits": "nfn"} if step.endswith("nfn set") else {})}
        out = scratch / "results.json"
        options = RunOptions([0], task_overrides=overrides, placement=Placement("cpu"), progress=False)
        results = run_benchmark("generalization", model, zoo_folder, None, options, out)
        return {"disk": folder_bytes(scratch) - folder_bytes(scratch / "hf-cache"),
                "note": f"kendall_tau {results['per_seed'][0]['metrics']['kendall_tau']:.3f}"}
    raise ValueError(f"unknown step {step!r}; expected one of {STEP_NAMES}")


def child(step: str, source: Path, zoo_folder: Path, scratch: Path, model: str) -> None:
    """The child's side: the step measured from inside, one JSON line on stdout."""
    peak_anon, done = [_status("RssAnon")], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak_anon[0] = max(peak_anon[0], _status("RssAnon"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    outcome = _run_step(step, source, zoo_folder, scratch, model)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    peak_anon[0] = max(peak_anon[0], _status("RssAnon"))
    print(json.dumps({"seconds": seconds, "peak_rss": _status("VmHWM"), "peak_anon": peak_anon[0], **outcome}))


# --- the driver -----------------------------------------------------------------------------------

def _cgroup(name: str) -> tuple[Path, str] | None:
    """A fresh memory cgroup below this process's, and the file of its peak usage.

    It uses cgroup v1's `memory` controller, else v2. None where none can be made: not root, or no
    writable hierarchy."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else ["unified"]:
            own[controller] = path.lstrip("/")
    for parent, peak in ((Path("/sys/fs/cgroup/memory") / own.get("memory", "-"), "memory.max_usage_in_bytes"),
                         (Path("/sys/fs/cgroup") / own.get("unified", "-"), "memory.peak")):
        try:
            (parent / name).mkdir()
        except OSError:
            continue
        if (parent / name / peak).exists():
            return parent / name, peak
        (parent / name).rmdir()
    return None


def measure(step: str, source: Path, zoo_folder: Path, scratch: Path, model: str) -> dict:
    """Runs `step` in a child process (inside a cgroup of its own where one can be made)."""
    made = _cgroup(f"nfnzoo-full-size-{os.getpid()}-{time.monotonic_ns()}")
    command = [*python_command("-m", "benchmarks.perf.full_size"), "--child", step, "--source", str(source),
               "--zoo", str(zoo_folder), "--scratch", str(scratch), "--model", model]

    def join() -> None:  # between fork and exec: the child's whole life is charged to the group
        if made is not None:
            (made[0] / "cgroup.procs").write_text(str(os.getpid()))

    try:
        done = subprocess.run(command, capture_output=True, text=True, preexec_fn=join)
        if done.returncode != 0:
            raise RuntimeError(f"step {step!r} failed:\n{done.stderr[-3000:]}")
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        measured["cgroup_peak"] = int((made[0] / made[1]).read_text().split()[0]) if made else None
        return measured
    finally:
        if made is not None:
            try:
                made[0].rmdir()
            except OSError:
                pass  # a process still leaving it; the folder is empty and harmless


def _gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**30:.2f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=270_000, help="checkpoints at 100%% (the released zoo: 270,000)")
    parser.add_argument("--fractions", default="0.1,0.25,1", help="sizes to run, as fractions of --rows")
    parser.add_argument("--model", default="mlp", choices=("mlp", "statnn"))
    parser.add_argument("--workdir", type=Path, default=None, help="where the zoos go (default: a temporary folder)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--source", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--zoo", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.source, args.zoo, args.scratch, args.model)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    fractions = [float(f) for f in args.fractions.split(",")]
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        lines = []
        for fraction in fractions:
            base = Path(workdir) / f"{fraction:g}"
            source, zoo_folder, scratch = base / "source", base / "zoo", base / "scratch"
            scratch.mkdir(parents=True)
            start = time.perf_counter()
            rows = write_source(source, int(args.rows * fraction))
            written = time.perf_counter() - start
            print(f"{rows:,} rows: source written in {written:.1f} s, {folder_bytes(source) / 2**30:.2f} GiB",
                  file=sys.stderr)
            for step in STEP_NAMES:
                m = measure(step, source, zoo_folder, scratch, args.model)
                print(f"  {step}: {m['seconds']:.1f} s, peak RSS {_gib(m['peak_rss'])} GiB", file=sys.stderr)
                lines.append(f"| {rows:,} | {step} | {m['seconds']:.1f} | {_gib(m['peak_rss'])} | "
                             f"{_gib(m['peak_anon'])} "
                             f"| {_gib(m['cgroup_peak'])} | {_gib(m['disk'])} | {m['note']} |")
            lines.append(f"| {rows:,} | (source, published layout) | {written:.1f} | | | | "
                         f"{_gib(folder_bytes(source))} | weights.npy "
                         f"{(source / 'weights.npy').stat().st_size / 2**30:.2f} GiB |")
            shutil.rmtree(base)
    print(f"Small CNN Zoo, random weights, one {args.model} epoch a bench run; torch threads: "
          f"{os.environ.get('OMP_NUM_THREADS', 'default')}; {os.cpu_count()} CPUs")
    print("| rows | step | seconds | peak RSS GiB | peak anon GiB | cgroup peak GiB | disk written GiB | check |")
    print("|---:|---|---:|---:|---:|---:|---:|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
