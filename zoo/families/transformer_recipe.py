"""The Transformer family's training recipe, shared by the solo and the population trainers.

The solo trainer is `transformer`, the population trainer `transformer_population`.
Both use the hyperparameters, the learning-rate schedule and the random-crop augmentation.
The schedule is the released zoo's: linear warm-up, then cosine decay to a final rate.
This module sits below both, so that neither imports the other's module back.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal


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
