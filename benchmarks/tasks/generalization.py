"""Generalization prediction: predict a checkpoint's test accuracy from its weights.

The task is Unterthiner et al. 2020, "Predicting Neural Network Accuracy from Weights"
(arXiv:2002.11448). Zhou et al. 2023 ("Permutation Equivariant Neural Functionals") made it the
standard NFN benchmark, and its successors kept it.

Protocol:

1. Train the NFN on the train split with MSE to the (standardized) test accuracy. Checkpoints whose
   training diverged (status != "ok") are dropped from every split.
2. After each epoch, score the NFN on the validation split by Kendall's tau. Keep the best epoch's
   parameters; model selection never looks at the test split.
3. Report Kendall's tau, R^2 and RMSE on the test split with the selected parameters. Beside them,
   report what the test targets' ties allow a ranking to reach (`benchmarks.ranking`).

The protocol's choices are config fields, so every results file records them.
`benchmarks.protocol` documents each, and the paper it follows.

`checkpoints` says which checkpoints count; by default every stored one. `subset` picks a metadata
subset. `min_accuracy` sets an accuracy threshold. `augment_*` adds random elements of each row's
weight-space group. `loss` picks MSE to the standardized accuracy (the default), or `bce`. With `bce` a sigmoid
output trains with binary cross-entropy on the accuracy. Zhou et al. 2023, Monomial-NFN (Tran et
al. NeurIPS 2024) and ScaleGMN (Kalogeropoulos et al. NeurIPS 2024) train this way."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

import numpy as np
import pandas
import torch
from torch import nn

from benchmarks import protocol
from benchmarks.metrics import kendall_tau, r2_score, rmse
from benchmarks.ranking import ranking_ceiling
from benchmarks.tasks.base import SPLITS, Task, TaskResult, isolated_rng, require_invariant_output, require_splits
from benchmarks.tasks.learners import LEARNERS, Problem, check_training
from benchmarks.tasks.registry import register_task
from benchmarks.tasks.rows import augment_rows, augmented_order, copy_ids, select_rows
from nfn_models import count_parameters, create_model, trained_by
from zoo.validation.schema import SchemaError, from_data, to_data
from zoo.weightspace import WeightBatch

if TYPE_CHECKING:
    from zoo.loader import ZooSplit

TARGET = "test_accuracy"  # the metadata column the task predicts


SplitName = Literal["train", "validation", "test"]
SCALAR = (str, int, float, bool)


@dataclasses.dataclass(frozen=True)
class GeneralizationConfig:
    epochs: int = 30  # model selection keeps the best epoch, so extra epochs cost time, not accuracy
    batch_size: int = 64  # ~15-80 steps per epoch on zoos of 1k-5k checkpoints
    lr: float = 1e-3  # Adam's usual rate; the baselines are small MLPs
    weight_decay: float = 1e-4  # decoupled (AdamW); mild regularization for a few thousand examples
    eval_batch_size: int = 1024  # bounds evaluation memory; does not change any result
    # the learning rate per epoch (`benchmarks.tasks.learners`): constant, or Transformer-NFN's
    # linear warm-up over warmup_epochs then cosine decay to final_lr
    lr_schedule: Literal["constant", "warmup-cosine"] = "constant"
    warmup_epochs: int = 0
    final_lr: float = 0.0
    # which checkpoints count, in every split: all stored epochs (as this package always did),
    # each run's final epoch (as the NFN papers use the CNN zoos), `checkpoint_epochs`, or each
    # run's epoch at `checkpoint_fraction` of its last (Transformer-NFN: epoch 75 of 100)
    checkpoints: Literal["all", "final", "epochs", "fraction"] = "all"
    checkpoint_epochs: tuple[int, ...] = ()  # with checkpoints: epochs
    checkpoint_fraction: float = 0.75  # with checkpoints: fraction
    # metadata column -> allowed value(s), in every split, e.g. {"activation": "relu"} (Monomial-NFN, ScaleGMN)
    subset: dict[str, Any] = dataclasses.field(default_factory=dict)
    min_accuracy: float | None = None  # drop members whose target is below it (Transformer-NFN)
    augment_copies: int = 0  # K random group elements per row of the augmented splits (Monomial-NFN)
    augment_splits: tuple[SplitName, ...] = ("train",)  # which splits augment_copies applies to
    augment_keep_original: bool = True  # False: an augmented split holds only the transformed copies
    augment_scale_range: tuple[float, float] | None = None  # U[low, high] positive scalings (ReLU), e.g. [1, 1000]
    loss: Literal["mse", "bce"] = "mse"  # bce: sigmoid output, binary cross-entropy on the accuracy
    # the zoo's split set the splits come from: "default" (its own run-disjoint split) or one an import
    # recorded (`zoo.split_set_loader.load_split_set`, e.g. "nfn"); the harness loads it, results record it here
    splits: str = "default"

    def validate(self, where: str, key: str) -> None:
        check_training(self, where)  # epochs, batches, rates, schedule, checkpoints (shared with the INR tasks)
        if not 0 < self.checkpoint_fraction <= 1:
            raise SchemaError(where, "checkpoint_fraction",
                              f"expected a fraction in (0, 1], got {self.checkpoint_fraction}")
        for column, value in self.subset.items():
            values = protocol.allowed_values(value)
            if not values or not all(isinstance(v, SCALAR) for v in values):
                raise SchemaError(where, f"subset.{column}",
                                  f"expected a value or a non-empty list of values, got {value!r}")
        if self.min_accuracy is not None and not 0 <= self.min_accuracy <= 1:
            raise SchemaError(where, "min_accuracy", f"expected an accuracy in [0, 1], got {self.min_accuracy}")
        if self.augment_copies < 0:
            raise SchemaError(where, "augment_copies", f"expected a non-negative integer, got {self.augment_copies}")
        if not self.augment_splits or len(set(self.augment_splits)) != len(self.augment_splits):
            raise SchemaError(where, "augment_splits",
                              f"expected distinct split names, got {list(self.augment_splits)}")
        if not self.augment_keep_original and self.augment_copies == 0:
            raise SchemaError(where, "augment_keep_original", "false needs augment_copies >= 1 (else nothing is left)")
        if self.augment_scale_range is not None:
            if self.augment_copies == 0:
                raise SchemaError(where, "augment_scale_range", "has no effect without augment_copies >= 1")
            scale_range = self.augment_scale_range
            if len(scale_range) != 2 or not (0 < scale_range[0] <= scale_range[1] < math.inf):
                raise SchemaError(where, "augment_scale_range",
                                  f"expected [low, high] with 0 < low <= high, got {list(scale_range)}")

    def augments(self, split: str) -> bool:
        return self.augment_copies > 0 and split in self.augment_splits


@dataclasses.dataclass(frozen=True)
class _Examples:
    """The usable rows of one split: weights, targets and ids, on the run's device."""

    weights: WeightBatch
    targets: torch.Tensor  # (N,) float32 test accuracies
    model_ids: list[str]


