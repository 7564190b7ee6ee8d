"""How a task gets a model from a training split: gradient steps, or a library's own fit.

A registered model says which (`nfn_models.trained_by`). Models of kind "gradient" are trained here by
AdamW over epochs, with the task's learning-rate schedule. They keep the epoch whose validation
score is best. Models of kind "fit" (the tree ensembles) fit themselves. They select on the validation
split as their library does. `LEARNERS` maps the kind to the function, so a task never asks which
model it has. Both return a `Learned`: how to predict, and how the model was selected.

Learning-rate schedules are per epoch, as the papers step them. The "constant" schedule keeps the
task's `lr` throughout. The "warmup-cosine" schedule is Transformer-NFN's (Tran et al. 2025's
training code). It warms up linearly over `warmup_epochs` from lr / 10 to lr. That is PyTorch's
`LinearLR(start_factor=0.1, total_iters=warmup_epochs - 1)`. Then it decays by a cosine to
`final_lr` over the remaining epochs: `CosineAnnealingLR(T_max=epochs - warmup_epochs,
eta_min=final_lr)`.

A task config may also have `warmup_steps`. The NFN paper's INR tasks use it (Zhou et al. 2023's
training code, `get_linear_warmup`: `LambdaLR(min(1, step / warmup_steps))`). The rate of
optimizer step k (0-based) is then scaled by min(1, (k + 1) / warmup_steps). This comes on top of
the epoch's schedule. Their step 0 has rate 0. Ours starts at 1 / warmup_steps, so no step is
wasted.

The model's outputs are held to the contract (`benchmarks.outputs`). Every training output has the
shape (B, out_features), and it and its loss are finite. So is every validation and test
prediction. A model that breaks it stops with `ModelOutputError`, naming the epoch and the step.
Examples are a NaN, an overflow, a diverged training or a (B,) output. It never shows up later as
a NaN metric. A validation score that is not finite on finite predictions is never selected. If no
epoch has a finite score, the learner raises, naming the score.

Progress: a `Problem` with `report` gets an epoch's line whenever `report_every_s` have passed
since the last line. The line holds the mean training loss, the validation score and the time so
far. Once the seed has trained that long, the last epoch's line comes too. So a seed that trains
for an hour says how far it is, and a quick one stays quiet."""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from typing import Callable

import numpy as np
import torch
from torch import nn

from benchmarks.outputs import FINITE, FiniteWatch, ModelOutputError, count_nonfinite, shape_problem
from benchmarks.tasks.limits import MAX_AUGMENT_COPIES, MAX_BATCH_SIZE
from zoo.weightspace import WeightBatch

SCHEDULES = ("constant", "warmup-cosine")


def learning_rate_at(epoch: int, lr: float, epochs: int, schedule: str, warmup_epochs: int = 0,
                     final_lr: float = 0.0) -> float:
    """The rate of 1-based `epoch` (see the module docstring)."""
    if schedule == "constant":
        return lr
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; expected one of {SCHEDULES}")
    t = epoch - 1
    if t < warmup_epochs:
        return lr * (0.1 + 0.9 * t / (warmup_epochs - 1)) if warmup_epochs > 1 else lr
    span = max(1, epochs - warmup_epochs)
    return final_lr + (lr - final_lr) * (1 + math.cos(math.pi * (t - warmup_epochs) / span)) / 2


def warmed_up(rate: float, step: int, warmup_steps: int) -> float:
    """The rate of 0-based optimizer step `step` under a linear warm-up of `warmup_steps` (0: none)."""
    return rate * min(1.0, (step + 1) / warmup_steps) if warmup_steps else rate


