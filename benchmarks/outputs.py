"""A model's output against the model contract: a tensor of the stated shape, every value finite.

The contract is on docs/bring-your-own-nfn.md. A model called on a `WeightBatch` of B members
returns a floating tensor of shape (B, out_features). `out_features` is its Config's, and the task
sets it: 1 for generalization, the number of classes for INR classification. A model with a
weight-space output returns a `WeightBatch` of its input's weight space. Nothing in a benchmark can
use a value that is NaN or infinite, nor can a results file hold one. So a non-finite output or
loss is an error where it happens, not a metric later.

The functions here say in words what is wrong, or None when nothing is. The training loop
(`benchmarks.tasks.learners`), the predictions and `benchmarks.check_model` all use them. A run
raises `ModelOutputError` with the epoch and step. `FiniteWatch` finds the first non-finite
training step. On a GPU it looks once per epoch, so training never waits on the device per step.
`benchmarks.harness` adds the model and the seed. So the user reads one line like
`model mypkg:MyNFN, seed 1, epoch 2 step 5: output is not finite (3 of 16 values NaN); expected ...`."""

from __future__ import annotations

import torch

from zoo.weightspace import WeightBatch


# what a non-finite output's message ends with: what was expected, and the usual causes
FINITE = "expected finite values (a NaN or an overflow in the model, or a training that diverged: try a lower task.lr)"


class ModelOutputError(RuntimeError):
    """A model's output (or the loss on it) broke the contract; the message says where and what.

    It is not a ValueError. A suite records a ValueError as data that cannot serve an entry, and skips
    it for good. A model's NaN is for its author to fix, and the same command then resumes."""


def count_nonfinite(values: torch.Tensor) -> str | None:
    """"3 of 16 values NaN" (or "... inf", "... NaN or inf: 2 NaN, 1 inf") or None when every value is finite."""
    finite = torch.isfinite(values)
    if bool(finite.all()):
        return None
    return _counted(values.numel() - int(finite.sum()), int(torch.isnan(values).sum()), values.numel())


def _counted(bad: int, nan: int, size: int) -> str:
    kind = "NaN" if nan == bad else "inf" if nan == 0 else f"NaN or inf: {nan} NaN, {bad - nan} inf"
    return f"{bad} of {size} values {kind}"


def shape_problem(output: object, batch_size: int, out_features: int) -> str | None:
    """Why `output` is not a floating tensor (batch_size, out_features), or None. Reads no value (no device sync)."""
    expected = f"expected a tensor (B, out_features) = ({batch_size}, {out_features})"
    if not isinstance(output, torch.Tensor):
        return f"output is a {type(output).__name__}; {expected}"
    if not output.is_floating_point():
        return f"output has dtype {output.dtype}; {expected} of floating values"
    if tuple(output.shape) != (batch_size, out_features):
        return f"output has shape {tuple(output.shape)}; {expected}"
    return None


def weights_shape_problem(output: object, weights: WeightBatch) -> str | None:
    """Why a weight-space output is not a `WeightBatch` of its input's space and batch, or None (no values read)."""
    if not isinstance(output, WeightBatch) or output.space != weights.space:
        return (f"weight output is a {type(output).__name__}"
                f"{' of another weight space' if isinstance(output, WeightBatch) else ''}; expected a WeightBatch "
                "of its input's weight space")
    if len(output) != len(weights):
        return f"weight output holds {len(output)} members; expected one per input member ({len(weights)})"
    return None


def weights_output_problem(output: object, weights: WeightBatch) -> str | None:
    """Why a weight-space output breaks the contract, or None.

    It checks its space, then its values, naming the first tensor with a non-finite value."""
    problem = weights_shape_problem(output, weights)
    if problem is not None:
        return problem
    for spec, tensor in zip(output.space.tensors, output.tensors):
        counted = count_nonfinite(tensor.detach())
        if counted is not None:
            return f"weight output {spec.name} is not finite ({counted})"
    return None


class FiniteWatch:
    """Finds the first training step of an epoch whose output or loss was not finite.

    `add` keeps three numbers per step on the device: the output's NaN and non-finite counts, and
    whether the loss is finite. `check` reads them once. On the CPU it reads after every step, where
    reading costs nothing and a NaN stops training at once. On a GPU it reads at the epoch's end: one
    sync, beside the validation pass's. `check` raises `ModelOutputError` naming the epoch and the step
    (1-based)."""

    def __init__(self, device: torch.device, every_step: bool | None = None):
        self.every_step = torch.device(device).type == "cpu" if every_step is None else every_step
        self.start(0)

    def start(self, epoch: int) -> None:
        """A new epoch: steps count from 1 again."""
        self.epoch, self.checked, self.pending = epoch, 0, []

    def add(self, output: torch.Tensor, loss: torch.Tensor) -> None:
        """One training step's output and loss (read at `check`)."""
        output, loss = output.detach(), loss.detach()
        counts = torch.stack([torch.isnan(output).sum(), (~torch.isfinite(output)).sum(),
                              (~torch.isfinite(loss)).sum()])
        self.pending.append((counts, output.numel(), loss))
        if self.every_step:
            self.check()

    def check(self) -> None:
        """Raises `ModelOutputError` for the first step added since the last check whose output or
        loss was not finite."""
        if not self.pending:
            return
        counts = torch.stack([c for c, _, _ in self.pending]).cpu()  # (steps, 3): the one read of the device
        bad = (counts[:, 1] > 0) | (counts[:, 2] > 0)
        if bool(bad.any()):
            index = int(bad.nonzero()[0, 0])
            nan, nonfinite, _ = (int(v) for v in counts[index])
            _, size, loss = self.pending[index]
            if nonfinite:
                what = f"output is not finite ({_counted(nonfinite, nan, size)}); {FINITE}"
            else:
                what = f"loss is not finite ({float(loss):g}) on a finite output; {FINITE}"
            raise ModelOutputError(f"epoch {self.epoch} step {self.checked + index + 1}: {what}")
        self.checked += len(self.pending)
        self.pending = []