def _empty(name: str, rows: int, why: str) -> None:
    if rows == 0:
        raise ValueError(f"{name} split: no checkpoints left after {why}")


def _kept(metadata: pandas.DataFrame, name: str, config: GeneralizationConfig) -> np.ndarray:
    """The protocol's rows of a split, from its metadata.

    They are the rows with status ok, the chosen checkpoints, the subset and the threshold."""
    keep = select_rows(metadata, name, [TARGET], config.checkpoints, config.checkpoint_epochs,
                       config.checkpoint_fraction, config.subset)
    if config.min_accuracy is not None:
        keep &= ~(metadata[TARGET] < config.min_accuracy).to_numpy()  # NaN targets fail the checks after
        _empty(name, int(keep.sum()), f"dropping {TARGET} below min_accuracy {config.min_accuracy}")
    return keep


def _usable(split: "ZooSplit", name: str, config: GeneralizationConfig, seed: int,
            device: torch.device) -> _Examples:
    """The split's rows under the protocol, with the targets checked.

    They are the rows with status ok, the chosen checkpoints, the subset and the threshold. An
    augmented split adds the transformed copies."""
    where = f"{name} split"
    keep = _kept(split.metadata, name, config)
    metadata = split.metadata.reset_index(drop=True)
    targets = torch.as_tensor(metadata.loc[keep, TARGET].to_numpy(dtype=np.float32))
    if len(targets) < 2:
        filtered = config.checkpoints != "all" or config.subset or config.min_accuracy is not None
        raise ValueError(f"{where}: {len(targets)} checkpoints with status 'ok'"
                         f"{' under the protocol' if filtered else ''}; the task needs at least 2")
    if not torch.isfinite(targets).all():
        raise ValueError(f"{where}: {TARGET} is missing or not finite for some 'ok' checkpoints")
    if name != "train" and bool((targets == targets[0]).all()):
        raise ValueError(f"{where}: {TARGET} is the same for every checkpoint; nothing to rank")
    if config.loss == "bce" and not bool(((targets >= 0) & (targets <= 1)).all()):
        raise ValueError(f"{where}: loss 'bce' needs {TARGET} in [0, 1]")
    copies = config.augment_copies if config.augments(name) else 0
    weights, source, model_ids = augment_rows(split, keep, name, seed, copies,
                                              keep_original=config.augment_keep_original,
                                              scale_range=config.augment_scale_range)
    return _Examples(weights.to(device=device), targets[torch.as_tensor(source)].to(device), model_ids)