def check_training(config, where: str) -> None:
    """Validates the fields every gradient-trained task's config shares, raising `SchemaError`.

    They are epochs, batch_size, lr, eval_batch_size, weight_decay, lr_schedule, warmup_epochs,
    final_lr, checkpoints and checkpoint_epochs."""
    from zoo.validation.schema import SchemaError

    for name in ("epochs", "batch_size", "lr", "eval_batch_size"):
        if getattr(config, name) <= 0:
            raise SchemaError(where, name, f"expected a positive number, got {getattr(config, name)}")
    if config.batch_size < 2:
        raise SchemaError(where, "batch_size", f"expected at least 2, got {config.batch_size}")
    for name in ("batch_size", "eval_batch_size"):  # an allocation's size: bounded before anything is built
        if getattr(config, name) > MAX_BATCH_SIZE:
            raise SchemaError(where, name,
                              f"expected at most {MAX_BATCH_SIZE:,} (MAX_BATCH_SIZE), got {getattr(config, name)}")
    if getattr(config, "augment_copies", 0) > MAX_AUGMENT_COPIES:
        raise SchemaError(where, "augment_copies",
                          f"expected at most {MAX_AUGMENT_COPIES:,} (MAX_AUGMENT_COPIES), got {config.augment_copies}")
    for name in ("weight_decay", "final_lr", "warmup_steps"):
        if getattr(config, name, 0) < 0:
            raise SchemaError(where, name, f"expected a non-negative number, got {getattr(config, name)}")
    if config.lr_schedule not in SCHEDULES:
        raise SchemaError(where, "lr_schedule", f"expected one of {list(SCHEDULES)}, got {config.lr_schedule!r}")
    if not 0 <= config.warmup_epochs <= config.epochs:
        raise SchemaError(where, "warmup_epochs", f"expected 0 <= warmup_epochs <= epochs ({config.epochs}), "
                          f"got {config.warmup_epochs}")
    if (config.checkpoints == "epochs") != bool(config.checkpoint_epochs):
        raise SchemaError(where, "checkpoint_epochs", "expected a non-empty list exactly when checkpoints is "
                          f"'epochs' (checkpoints is {config.checkpoints!r}, got {list(config.checkpoint_epochs)})")
    if any(epoch < 0 for epoch in config.checkpoint_epochs):
        raise SchemaError(where, "checkpoint_epochs", f"expected epochs >= 0, got {list(config.checkpoint_epochs)}")


@dataclasses.dataclass
class Learned:
    predict: Callable[[WeightBatch], torch.Tensor]  # eval-mode outputs (N,), in the model's own units
    selection: dict[str, float]  # how the reported model was chosen (epoch, rounds, validation score)
    output_is_target: bool  # True: predictions are the target itself (no loss-specific link applies)
    # the validation score after each epoch (None where it was not finite); empty for a fitted model
    curve: tuple[float | None, ...] = ()


def _called(model: nn.Module, batch: WeightBatch, where: str) -> object:
    """`model(batch)`; a contract error raised inside (a wrapped model's weight output) says `where`."""
    try:
        return model(batch)
    except ModelOutputError as error:
        raise ModelOutputError(f"{where}: {error}") from None


@torch.no_grad()
def predict(model: nn.Module, weights: WeightBatch, batch_size: int, out_features: int = 1,
            where: str = "predicting") -> torch.Tensor:
    """Eval-mode predictions, shape (N,), or (N, out_features) for several.

    Row results do not depend on the batching. An output that breaks the contract raises
    `ModelOutputError` saying `where`."""
    model.eval()
    outputs = []
    for number, (_, batch) in enumerate(weights.batches(batch_size), start=1):
        output = _called(model, batch, f"{where} batch {number}")
        problem = shape_problem(output, len(batch), out_features)
        if problem is not None:
            raise ModelOutputError(f"{where} batch {number}: {problem}")
        outputs.append(output)
    predicted = torch.cat(outputs)
    counted = count_nonfinite(predicted)
    if counted is not None:
        raise ModelOutputError(f"{where} ({len(weights)} members): output is not finite ({counted}); {FINITE}")
    return predicted.squeeze(-1)


@dataclasses.dataclass(frozen=True)
class Problem:
    """What a learner sees: the training and validation rows, and how a model is scored."""

    train: WeightBatch
    targets: torch.Tensor  # (N,), in the units the loss sees (e.g. standardized)
    validation: WeightBatch
    validation_targets: torch.Tensor  # (M,), raw
    raw_targets: torch.Tensor  # (N,), raw (what a fitted model regresses)
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    score: Callable[[np.ndarray, np.ndarray], float]  # (targets, predictions) -> the selection score
    score_name: str  # recorded as selection["validation_<score_name>"]
    seed: int
    higher_is_better: bool = True  # False: the epoch with the lowest score is kept (an MSE)
    report: Callable[[str], None] | None = None  # gets progress lines (module docstring); None: quiet
    report_every_s: float = 30.0
    out_features: int = 1  # the model's output is (B, out_features) (`benchmarks.outputs`)


