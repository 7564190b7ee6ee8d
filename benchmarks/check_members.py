"""The random members `benchmarks.check_model` acts on, their magnitudes, and a claim's tolerance at each.

It also measures a model's output on them: a copy is handed to the model, and the output is held to
the contract.

A claim must hold on members of every magnitude, not only on standard normal ones. A model may clamp
or branch on large weights (|w| > 20), or overflow on them. Only large members catch that.

`MAGNITUDES` names them. `unit` has N(0, 1) entries; the negative controls are measured there too.
`realistic` is as trained members hold them. `outliers` is realistic, bar a few entries beyond 20.
`large` is 100x. `small` has every entry N(0, 1e-3^2), as a fresh zoo's epoch-0 members with
init_std 1e-3 hold them. A model that branches on small weights breaks its claim only there.

The tolerances are relative. For invariance the deviation is max |f(g . w) - f(w)| / (1 + |f(w)|).
For equivariance it is relative to each output tensor's largest entry. Float32 sums of terms 100x
larger round 100x larger in absolute terms. Hence `LARGE_RTOL` there.

At `small` an output may be as small as its members. So the invariance deviation is relative to
the output's own size: max |f(g . w) - f(w)| / min(1, max |f(w)|) (`Magnitude.own_scale`). A tiny
output cannot pass by being tiny."""

from __future__ import annotations

import dataclasses
import math

from typing import Any

import torch

from benchmarks.outputs import count_nonfinite, shape_problem, weights_output_problem
from zoo.weightspace import WeightBatch, WeightSpace

RTOL = 1e-5
LARGE_RTOL = 1e-4  # members 100x larger: a float32 sum of 100x larger terms rounds 100x larger in absolute terms
EQUIVARIANT_GAP, EQUIVARIANT_MOVES = 1e-4, 1e-3


@dataclasses.dataclass(frozen=True)
class Magnitude:
    """How large the checked members' weights are: how they are drawn, and the tolerance of a claim there."""

    description: str
    tolerance: float  # an invariance claim's
    equivariant_tolerance: float  # an equivariance claim's (relative to each output tensor's largest entry)
    std: float | None = None  # every entry N(0, std^2); None: He-initialised weights, N(0, 0.1^2) biases
    outliers: float = 0.0  # this share of the entries set to +-U(20, 100)
    own_scale: bool = False  # the invariance deviation relative to min(1, max |f(w)|), not to 1 + |f(w)|


# a claim must hold at every magnitude; the groups a model does not claim are measured at "unit" only
MAGNITUDES = {
    "unit": Magnitude("N(0, 1) entries", RTOL, EQUIVARIANT_GAP, std=1.0),
    # as trained members hold them: the tiny CNN zoo's weights have std 0.27-0.30 and biases 0.11-0.19.
    # A weight output's small tensors there round relatively more (ScaleGMN: 1.1e-4): 1e-3, still far below a break
    "realistic": Magnitude("He-initialised weights N(0, 2/fan_in), biases N(0, 0.01)", RTOL, EQUIVARIANT_MOVES),
    "outliers": Magnitude("realistic, with 2% of the entries +-U(20, 100)", LARGE_RTOL, EQUIVARIANT_MOVES,
                          outliers=0.02),
    "large": Magnitude("N(0, 100^2) entries (most beyond 20)", LARGE_RTOL, EQUIVARIANT_MOVES, std=100.0),
    # a fresh zoo's epoch-0 members (init_std 1e-3: every |w| below ~0.005); float32 rounds relatively as at "unit"
    "small": Magnitude("N(0, 1e-3^2) entries (as epoch-0 members with init_std 1e-3), deviation relative to "
                       "min(1, the output's largest value)", RTOL, EQUIVARIANT_MOVES, std=1e-3, own_scale=True),
}


def random_weights(weight_space: WeightSpace, size: int, seed: int, denormal: bool = False,
                   magnitude: str = "unit") -> WeightBatch:
    """Members drawn at `magnitude` (`MAGNITUDES`; "unit": standard normal).

    With `denormal`, 10% of the entries are denormals of the same sign."""
    generator = torch.Generator().manual_seed(seed)
    drawn = MAGNITUDES[magnitude]
    tensors = []
    for t in weight_space.tensors:
        x = torch.randn(size, *t.shape, generator=generator)
        if drawn.std is not None:
            x = x * drawn.std
        else:  # He initialisation for weights (fan_in: every axis but the first), 0.1 for biases
            x = x * (math.sqrt(2 / math.prod(t.shape[1:])) if t.role == "weight" and len(t.shape) > 1 else 0.1)
        if drawn.outliers:
            chosen = torch.rand(x.shape, generator=generator) < drawn.outliers
            far = (torch.empty(x.shape).uniform_(20, 100, generator=generator)
                   * torch.randn(x.shape, generator=generator).sign())
            x = torch.where(chosen, far, x)
        if denormal:  # as Adam-trained members hold
            tiny = torch.exp(torch.empty(x.shape).uniform_(math.log(1e-45), math.log(1e-39), generator=generator))
            x = torch.where(torch.rand(x.shape, generator=generator) < 0.1, tiny * x.sign(), x)
        tensors.append(x)
    return WeightBatch(weight_space, tuple(tensors))


def deviation(moved: torch.Tensor, output: torch.Tensor, magnitude: str = "unit") -> float:
    if MAGNITUDES.get(magnitude) is not None and MAGNITUDES[magnitude].own_scale:  # relative to the output's size
        return ((moved - output).abs().max() / output.abs().max().clamp(min=1e-30, max=1.0)).item()
    return ((moved - output).abs() / (1 + output.abs())).max().item()


def called(model: torch.nn.Module, weights: WeightBatch, role: str, seed: int) -> tuple[Any, tuple[str, str] | None]:
    """The model's output on a copy of `weights`, and whether the call changed that copy in place.

    A change gives ("modifies its input", which tensor). A model that mutates its input corrupts the
    batch it is given. That is its own verdict, never one on a claim."""
    given = WeightBatch(weights.space, tuple(t.clone() for t in weights.tensors))
    versions = [t._version for t in given.tensors]
    with torch.no_grad():
        output = model(given)
    for spec, before, after, version in zip(weights.space.tensors, weights.tensors, given.tensors, versions):
        if after._version != version or after.shape != before.shape or not torch.equal(after, before):
            return output, ("modifies its input", f"{role}, seed {seed}: tensor {spec.name}")
    return output, None


def relative_gap(a: WeightBatch, b: WeightBatch) -> float:
    return max(((x - y).abs().max() / y.abs().max().clamp_min(1e-12)).item() for x, y in zip(a.tensors, b.tensors))


def contract(output: Any, size: int, width: int, role: str, seed: int) -> tuple[str, str] | None:
    """("wrong shape" or "not finite", what was seen) for an invariant output that breaks the contract."""
    problem = shape_problem(output, size, width)
    if problem is not None:
        wrong = "wrong dtype" if isinstance(output, torch.Tensor) and not output.is_floating_point() else "wrong shape"
        return wrong, f"{role}, seed {seed}: {problem}"
    counted = count_nonfinite(output)
    return None if counted is None else ("not finite", f"{role}, seed {seed}: {counted}")


def weights_contract(output: Any, weights: WeightBatch, role: str, seed: int) -> tuple[str, str] | None:
    problem = weights_output_problem(output, weights)
    if problem is None:
        return None
    return ("not finite" if "not finite" in problem else "wrong shape"), f"{role}, seed {seed}: {problem}"
