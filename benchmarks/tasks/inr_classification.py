"""INR classification: the class of the image a SIREN encodes, from the SIREN's weights alone.

The task is Zhou et al. 2023 ("Permutation Equivariant Neural Functionals", Sec. 5.1) and Navon et
al. 2023 (DWSNets, Sec. 6). Monomial-NFN (Tran et al. NeurIPS 2024, Sec. 6) and MAGEP-NFN (Vo et
al. ICML 2025) reuse it. There is one SIREN per image (`zoo/specs/inr-mnist.yaml`). Splits go by
image index: 45,000 / 5,000 / the rest.

Protocol:

1. Train with cross-entropy on the train split's rows. By default these are rows with status "ok",
   and each run's final checkpoint.
2. After each epoch, score the validation split's accuracy and keep the best epoch's parameters.
   The authors validate every 3,000 steps and keep the best.
3. Report the test accuracy of the selected parameters.

Options are recorded in every results file. One is which checkpoints count. Another augments the
training split by K random elements of each SIREN's symmetry group. The group is hidden-unit
permutations with sign flips (`zoo.symmetry.feedforward`). This is the weight-space counterpart of
the NFN paper's augmented INR copies. That paper fitted 10 extra copies per MNIST image
(`extra_aug: 10`).

Presets hold facts from the authors' classify_siren configs.

`nfn` is the NFN paper's schedule. It is Adam at 1e-4 with batches of 32, for 200,000 steps (142
epochs of 45,000). The rate warms up linearly over 10,000 steps, then stays constant.

`budget` is sized for a CPU machine (docs/tasks.md). It is 5 epochs (~7,000 steps) of Adam at
1e-3, after a 1,000-step warm-up.

The model presets are the models' `inr-classification` ones (`--set model.preset=...`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

import numpy as np
import pandas
import torch
from torch import nn

from benchmarks.tasks.base import SPLITS, Task, TaskResult, isolated_rng, require_invariant_output, require_splits
from benchmarks.tasks.learners import LEARNERS, Problem, check_training
from benchmarks.tasks.registry import register_task
from benchmarks.tasks.rows import augment_rows, kept_metadata, select_rows
from nfn_models import count_parameters, create_model, trained_by
from nfn_models.registry import MODELS
from zoo.validation.schema import SchemaError, from_data

if TYPE_CHECKING:
    from zoo.loader import ZooSplit


@dataclasses.dataclass(frozen=True)
class INRClassificationConfig:
    epochs: int = 10
    batch_size: int = 32  # the authors'
    lr: float = 1e-3
    weight_decay: float = 0.0  # the authors' Adam has none
    eval_batch_size: int = 512
    lr_schedule: Literal["constant", "warmup-cosine"] = "constant"
    warmup_epochs: int = 0
    final_lr: float = 0.0
    warmup_steps: int = 0  # a linear warm-up over the first optimizer steps (the authors': 10,000)
    label: str = "label"  # the metadata column holding the class
    checkpoints: Literal["all", "final", "epochs"] = "final"  # the references store one fit per image
    checkpoint_epochs: tuple[int, ...] = ()
    augment_copies: int = 0  # K random group elements per training row (0: none)
    augment_keep_original: bool = True  # False: the training split holds only the transformed copies
    # the zoo's split set the splits come from: "default" (its own run-disjoint split) or one an import
    # recorded (`zoo.split_set_loader.load_split_set`, e.g. "nfn"); the harness loads it, results record it here
    splits: str = "default"

    def validate(self, where: str, key: str) -> None:
        check_training(self, where)
        if self.augment_copies < 0:
            raise SchemaError(where, "augment_copies", f"expected a non-negative integer, got {self.augment_copies}")
        if not self.augment_keep_original and self.augment_copies == 0:
            raise SchemaError(where, "augment_keep_original", "false needs augment_copies >= 1 (else nothing is left)")


def _labels(split: "ZooSplit", keep: np.ndarray, column: str, name: str) -> torch.Tensor:
    values = kept_metadata(split, keep)[column]
    if values.isna().any() or not np.allclose(values.to_numpy(dtype=np.float64) % 1, 0):
        raise ValueError(f"{name} split: the {column!r} column must hold integer classes")
    labels = torch.tensor(values.to_numpy(dtype=np.int64))
    if (labels < 0).any():
        raise ValueError(f"{name} split: the {column!r} column holds negative classes")
    return labels


def accuracy(labels: np.ndarray, logits: np.ndarray) -> float:
    return float((logits.argmax(axis=1) == labels).mean())


@register_task("inr-classification")
class INRClassificationTask(Task):
    """Classify the image a SIREN encodes from its weights (see the module docstring)."""

    Config = INRClassificationConfig
    # accuracy only: a board can recompute it from the predicted classes (a cross-entropy would need
    # every logit); the selection records the validation accuracy
    metrics = {"accuracy": True}
    main_metric = "accuracy"
    PRESETS = {"nfn": {"epochs": 142, "batch_size": 32, "lr": 1e-4, "warmup_steps": 10_000},
               "budget": {"epochs": 5, "batch_size": 32, "lr": 1e-3, "warmup_steps": 1_000}}

    def kept_rows(self, split: str, metadata: pandas.DataFrame) -> np.ndarray:
        config = self.config
        return select_rows(metadata, split, [config.label], config.checkpoints, config.checkpoint_epochs)

    def _rows(self, splits: Mapping[str, "ZooSplit"]) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """Per split: the kept rows and their classes; checks the zoo has classes at all."""
        config = self.config
        require_splits("inr-classification", splits)
        rows = {}
        for name in SPLITS:
            if config.label not in splits[name].metadata.columns:
                raise ValueError(f"the inr-classification task reads each checkpoint's class from the "
                                 f"{config.label!r} metadata column; the {name} split has the columns "
                                 f"{sorted(splits[name].metadata.columns)} (an INR zoo, such as inr-mnist, has it)")
            keep = select_rows(splits[name].metadata, name, [config.label], config.checkpoints,
                               config.checkpoint_epochs)
            rows[name] = (keep, _labels(splits[name], keep, config.label, name))
        classes = int(rows["train"][1].max()) + 1  # from the training split: test labels never shape the model
        if classes < 2:
            raise ValueError(f"the train split's {config.label!r} column holds one class; nothing to classify")
        for name in ("validation", "test"):
            if int(rows[name][1].max()) >= classes:
                raise ValueError(f"the {name} split holds class {int(rows[name][1].max())}, which the train split "
                                 f"(classes 0..{classes - 1}) never shows")
        return rows

    @classmethod
    def model_problem(cls, model: str) -> str | None:
        if trained_by(MODELS.get(model)) != "gradient":
            return (f"the inr-classification task trains its model by gradient steps; {model!r} is "
                    "fitted (a regressor), which this task does not take")
        return None

    def model_overrides(self, model: str, overrides: Mapping[str, Any],
                        splits: Mapping[str, "ZooSplit"]) -> dict[str, Any]:
        problem = self.model_problem(model)
        if problem is not None:
            raise ValueError(problem)
        classes = int(self._rows(splits)["train"][1].max()) + 1
        if overrides.get("out_features", classes) != classes:
            raise ValueError(f"the splits hold {classes} classes; the model's out_features is "
                             f"{overrides['out_features']}")
        require_invariant_output("inr-classification", model, overrides)
        return {**overrides, "out_features": classes}

    def run(self, splits: Mapping[str, "ZooSplit"], model: str, model_overrides: Mapping[str, Any],
            seed: int, device: str | torch.device = "cpu",
            report: Callable[[str], None] | None = None) -> TaskResult:
        config, device = self.config, torch.device(device)
        model_overrides = self.model_overrides(model, model_overrides, splits)
        examples = {}
        for name, (keep, labels) in self._rows(splits).items():
            copies = config.augment_copies if name == "train" else 0
            weights, source, ids = augment_rows(splits[name], keep, name, seed, copies,
                                                keep_original=config.augment_keep_original)
            examples[name] = (weights.to(device=device), labels[torch.as_tensor(source)].to(device), ids)
        (train, train_labels, _), (validation, validation_labels, _), (test, test_labels, test_ids) = \
            (examples[name] for name in SPLITS)

        with isolated_rng(seed, device):
            net = create_model(model, train.space, **model_overrides).to(device)
            problem = Problem(train, train_labels, validation, validation_labels, train_labels,
                              nn.functional.cross_entropy, accuracy, "accuracy", seed, report=report,
                              out_features=model_overrides["out_features"])
            learned = LEARNERS["gradient"](net, problem, config)
            logits = learned.predict(test)
        targets = test_labels.cpu().numpy()
        predicted = logits.argmax(dim=1).cpu().numpy().astype(np.float64)
        metrics = self.score(targets.astype(np.float64), predicted)
        table = pandas.DataFrame({"model_id": test_ids, "target": targets.astype(np.float64), "prediction": predicted})
        selection = {**learned.selection, "train_rows": len(train)}  # with the augmented views
        return TaskResult(metrics, table, count_parameters(net), selection,
                          {"majority_class_accuracy": float(np.bincount(targets).max() / len(targets))},
                          curve=learned.curve)

    RESCORING = "accuracy, from the predicted classes and the pinned test labels"

    @classmethod
    def test_targets(cls, metadata: pandas.DataFrame, task_config: Mapping[str, Any]) -> pandas.DataFrame:
        config = from_data(INRClassificationConfig, dict(task_config), where="task_config")
        keep = select_rows(metadata, "test", [config.label], config.checkpoints, config.checkpoint_epochs)
        rows = metadata.reset_index(drop=True)[keep]
        return pandas.DataFrame({"model_id": rows["model_id"].astype(str).to_numpy(),
                                 "target": rows[config.label].to_numpy(dtype=np.float64)})

    @classmethod
    def score(cls, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        """Accuracy: the share of rows whose predicted class is the label."""
        return {"accuracy": float(np.mean(predictions == targets))}

    @classmethod
    def evaluation_protocol(cls, task_config: Mapping[str, Any]) -> dict[str, Any]:
        chosen = {"checkpoints": task_config.get("checkpoints", "final")}
        if chosen["checkpoints"] == "epochs":
            chosen["checkpoint_epochs"] = list(task_config.get("checkpoint_epochs", ()))
        return chosen

    @classmethod
    def describe_protocol(cls, task_config: Mapping[str, Any]) -> str:
        checkpoints = task_config.get("checkpoints", "final")
        shown = {"all": "all stored fitting steps", "final": "each fit's final step",
                 "epochs": f"steps {list(task_config.get('checkpoint_epochs', ()))}"}[checkpoints]
        copies = int(task_config.get("augment_copies", 0))
        augmentation = (f"{copies} random permutation + sign-flip element(s) per training SIREN"
                        + ("" if task_config.get("augment_keep_original", True) else " (copies only)")) \
            if copies else "none"
        return f"checkpoints: {shown}; augmentation: {augmentation}; loss: cross-entropy"
