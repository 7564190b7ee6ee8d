"""Integrating a frozen head's token ODE (`conditions`, Eq. 1) and measuring what the tokens do.

The right-hand side is Eq. (1) for a batch of sequences, with a padding mask. Rotary encoding (the
score x_i^T R_i^T W R_j x_j) and the refinement's diagonal score term are optional. It is
integrated by classical fourth-order Runge-Kutta with a fixed step, batched in torch in float64.
`tests/tracks/test_token_conditions.py` checks this against `scipy.integrate.solve_ivp` (RK45 at
rtol 1e-10). Time is measured in units of 1 / |V|_2 (`horizon`). So heads of any scale are run for
comparable spans.

Along the trajectory it records three means per time point, averaged over sequences. They are the
token norm, the pairwise distance and the pairwise cosine similarity. Pairs range over the tokens
a mask keeps. Each is recorded for the whole token and for its moving part, its projection on the
range of V (`conditions`).

The observed regime compares the moving part's mean norm at the end with its start. It is
`divergent` when the norm grew by more than `factor`, and `convergent` when it shrank by more than
`factor`. Otherwise it is `bounded`. A run whose norm passes `blowup` is stopped and divergent."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import torch

Field = Callable[[torch.Tensor], torch.Tensor]


def rotations(length: int, dimension: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE's rotations for positions 0..length-1 as (length, D, D) float64 (`conditions.rotation`)."""
    from benchmarks.tracks.tokens.conditions import rotation

    return torch.from_numpy(np.stack([rotation(p, dimension, base) for p in range(length)]))


def attention_field(w: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                    rotary: torch.Tensor | None = None, diagonal: torch.Tensor | None = None) -> Field:
    """x (B, T, D) -> dx/dt of Eq. (1).

    `mask` (B, T) keeps tokens; padding is never attended to. `rotary` (T, D, D) rotates each position
    before the score. `diagonal` (D,) adds x_i^T diag(c) x_j."""

    def field(x: torch.Tensor) -> torch.Tensor:
        y = x if rotary is None else torch.einsum("tij,btj->bti", rotary, x)
        scores = y @ w @ y.transpose(1, 2)
        if diagonal is not None:
            scores = scores + (x * diagonal) @ x.transpose(1, 2)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        velocity = torch.softmax(scores, dim=-1) @ x @ v.T
        return velocity if mask is None else velocity * mask[..., None]

    return field


def rk4(field: Field, x0: torch.Tensor, t_end: float, steps: int, blowup: float = 1e8,
        observe: Callable[[torch.Tensor], None] | None = None) -> tuple[torch.Tensor, int]:
    """Integrates dx/dt = field(x) from 0 to t_end in `steps` RK4 steps.

    It calls observe(x) at each of the steps + 1 time points. Once max |x| passes blowup it stops
    early, and returns the steps taken."""
    h, x = t_end / steps, x0
    if observe:
        observe(x)
    for step in range(steps):
        k1 = field(x)
        k2 = field(x + h / 2 * k1)
        k3 = field(x + h / 2 * k2)
        k4 = field(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if observe:
            observe(x)
        if not torch.isfinite(x).all() or x.abs().max() > blowup:
            return x, step + 1
    return x, steps


def _pairwise(x: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """Mean pairwise distance and cosine similarity over distinct kept tokens, averaged over sequences."""
    pair = (mask[:, :, None] & mask[:, None, :]) & ~torch.eye(x.shape[1], dtype=torch.bool)[None]
    distance = torch.cdist(x, x)
    unit = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    cosine = unit @ unit.transpose(1, 2)
    count = pair.sum((1, 2)).clamp_min(1)
    return (float(((distance * pair).sum((1, 2)) / count).mean()), float(((cosine * pair).sum((1, 2)) / count).mean()))


@dataclasses.dataclass
class Trajectory:
    times: list[float]
    norm: list[float]  # mean token norm
    distance: list[float]  # mean pairwise distance
    cosine: list[float]  # mean pairwise cosine similarity
    moving_norm: list[float]  # the same three of the moving part (the projection on range V)
    moving_distance: list[float]
    moving_cosine: list[float]
    stopped: bool  # passed the blow-up bound

    def growth(self) -> float:
        """The moving part's mean norm at the end over its start."""
        return self.moving_norm[-1] / max(self.moving_norm[0], 1e-300)

    def observed(self, factor: float = 2.0) -> str:
        if self.stopped or self.growth() > factor:
            return "divergent"
        return "convergent" if self.growth() < 1 / factor else "bounded"

    def to_data(self) -> dict:
        return {**dataclasses.asdict(self), "growth": self.growth(), "observed": self.observed()}


def horizon(v: np.ndarray | torch.Tensor, units: float) -> float:
    """`units` in the head's own time scale 1 / |V|_2."""
    norm = float(np.linalg.norm(np.asarray(v, dtype=np.float64), 2))
    return units / max(norm, 1e-12)


def integrate(w: np.ndarray, v: np.ndarray, x0: torch.Tensor, mask: torch.Tensor | None = None, *,
              units: float = 10.0, steps: int = 200, rotary: bool = False, diagonal: np.ndarray | None = None,
              blowup: float = 1e8) -> Trajectory:
    """Integrates Eq. (1) from the tokens x0 (B, T, D) for `units` of the head's time scale."""
    from benchmarks.tracks.tokens.conditions import value_range

    x0 = torch.as_tensor(x0, dtype=torch.float64)
    keep = torch.ones(x0.shape[:2], dtype=torch.bool) if mask is None else torch.as_tensor(mask, dtype=torch.bool)
    w_t, v_t = torch.as_tensor(w, dtype=torch.float64), torch.as_tensor(v, dtype=torch.float64)
    basis = torch.from_numpy(value_range(np.asarray(v, dtype=np.float64)))
    field = attention_field(w_t, v_t, keep, rotations(x0.shape[1], x0.shape[2]) if rotary else None,
                            None if diagonal is None else torch.as_tensor(diagonal, dtype=torch.float64))
    t_end = horizon(v, units)
    rows: list[tuple[float, ...]] = []

    def observe(x: torch.Tensor) -> None:
        moving = x @ basis
        norms, moving_norms = x.norm(dim=-1), moving.norm(dim=-1)
        kept = keep.sum().clamp_min(1)
        rows.append((float((norms * keep).sum() / kept), *_pairwise(x, keep),
                     float((moving_norms * keep).sum() / kept), *_pairwise(moving, keep)))

    _, taken = rk4(field, x0 * keep[..., None], t_end, steps, blowup, observe)
    columns = list(zip(*rows))
    times = [t_end / steps * i for i in range(len(rows))]
    return Trajectory(times, *[list(c) for c in columns], stopped=taken < steps)
