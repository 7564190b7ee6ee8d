"""Benchmark: decoding a packed split into stacked per-layer tensors, against memcpy.

It writes a split of N random Small-CNN checkpoints with the packer's own shard writer. It warms
the page cache. Then it measures, in one run, best of `--repeat`:

`memcpy`: `numpy.copyto` of a buffer the size of the split's weights, pre-faulted.

`nfnzoo`: Parquet read (memory-mapped) + `zoo.loader.decode_weights` into (N, *shape) tensors.

`nfnzoo checked, one pass`: what `load_split` and every benchmark load runs. Each shard's
xxh3-128 is computed in the same pass that copies its pages, ~2 MiB at a time
(`read_weights(..., checksums=...)`).

`nfnzoo checked first`: every shard's xxh3-128 checked before the read (`check_shards`, two
threads). This is what a reader without the fused path does. The same runs with sha256, as
`verify --full` and `publish` check it.

`per-row safetensors`: `safetensors.torch.load` of each row's bytes, then `torch.stack`.

`per-file torch.load`: one `.pt` file per checkpoint, as the reference zoos ship them.

Throughput is bytes of weights column per second. Each is printed as a ratio to memcpy.

Run: `make bench-loading` or `python -m benchmarks.perf.loading --rows 20000`."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import safetensors.torch
import torch

from zoo.families import create_family
from zoo.training.train import CLASSIFICATION_METRICS as METRIC_NAMES
from zoo.storage.integrity import check_shards, file_checksums
from zoo.loader import read_weights
from zoo.dataset.pack import write_shard
from zoo.storage.record import CheckpointRecord, arrow_schema, to_row

ARCHITECTURE = {"in_channels": 1, "channels": 16, "num_conv_layers": 3, "kernel_size": 3, "stride": 2,
                "num_classes": 10}
HPARAMS = {"optimizer": "adam", "learning_rate": 1e-3, "l2": 0.0, "init": "normal", "init_std": 0.1,
           "activation": "relu", "dropout": 0.0, "train_fraction": 1.0}


def build_split(folder: Path, rows: int, seed: int = 0) -> tuple[list[Path], int]:
    """Writes `rows` random checkpoints as shards of ~64 MiB; returns the paths and the row size."""
    family = create_family("cnn")
    shapes = {name: t.shape for name, t in family.build(ARCHITECTURE).state_dict().items()}
    generator = torch.Generator().manual_seed(seed)
    schema = arrow_schema(family.HParams, family.METRICS)
    paths, batch, row_bytes = [], [], 0
    for i in range(rows):
        weights = {name: torch.randn(shape, generator=generator) for name, shape in shapes.items()}
        record = CheckpointRecord(f"{i:020x}", f"{i // 4:020x}", "cnn", "bench", i % 4, 0, HPARAMS,
                                  dict.fromkeys(METRIC_NAMES, 0.5), "ok", ARCHITECTURE, weights)
        batch.append(to_row(record))
        row_bytes = len(batch[-1]["weights"])
        if len(batch) * row_bytes >= 64 * 2**20 or i == rows - 1:
            paths.append(folder / f"train-{len(paths):05d}.parquet")
            write_shard(batch, schema, paths[-1], row_bytes)
            batch = []
    return paths, row_bytes


def best_of(repeat: int, function) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def load_nfnzoo(paths: list[Path]):
    return read_weights(paths)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000, help="checkpoints in the split")
    parser.add_argument("--sample", type=int, default=2000, help="rows timed for the per-row baselines")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths, row_bytes = build_split(folder, args.rows)
        total = args.rows * row_bytes
        batch = load_nfnzoo(paths)  # warms the page cache
        reference = load_nfnzoo(paths)
        assert all(torch.equal(a, b) for a, b in zip(batch.tensors, reference.tensors))

        source = np.ones(total, np.uint8)
        target = np.zeros(total, np.uint8)  # both pre-faulted
        memcpy = total / best_of(args.repeat, lambda: np.copyto(target, source))
        fast = total / best_of(args.repeat, lambda: load_nfnzoo(paths))
        entries = [{"path": p.name, "bytes": p.stat().st_size, **file_checksums(p)} for p in paths]
        fast_checksums = [entry["xxh3_128"] for entry in entries]
        one_pass = total / best_of(args.repeat, lambda: read_weights(paths, checksums=fast_checksums))
        checked = total / best_of(args.repeat, lambda: (check_shards(folder, entries), load_nfnzoo(paths)))
        checked_full = total / best_of(args.repeat, lambda: (check_shards(folder, entries, full=True),
                                                             load_nfnzoo(paths)))

        column = pq.read_table(paths, columns=["weights"])["weights"]
        values = [column[i].as_py() for i in range(min(args.sample, args.rows))]
        names = batch.space.names

        def per_row():
            loaded = [safetensors.torch.load(v) for v in values]
            return [torch.stack([sd[n] for sd in loaded]) for n in names]

        per_row_rate = len(values) * row_bytes / best_of(args.repeat, per_row)

        files = []
        for i in range(min(args.sample // 4, args.rows)):
            files.append(folder / f"{i}.pt")
            torch.save(batch.state_dict(i), files[-1])

        def per_file():
            loaded = [torch.load(f, weights_only=True) for f in files]
            return [torch.stack([sd[n] for sd in loaded]) for n in names]

        per_file()  # a first, untimed read
        per_file_rate = len(files) * row_bytes / best_of(args.repeat, per_file)

    print(f"split: {args.rows:,} Small-CNN checkpoints, {total / 2**20:,.0f} MiB of weights; torch threads "
          f"{torch.get_num_threads()}")
    print(f"{'method':<40}{'GB/s':>8}{'x memcpy':>10}")
    for name, rate in [("memcpy (numpy.copyto)", memcpy), ("nfnzoo fast loader (read+decode)", fast),
                       ("nfnzoo checked, one pass (xxh3 in read)", one_pass),
                       ("nfnzoo checked first (xxh3, then read)", checked),
                       ("nfnzoo checked first (sha256, then read)", checked_full),
                       ("per-row safetensors.torch.load", per_row_rate), ("per-file torch.load", per_file_rate)]:
        print(f"{name:<40}{rate / 1e9:>8.3f}{rate / memcpy:>10.3f}")


if __name__ == "__main__":
    main()
