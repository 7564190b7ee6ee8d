"""Optimizers over stacked parameters: one tensor holds K members, each with its own learning rate.

Each update is the single-tensor update of `torch.optim`, at torch's defaults.
The optimizers are Adam, RMSprop, SGD, and SGD with momentum 0.9.
An optional per-member coupled `weight_decay` is added to the gradient as torch.optim adds it.
The update is written elementwise over the member dimension.
It takes a per-member learning rate and a per-member `active` mask.
An inactive member's parameters and state do not move.
A member trained here follows its solo `torch.optim` trajectory to float32 rounding.
Only the order of the scalar factors differs.

`exact_sqrt` serves the portable reproducibility mode (`zoo.training.reproducibility`).
Adam's and RMSprop's square roots are then IEEE 754's, correctly rounded.
They come from NumPy's `sqrt`, the processor's sqrt instruction.
So their bits are the same on every processor.
torch's CPU `sqrt` calls MKL's vector math (`vsSqrt`), which is not correctly rounded.
MKL also picks its kernel by processor, whatever `MKL_CBWR` says.
The same inputs gave other bits on an AMD EPYC than under an emulated Intel Haswell or AMD Rome.
See tests/zoo/portable_emulated.py, and docs/reproducibility.md for how often bits differ.
On a GPU the device's own sqrt is used either way.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy
import torch


def _per_member(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(K,) -> (K, 1, ..., 1) broadcasting against `like` (K, ...), on its device."""
    return values.view(-1, *([1] * (like.ndim - 1))).to(device=like.device, dtype=like.dtype)


@dataclasses.dataclass
class StackedOptimizer:
    """Holds per-parameter state; `step` updates parameters in place."""

    params: list[torch.Tensor]
    learning_rate: torch.Tensor  # (K,) float64
    kind: str
    state: list[dict[str, torch.Tensor]] = dataclasses.field(default_factory=list)
    steps: torch.Tensor | None = None  # (K,) steps taken per member (Adam's bias correction)
    weight_decay: torch.Tensor | None = None  # (K,) coupled L2 as torch.optim's weight_decay (None: none)
    exact_sqrt: bool = False  # IEEE's correctly rounded sqrt on the CPU (the portable mode), else torch's

    def __post_init__(self) -> None:
        if self.kind not in UPDATES:
            raise ValueError(f"unknown optimizer {self.kind!r}; valid: {sorted(UPDATES)}")
        self.state = [{} for _ in self.params]
        self.steps = torch.zeros(len(self.learning_rate), dtype=torch.float64, device=self.learning_rate.device)

    @torch.no_grad()
    def step(self, active: torch.Tensor) -> None:
        """One update of the active members (`active`: (K,) bool)."""
        active = active.to(self.steps.device)
        self.steps += active.to(torch.float64)
        for param, state in zip(self.params, self.state):
            if param.grad is None:
                continue
            grad = param.grad
            if self.weight_decay is not None:  # torch.optim: grad = grad + weight_decay * param, before the update
                grad = grad + _per_member(self.weight_decay, param) * param
            UPDATES[self.kind](param, grad, state, self, active)

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None


def correctly_rounded_sqrt(values: torch.Tensor) -> torch.Tensor:
    """IEEE 754's square root of `values`.

    On the CPU it is NumPy's sqrt, the processor's correctly rounded instruction.
    Elsewhere it is the device's sqrt.
    """
    if values.device.type != "cpu":
        return values.sqrt()
    return torch.from_numpy(numpy.sqrt(values.detach().contiguous().numpy()))


def _sqrt(opt: "StackedOptimizer", values: torch.Tensor) -> torch.Tensor:
    return correctly_rounded_sqrt(values) if opt.exact_sqrt else values.sqrt()


def _masked(active: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    return torch.where(_per_member(active, old).bool(), new, old)


def _sgd(param, grad, state, opt: StackedOptimizer, active) -> None:
    lr = _per_member(opt.learning_rate.float(), param)
    param.copy_(_masked(active, param - lr * grad, param))


def _sgd_momentum(param, grad, state, opt: StackedOptimizer, active, momentum: float = 0.9) -> None:
    if "momentum" not in state:
        state["momentum"] = torch.zeros_like(param)
        state["started"] = torch.zeros(param.shape[0], dtype=torch.bool, device=param.device)
    started = _per_member(state["started"], param).bool()
    buffer = torch.where(started, state["momentum"] * momentum + grad, grad)  # torch: first step buf = grad
    state["momentum"] = _masked(active, buffer, state["momentum"])
    state["started"] |= active
    lr = _per_member(opt.learning_rate.float(), param)
    param.copy_(_masked(active, param - lr * state["momentum"], param))


def _rmsprop(param, grad, state, opt: StackedOptimizer, active, alpha: float = 0.99, eps: float = 1e-8) -> None:
    square = state.setdefault("square_avg", torch.zeros_like(param))
    square.copy_(_masked(active, square * alpha + (1 - alpha) * grad * grad, square))
    lr = _per_member(opt.learning_rate.float(), param)
    param.copy_(_masked(active, param - lr * grad / (_sqrt(opt, square) + eps), param))


def _adam(param, grad, state, opt: StackedOptimizer, active,
          beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
    first = state.setdefault("exp_avg", torch.zeros_like(param))
    second = state.setdefault("exp_avg_sq", torch.zeros_like(param))
    first.copy_(_masked(active, first.lerp(grad, 1 - beta1), first))
    second.copy_(_masked(active, second * beta2 + (1 - beta2) * grad * grad, second))
    steps = opt.steps.clamp(min=1)
    correction1 = 1 - beta1 ** steps  # float64, as torch computes the scalars
    correction2_sqrt = _sqrt(opt, 1 - beta2 ** steps)
    step_size = _per_member((opt.learning_rate / correction1).float(), param)
    denom = _sqrt(opt, second) / _per_member(correction2_sqrt.float(), param) + eps
    param.copy_(_masked(active, param - step_size * first / denom, param))


UPDATES: dict[str, Callable] = {"sgd": _sgd, "sgd_momentum": _sgd_momentum, "rmsprop": _rmsprop, "adam": _adam}
