"""A Small Transformer Zoo folder made by hand in the layout `SmallTransformerZooDataset` reads
(Fsoft-AIC/Transformer-NFN): `<name>/<run>_<epoch>_<acc>.pt` and `metadata/<name>.csv`.

Not copied from any release: random weights in state dicts of a module built like the released
`VisionTransformer` (its submodule names and its positional encoding as a gradient-free parameter),
so the key names are PyTorch's for that structure; the CSV holds vision_task/main.py's flags.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

EPOCHS = ("1", "50", "75", "100", "best1")


@functools.lru_cache(maxsize=None)
def _sinusoid(tokens: int, width: int) -> torch.Tensor:
    table = torch.zeros(tokens, width)
    for t in range(tokens):
        for i in range(0, width, 2):
            angle = t / 10000 ** (i / width)
            table[t, i], table[t, i + 1] = math.sin(angle), math.cos(angle)
    return table


class _Attention(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.queries, self.keys, self.values, self.out_projection = (nn.Linear(width, width, bias=False)
                                                                     for _ in range(4))


class _Block(nn.Module):
    def __init__(self, width, mul):
        super().__init__()
        self.norm1 = nn.LayerNorm(width, elementwise_affine=False)
        self.attention = _Attention(width)
        self.norm2 = nn.LayerNorm(width, elementwise_affine=False)
        self.fc1, self.fc2 = nn.Linear(width, width * mul), nn.Linear(width * mul, width)


class _Embedding(nn.Module):
    def __init__(self, width, tokens):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, kernel_size=4, stride=4)
        self.pos_embedding = nn.Parameter(_sinusoid(tokens, width).clone(), requires_grad=False)


class _Head(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, width), nn.Linear(width, classes)


class _ReferenceShapedViT(nn.Module):
    def __init__(self, width=32, layers=2, mul=2, classes=10):
        super().__init__()
        self.embedding = _Embedding(width, 49)
        self.encoder = nn.ModuleList(_Block(width, mul) for _ in range(layers))
        self.norm = nn.LayerNorm(width, elementwise_affine=False)
        self.classifier = _Head(width, classes)


def make_zoo(root: Path, runs: int = 6, name: str = "mnist", seed: int = 0, best_paths: str = "clean",
             best_files: bool = True) -> pd.DataFrame:
    """Writes the folder and returns the metadata frame (the CSV's rows, in order). With `best_paths="release"`
    a best row's ckpt_file is what vision_task/generate_metadata.py writes, the training run's path
    `<name>/<model_dir>/<name>/<file>`, not where the file lies; without `best_files` the best files are
    not in the folder at all."""
    rng = np.random.default_rng(seed)
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / "metadata").mkdir(exist_ok=True)
    rows = []
    for run in range(runs):
        wandb_id = f"r{run:07x}"
        flags = {"seed": 3, "epochs": 100, "warmup_epochs": 5, "batch_size": 128, "n_classes": 10,
                 "optimizer": ["adam", "sgd", "rmsprop", "sgd_momentum"][run % 4],
                 "lr": float(rng.uniform(3e-4, 5e-2)), "w_init_std": float(rng.uniform(0.1, 0.5)),
                 "l2_regularize": float(rng.uniform(1e-8, 1e-2)), "dataset": name, "image_size": 28,
                 "patch_size": 4, "n_channels": 1, "train_fraction": [0.5, 1.0][run % 2], "embed_dim": 32,
                 "n_attention_heads": 2, "forward_mul": 2, "n_layers": 2, "dropout": float(rng.uniform(0, 0.2))}
        for epoch in EPOCHS:
            torch.manual_seed(seed * 1000 + run * 10 + EPOCHS.index(epoch))
            state = _ReferenceShapedViT().state_dict()
            accuracy = float(rng.uniform(0.05, 0.99))  # some below the reference's 0.1 cut-off
            file = f"{wandb_id}_{epoch}_{int(accuracy * 10000)}.pt"
            best = epoch.startswith("best")
            if best_files or not best:
                torch.save(state, root / name / file)
            recorded = (f"{name}/model_{wandb_id}_{flags['optimizer']}/{name}/{file}"
                        if best and best_paths == "release" else f"{name}/{file}")
            rows.append({**flags, "ckpt_epoch": epoch, "ckpt_file": recorded, "test_top1_accuracy": accuracy})
    frame = pd.DataFrame(rows)
    frame.to_csv(root / "metadata" / f"{name}.csv", index=False)
    return frame