def by_gradient(model: nn.Module, problem: Problem, config) -> Learned:
    """AdamW over `config.epochs`, keeping the parameters of the best-scoring validation epoch."""
    shuffle = torch.Generator().manual_seed(problem.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sign = 1.0 if problem.higher_is_better else -1.0
    warmup_steps, step = getattr(config, "warmup_steps", 0), 0
    best_score, best_epoch, best_state, curve = -math.inf, 0, None, []
    watch = FiniteWatch(problem.targets.device)
    start = last_report = time.perf_counter()
    for epoch in range(1, config.epochs + 1):
        rate = learning_rate_at(epoch, config.lr, config.epochs, config.lr_schedule, config.warmup_epochs,
                                config.final_lr)
        model.train()
        watch.start(epoch)
        total_loss, steps = 0.0, 0
        for index, batch in problem.train.batches(config.batch_size, shuffle=True, generator=shuffle):
            if len(index) < 2:  # a lone leftover row: BatchNorm cannot standardize it
                continue
            for group in optimizer.param_groups:
                group["lr"] = warmed_up(rate, step, warmup_steps)
            step += 1
            output = _called(model, batch, f"epoch {epoch} step {steps + 1}")
            shape = shape_problem(output, len(index), problem.out_features)  # the shape only: no device sync
            if shape is not None:
                raise ModelOutputError(f"epoch {epoch} step {steps + 1}: {shape}")
            loss = problem.loss(output.squeeze(-1), problem.targets[index.to(problem.targets.device)])
            watch.add(output, loss)  # checked at once on the CPU, at the epoch's end on a GPU
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total_loss, steps = total_loss + loss.detach(), steps + 1  # summed on the device: no sync per step
        watch.check()
        predicted = predict(model, problem.validation, config.eval_batch_size, problem.out_features,
                            f"epoch {epoch} validation")
        score = sign * problem.score(problem.validation_targets.cpu().numpy(), predicted.cpu().numpy())
        curve.append(sign * score if math.isfinite(score) else None)
        if math.isfinite(score) and (score > best_score or best_state is None):
            best_score, best_epoch, best_state = score, epoch, copy.deepcopy(model.state_dict())
        now = time.perf_counter()
        if problem.report is not None and (now - last_report >= problem.report_every_s
                                           or epoch == config.epochs) and now - start >= problem.report_every_s:
            last_report = now
            problem.report(f"epoch {epoch}/{config.epochs}: training loss {float(total_loss) / max(steps, 1):.4g}, "
                           f"validation {problem.score_name} {sign * score:.4f} (best {sign * best_score:.4f}, "
                           f"epoch {best_epoch}) [{now - start:.0f} s]")
    if best_state is None:
        raise ValueError(f"the model's validation {problem.score_name} was not finite after any of the "
                         f"{config.epochs} epochs (training diverged); try a lower lr")
    model.load_state_dict(best_state)
    return Learned(lambda weights: predict(model, weights, config.eval_batch_size, problem.out_features,
                                           f"test, epoch {best_epoch}'s parameters"),
                   {"epoch": best_epoch, f"validation_{problem.score_name}": sign * best_score}, output_is_target=False,
                   curve=tuple(curve))


def by_fit(model: nn.Module, problem: Problem, config) -> Learned:
    """The model's own `fit` on the raw targets, selecting on the validation split."""
    selection = dict(model.fit(problem.train, problem.raw_targets, problem.validation, problem.validation_targets,
                               problem.seed))
    predicted = predict(model, problem.validation, config.eval_batch_size, problem.out_features, "validation, fitted")
    selection[f"validation_{problem.score_name}"] = problem.score(problem.validation_targets.cpu().numpy(),
                                                                  predicted.cpu().numpy())
    return Learned(lambda weights: predict(model, weights, config.eval_batch_size, problem.out_features,
                                           "test, fitted"),
                   selection, output_is_target=True)


LEARNERS: dict[str, Callable[[nn.Module, Problem, object], Learned]] = {"gradient": by_gradient, "fit": by_fit}
