"""The Transformer family's training recipe, the parts both the solo trainer (`transformer`) and
the population trainer (`transformer_population`) use: the hyperparameters, the learning-rate
schedule (linear warm-up, then cosine decay to a final rate, as the released zoo's) and the
random-crop augmentation. Below both, so that neither imports the other's module back.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import torch
import torch.nn.functional as F

from zoo.validation.domains import Coefficient, Count, FinalLearningRate, Fraction, LearningRate, Probability, Scale


@dataclasses.dataclass(frozen=True)
class TransformerHParams:
    optimizer: Literal["adam", "rmsprop", "sgd", "sgd_momentum"]
    learning_rate: LearningRate  # the peak rate, after warm-up
    init_std: Scale  # std of the truncated-normal initial weights
    l2: Coefficient  # the optimizer's weight decay (coupled L2)
    dropout: Probability  # after the stem and after each attention and MLP sublayer
    train_fraction: Fraction  # share of the training pool this run sees
    warmup_epochs: Count  # linear warm-up of the learning rate
    crop_padding: Count  # images: random crops of the zero-padded image while training (0: none)
    final_learning_rate: FinalLearningRate  # where the cosine decay ends


def learning_rate_at(epoch: int, hp: TransformerHParams, epochs: int) -> float:
    """The rate of 1-based `epoch`: the schedule's value at the epoch's start, t = epoch - 1."""
    t, warmup = epoch - 1, hp.warmup_epochs
    if t < warmup:
        return hp.learning_rate * (t + 1) / warmup
    progress = (t - warmup) / max(1, epochs - warmup)
    return hp.final_learning_rate + (hp.learning_rate - hp.final_learning_rate) * (1 + math.cos(math.pi * progress)) / 2


def random_crops(x: torch.Tensor, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Each image shifted by up to `padding` pixels: a random crop of the zero-padded image (the
    released zoo's RandomCrop(size, padding=2), with a seeded generator)."""
    batch, _, height, width = x.shape
    padded = F.pad(x, (padding,) * 4)
    offsets = torch.randint(0, 2 * padding + 1, (2, batch), generator=generator)
    rows = (offsets[0][:, None] + torch.arange(height))[:, :, None]  # (B, H, 1)
    cols = (offsets[1][:, None] + torch.arange(width))[:, None, :]  # (B, 1, W)
    return padded[torch.arange(batch)[:, None, None], :, rows, cols].permute(0, 3, 1, 2)  # (B, C, H, W)
