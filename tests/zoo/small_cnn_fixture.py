"""A Small CNN Zoo folder made by hand in the release's layout (README, colab boundaries, NFN loader).

Not copied from any release: random weights, plausible flags, the layout's documented boundaries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

# (varname, shape) in row order: per layer, bias then kernel (the colab's boundaries 0-16-160-176-2480-...)
LAYOUT = [("sequential/conv2d/bias:0", (16,)), ("sequential/conv2d/kernel:0", (3, 3, 1, 16)),
          ("sequential/conv2d_1/bias:0", (16,)), ("sequential/conv2d_1/kernel:0", (3, 3, 16, 16)),
          ("sequential/conv2d_2/bias:0", (16,)), ("sequential/conv2d_2/kernel:0", (3, 3, 16, 16)),
          ("sequential/dense/bias:0", (10,)), ("sequential/dense/kernel:0", (16, 10))]
STEPS = (0, 1, 2, 3, 20, 40, 60, 80, 86)


def write_layout(folder: Path) -> None:
    position, lines = 0, ["varname,start_idx,end_idx,shape"]
    for name, shape in LAYOUT:
        size = int(np.prod(shape))
        lines.append(f'{name},{position},{position + size},"{shape}"')
        position += size
    assert position == 4970
    (folder / "layout.csv").write_text("\n".join(lines) + "\n")


def metrics_frame(runs: int, steps=STEPS, seed: int = 0, dataset: str = "mnist") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for run in range(runs):
        flags = {"config.activation": ["relu", "tanh"][run % 2], "config.b_init": "zeros",
                 "config.dataset": dataset, "config.dnn_architecture": "cnn",
                 "config.dropout": float(rng.uniform(0, .7)),
                 "config.epochs": 86, "config.epochs_between_checkpoints": 20,
                 "config.init_std": float(rng.uniform(1e-3, .5)), "config.l2reg": float(rng.uniform(1e-8, 1e-2)),
                 "config.learning_rate": float(rng.uniform(5e-4, 5e-2)), "config.num_layers": 3, "config.num_units": 16,
                 "config.optimizer": ["adam", "rmsprop", "sgd"][run % 3], "config.random_seed": 42,
                 "config.train_fraction": [0.1, 0.25, 0.5, 1.0][run % 4],
                 "config.w_init": ["he_normal", "glorot_normal", "RandomNormal"][run % 3]}
        for step in steps:
            rows.append({**flags, "modeldir": f"/cns/zoo/{dataset}/{run:05d}", "step": step,
                         "test_accuracy": float(rng.uniform()), "test_loss": float(rng.uniform(0, 3)),
                         "train_accuracy": float(rng.uniform()), "train_loss": float(rng.uniform(0, 3))})
    return pd.DataFrame(rows)


def write_split_file(folder: Path, rows: int, seed: int = 0, name: str = "nfn_split.csv") -> Path:
    """The NFN split file's form: a one-column frame written with its header "0", then a permutation. The NFN
    repository names it `<data set>_split.csv` (`cifar10_split.csv`); the importer also finds `nfn_split.csv`."""
    path = folder / name
    pd.DataFrame(np.random.default_rng(seed).permutation(rows)).to_csv(path, index=False)
    return path


def make_zoo(folder: Path, runs: int = 6, steps=STEPS, seed: int = 0, dataset: str = "mnist",
             split_file: bool = True) -> tuple[np.ndarray, pd.DataFrame]:
    folder.mkdir(parents=True, exist_ok=True)
    metrics = metrics_frame(runs, steps, seed, dataset)
    weights = np.random.default_rng(seed + 1).standard_normal((len(metrics), 4970)).astype(np.float32)
    np.save(folder / "weights.npy", weights)
    metrics.to_csv(folder / "metrics.csv.gz", index=False, compression="gzip")
    write_layout(folder)
    if split_file:
        write_split_file(folder, len(metrics), seed)
    return weights, metrics
