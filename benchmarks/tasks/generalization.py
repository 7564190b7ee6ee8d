"""Generalization prediction: predict a checkpoint's test accuracy from its weights.

The task of Unterthiner et al. 2020, "Predicting Neural Network Accuracy from Weights"
(arXiv:2002.11448), used as the standard NFN benchmark by Zhou et al. 2023 ("Permutation
Equivariant Neural Functionals") and its successors. Protocol:
- train the NFN on the train split with MSE to the (standardized) test accuracy; checkpoints
  whose training diverged (status != "ok") are dropped from every split;
- after each epoch, score the NFN on the validation split by Kendall's tau and keep the best
  epoch's parameters (model selection never looks at the test split);
- report Kendall's tau, R^2 and RMSE on the test split with the selected parameters.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pandas
import torch
from torch import nn

from benchmarks.metrics import kendall_tau, r2_score, rmse
from benchmarks.tasks.base import SPLITS, Task, TaskResult, isolated_rng
from benchmarks.tasks.registry import register_task
from nfn_models import create_model
from zoo.schema import SchemaError
from zoo.weightspace import WeightBatch

if TYPE_CHECKING:
    from zoo.loader import ZooSplit

TARGET = "test_accuracy"  # the metadata column the task predicts


@dataclasses.dataclass(frozen=True)
class GeneralizationConfig:
    epochs: int = 30  # model selection keeps the best epoch, so extra epochs cost time, not accuracy
    batch_size: int = 64  # ~15-80 steps per epoch on zoos of 1k-5k checkpoints
    lr: float = 1e-3  # Adam's usual rate; the baselines are small MLPs
    weight_decay: float = 1e-4  # decoupled (AdamW); mild regularization for a few thousand examples
    eval_batch_size: int = 1024  # bounds evaluation memory; does not change any result

    def validate(self, where: str, key: str) -> None:
        positive = {"epochs": self.epochs, "eval_batch_size": self.eval_batch_size, "lr": self.lr}
        for name, value in positive.items():
            if value <= 0:
                raise SchemaError(where, name, f"expected a positive number, got {value}")
        if self.batch_size < 2:  # BatchNorm input normalization needs two rows per training batch
            raise SchemaError(where, "batch_size", f"expected at least 2, got {self.batch_size}")
        if self.weight_decay < 0:
            raise SchemaError(where, "weight_decay", f"expected a non-negative number, got {self.weight_decay}")


@dataclasses.dataclass(frozen=True)
class _Examples:
    """The usable rows of one split: weights, targets and ids, on the run's device."""

    weights: WeightBatch
    targets: torch.Tensor  # (N,) float32 test accuracies
    model_ids: list[str]


def _usable(split: "ZooSplit", name: str, device: torch.device) -> _Examples:
    """Drops diverged checkpoints and checks the targets the task needs are present."""
    metadata = split.metadata
    missing = {"model_id", "status", TARGET} - set(metadata.columns)
    if missing:
        raise ValueError(f"{name} split: metadata lacks the columns {sorted(missing)}")
    keep = (metadata["status"] == "ok").to_numpy()
    rows = metadata[keep]
    targets = torch.as_tensor(rows[TARGET].to_numpy(dtype=np.float32))
    if len(rows) < 2:
        raise ValueError(f"{name} split: {len(rows)} checkpoints with status 'ok'; the task needs at least 2")
    if not torch.isfinite(targets).all():
        raise ValueError(f"{name} split: {TARGET} is missing or not finite for some 'ok' checkpoints")
    if name != "train" and bool((targets == targets[0]).all()):
        raise ValueError(f"{name} split: {TARGET} is the same for every checkpoint; nothing to rank")
    weights = split.weights[torch.tensor(keep)].to(device=device, dtype=torch.float32)
    return _Examples(weights, targets.to(device), rows["model_id"].astype(str).tolist())


@torch.no_grad()
def _predict(model: nn.Module, weights: WeightBatch, batch_size: int) -> torch.Tensor:
    """Eval-mode predictions, shape (N,); row results do not depend on the batching."""
    model.eval()
    return torch.cat([model(batch).squeeze(-1) for _, batch in weights.batches(batch_size)])


@register_task("generalization")
class GeneralizationTask(Task):
    """Predict test accuracy from weights; rank by Kendall's tau (see the module docstring)."""

    Config = GeneralizationConfig
    metrics = {"kendall_tau": True, "r2": True, "rmse": False}
    main_metric = "kendall_tau"

    def run(self, splits: Mapping[str, "ZooSplit"], model: str, model_overrides: Mapping[str, Any],
            seed: int, device: str | torch.device = "cpu") -> TaskResult:
        missing = [name for name in SPLITS if name not in splits]
        if missing:
            raise ValueError(f"the generalization task needs the splits {list(SPLITS)}; missing {missing}")
        if model_overrides.get("out_features", 1) != 1:
            raise ValueError("the generalization task predicts one scalar; out_features must be 1")
        device = torch.device(device)
        train, validation, test = (_usable(splits[name], name, device) for name in SPLITS)
        config = self.config
        # Standardized targets keep the regression well scaled; predictions are mapped back.
        target_mean = train.targets.mean()
        target_std = train.targets.std().clamp_min(1e-8)

        with isolated_rng(seed, device):
            net = create_model(model, train.weights.space, **{**model_overrides, "out_features": 1}).to(device)
            shuffle = torch.Generator().manual_seed(seed)
            optimizer = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
            best_tau, best_epoch, best_state = -float("inf"), 0, None
            for epoch in range(1, config.epochs + 1):
                net.train()
                for index, batch in train.weights.batches(config.batch_size, shuffle=True, generator=shuffle):
                    if len(index) < 2:  # a lone leftover row: BatchNorm cannot standardize it
                        continue
                    prediction = net(batch).squeeze(-1)  # (b,)
                    target = (train.targets[index.to(device)] - target_mean) / target_std
                    loss = nn.functional.mse_loss(prediction, target)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                predicted = _predict(net, validation.weights, config.eval_batch_size)
                tau = kendall_tau(validation.targets.cpu().numpy(), predicted.cpu().numpy())
                if tau > best_tau:
                    best_tau, best_epoch, best_state = tau, epoch, copy.deepcopy(net.state_dict())
            net.load_state_dict(best_state)
            predicted = _predict(net, test.weights, config.eval_batch_size) * target_std + target_mean

        targets = test.targets.cpu().numpy().astype(np.float64)
        predictions = predicted.cpu().numpy().astype(np.float64)
        metrics = {
            "kendall_tau": kendall_tau(targets, predictions),
            "r2": r2_score(targets, predictions),
            "rmse": rmse(targets, predictions),
        }
        table = pandas.DataFrame({"model_id": test.model_ids, "target": targets, "prediction": predictions})
        num_params = sum(p.numel() for p in net.parameters() if p.requires_grad)
        return TaskResult(metrics, table, num_params, {"epoch": best_epoch, "validation_kendall_tau": best_tau})