@register_task("generalization")
class GeneralizationTask(Task):
    """Predict test accuracy from weights; rank by Kendall's tau (see the module docstring)."""

    Config = GeneralizationConfig
    metrics = {"kendall_tau": True, "r2": True, "rmse": False}
    main_metric = "kendall_tau"
    SWEEPS = {"min_accuracy": "threshold"}  # leaderboards show a threshold sweep as one table
    ALIASES = {"threshold": "min_accuracy"}  # `--set task.threshold=0.4`, Transformer-NFN's name for it
    # Tran et al. 2025's protocol on the Small Transformer Zoo (facts from their training code):
    # the checkpoint at 3/4 of training, sigmoid + BCE, batches of 16, 100 epochs of Adam at 1e-3
    # without weight decay, 10 warm-up epochs then cosine to 1e-5; `threshold` drops members below
    # an accuracy (their sweep: 0, 0.2, 0.4, 0.6, 0.8). Their splits (70/15/15 by an unseeded
    # shuffle of the checkpoint files) are ours: the zoo's seeded run-disjoint splits.
    # Zhou et al. 2023's protocol on the Small CNN Zoo (experiments/predict_gen.py and its
    # predict_gen_configs/main.yaml, facts only): their split (the imported zoo's `nfn` split set, whose
    # rows are each run's step-86 checkpoint), sigmoid + BCE, batches of 8, 50 epochs of Adam at 1e-3
    # without weight decay or warm-up, the test scored at the epoch of the best validation Kendall tau
    # (as this task always selects). ScaleGMN's and Monomial-NFN's activation subsets are their split
    # sets (`--set task.splits=scalegmn-relu`, ...) on top of this preset.
    PRESETS = {"nfn": {"splits": "nfn", "checkpoints": "final", "loss": "bce", "batch_size": 8, "epochs": 50,
                       "lr": 1e-3, "weight_decay": 0.0, "lr_schedule": "constant"},
               "transformer-nfn": {"checkpoints": "fraction", "checkpoint_fraction": 0.75, "loss": "bce",
                                   "batch_size": 16, "epochs": 100, "lr": 1e-3, "weight_decay": 0.0,
                                   "lr_schedule": "warmup-cosine", "warmup_epochs": 10, "final_lr": 1e-5,
                                   "min_accuracy": 0.0}}

    def kept_rows(self, split: str, metadata: pandas.DataFrame) -> np.ndarray:
        return _kept(metadata, split, self.config)

    def run(self, splits: Mapping[str, "ZooSplit"], model: str, model_overrides: Mapping[str, Any],
            seed: int, device: str | torch.device = "cpu",
            report: Callable[[str], None] | None = None) -> TaskResult:
        require_splits("generalization", splits)
        if model_overrides.get("out_features", 1) != 1:
            raise ValueError("the generalization task predicts one scalar; out_features must be 1")
        require_invariant_output("generalization", model, model_overrides)
        device = torch.device(device)
        config = self.config
        train, validation, test = (_usable(splits[name], name, config, seed, device) for name in SPLITS)
        if config.loss == "mse":  # standardized targets keep the regression well scaled; mapped back below
            target_mean, target_std = train.targets.mean(), train.targets.std().clamp_min(1e-8)
        else:  # bce: the sigmoid of the output is the predicted accuracy itself
            target_mean, target_std = torch.zeros((), device=device), torch.ones((), device=device)

        with isolated_rng(seed, device):
            net = create_model(model, train.weights.space, **{**model_overrides, "out_features": 1}).to(device)
            problem = Problem(train.weights, (train.targets - target_mean) / target_std, validation.weights,
                              validation.targets, train.targets, LOSSES[config.loss], kendall_tau, "kendall_tau", seed,
                              report=report)
            learned = LEARNERS[trained_by(net)](net, problem, config)
            predicted = learned.predict(test.weights)
            if not learned.output_is_target:  # map the output back to an accuracy
                predicted = torch.sigmoid(predicted) if config.loss == "bce" else predicted * target_std + target_mean

        targets = test.targets.cpu().numpy().astype(np.float64)
        predictions = predicted.cpu().numpy().astype(np.float64)
        metrics = self.score(targets, predictions)
        table = pandas.DataFrame({"model_id": test.model_ids, "target": targets, "prediction": predictions})
        return TaskResult(metrics, table, count_parameters(net), learned.selection, ranking_ceiling(targets),
                          curve=learned.curve)

    RESCORING = "Kendall's tau, R^2 and RMSE, from the predictions and the pinned test accuracies"

    @classmethod
    def test_targets(cls, metadata: pandas.DataFrame, task_config: Mapping[str, Any]) -> pandas.DataFrame:
        config = from_data(GeneralizationConfig, _recorded(task_config), where="task_config")
        rows = metadata.reset_index(drop=True)[_kept(metadata, "test", config)]
        # float32, as `_usable` reads them: the metrics are computed on these exact values
        ids, targets = rows["model_id"].astype(str).tolist(), rows[TARGET].to_numpy(dtype=np.float32).astype(np.float64)
        if config.augments("test"):
            source, number = augmented_order(len(ids), config.augment_copies, config.augment_keep_original)
            ids, targets = copy_ids(ids, source, number), targets[source]
        return pandas.DataFrame({"model_id": ids, "target": targets})

    @classmethod
    def score(cls, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        return {"kendall_tau": kendall_tau(targets, predictions), "r2": r2_score(targets, predictions),
                "rmse": rmse(targets, predictions)}

    @classmethod
    def evaluation_protocol(cls, task_config: Mapping[str, Any]) -> dict[str, Any]:
        """The choices that define the test set (entries differing in them are not comparable)."""
        config = _recorded(task_config)
        chosen = {"checkpoints": config["checkpoints"], "subset": config["subset"] or None,
                  "min_accuracy": config["min_accuracy"]}
        if config["splits"] != "default":  # another test set; older results predate the field
            chosen["splits"] = config["splits"]
        if config["checkpoints"] == "epochs":
            chosen["checkpoint_epochs"] = list(config["checkpoint_epochs"])
        if config["checkpoints"] == "fraction":
            chosen["checkpoint_fraction"] = config["checkpoint_fraction"]
        if config["augment_copies"] > 0 and "test" in config["augment_splits"]:
            chosen["test_augmentation"] = {name: config[f"augment_{name}"]
                                           for name in ("copies", "keep_original", "scale_range")}
        return chosen

    @classmethod
    def describe_protocol(cls, task_config: Mapping[str, Any]) -> str:
        """One line: the test set's protocol, then the training choices that are part of it."""
        config = _recorded(task_config)
        checkpoints = {"all": "all stored epochs", "final": "each run's final epoch",
                       "epochs": f"epochs {list(config['checkpoint_epochs'])}",
                       "fraction": f"each run's epoch at {config['checkpoint_fraction']:g} of its last"
                       }[config["checkpoints"]]
        parts = [f"checkpoints: {checkpoints}"]
        parts += [f"split set: {config['splits']}"] if config["splits"] != "default" else []
        subset = config["subset"]
        parts.append("subset: " + (", ".join(f"{k} ∈ {protocol.allowed_values(v)}" for k, v in sorted(subset.items()))
                                   if subset else "all rows"))
        if config["min_accuracy"] is not None:
            parts.append(f"{TARGET} ≥ {config['min_accuracy']}")
        if config["augment_copies"] > 0:
            scale = config["augment_scale_range"]
            parts.append(f"augmentation: {config['augment_copies']} group element(s) per row of "
                         f"{'/'.join(config['augment_splits'])}"
                         + ("" if config["augment_keep_original"] else " (copies only)")
                         + (f", scalings U[{scale[0]:g}, {scale[1]:g}]" if scale else ""))
        else:
            parts.append("augmentation: none")
        parts.append(f"loss: {'sigmoid + BCE' if config['loss'] == 'bce' else 'MSE (standardized)'}")
        return "; ".join(parts)


def _recorded(task_config: Mapping[str, Any]) -> dict[str, Any]:
    """A results file's `task_config`, checked, with the defaults of fields it predates."""
    known = {f.name for f in dataclasses.fields(GeneralizationConfig)}
    data = {**to_data(GeneralizationConfig()), **{k: v for k, v in task_config.items() if k in known}}
    return to_data(from_data(GeneralizationConfig, data, where="task_config"))


def _bce(logits: torch.Tensor, accuracy: torch.Tensor) -> torch.Tensor:
    return nn.functional.binary_cross_entropy_with_logits(logits, accuracy)


LOSSES = {"mse": nn.functional.mse_loss, "bce": _bce}  # (prediction, target) -> scalar loss
