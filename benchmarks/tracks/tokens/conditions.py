"""Which way a head drives its tokens: the regime of dx_i/dt = sum_j softmax_j(x_i^T W x_j) V x_j.

The paper: Pham, Nguyen The, Tran, Chung, Tong, Nguyen and Vo, "Dynamical Properties of Tokens in
Self-Attention and Effects of Positional Encoding" (NeurIPS 2025). Its Sec. 3 studies attention in
continuous time, with weights shared across depth. Tokens x_1..x_n in R^D obey

    dx_i/dt = sum_j P_ij V x_j,   P_ij = exp(x_i^T W x_j) / sum_k exp(x_i^T W x_k).       (1)

A head has query and key maps W_q, W_k (d_k x D), a value map W_v (d_v x D) and an output map
O (D x d_v). Then W = W_q^T W_k / sqrt(d_k) is the matrix the score uses, and V = O W_v.
The paper gives sufficient conditions for the tokens to converge to zero or diverge to infinity.
They bear on the symmetric parts of the parameter matrices. We could read only its abstract, not
its theorem statements. So the conditions here are rebuilt from two facts and one derivation, and
`dynamics` checks them against integration.

First, the public code (Fsoft-AIC/Attn-token-dynamic, `definite_reparametrizations.py`, read for
facts). It holds sym(W) = (W + W^T)/2 positive definite in every scenario. It solves the value map
from A as V = W^{-1} A. It sets the signature of sym(A) to all positive, half negative or all
negative. These are the divergent, mixed and convergent scenarios.

Second, the derivation. Let sym(W) be positive definite, and let token i have the largest energy
e_i = x_i^T sym(W) x_i. Then token i scores itself highest, by Cauchy-Schwarz in the sym(W) inner
product: x_i^T sym(W) x_j <= sqrt(e_i e_j) <= e_i. This holds exactly when W is symmetric. When
scores are large, its velocity tends to V x_i, and

    de_i/dt = 2 x_i^T sym(W) V x_i = 2 x_i^T sym(A) x_i,   A = sym(W) V.                  (2)

So the largest energy grows when sym(A) is positive definite and shrinks when it is negative
definite.

Two exact special cases serve as closed-form tests. A single token, or tokens that coincide,
follows x(t) = exp(V t) x(0) for any W. The symmetric part of V bounds its norm: |x(t)| lies
between exp(lambda_min(sym V) t) and exp(lambda_max(sym V) t) times |x(0)|.

A head is therefore `divergent` when sym(W) and sym(A) are positive definite. It is `convergent`
when sym(W) is positive definite and sym(A) negative definite. It is `mixed` when sym(A) is
indefinite, and the share of negative eigenvalues is reported. It is `undecided` when sym(W) is not
positive definite, since the premise of (2) fails. Eigenvalues within `tolerance` times the
largest magnitude count as zero, and make the definiteness fail.

Pretrained heads are low-rank: W and V have rank at most d_k, d_v < D. The velocity in (1) lies in
the range of V. So each token's component orthogonal to range(V) never moves. The dynamics live in
that d_v-dimensional subspace. Let U be an orthonormal basis of range(V). A token's moving part
r = U^T x follows (1) with the reduced matrices U^T W U and U^T V U. A bounded drive from the
frozen part is added. The conditions are then read on the reduced matrices
(`reduce_to_value_range`). Then "diverge" and "converge" speak of the moving part.

Positional encodings. An absolute encoding is added to the tokens before the first layer. It
changes x(0), not W or V, so the regime is unchanged (the trajectory is not). Rotary encoding
rotates each token by its position before the score: x_i^T R_i^T W R_j x_j. So the self-score of
position p uses R_p^T W R_p. Its symmetric part is congruent to sym(W), so still positive definite.
But (2) becomes de/dt = 2 x^T sym(R_p^T sym(W) R_p V) x. Its signature can differ from position to
position (`rotary_regimes`).

The paper's refinement for rotary models adds a learnable positive diagonal term x_i^T diag(c) x_j
to the score. Its code sets c = softplus(.), initialised at 0.05. The term is rotation-free. It
makes the self-score matrix R_p^T sym(W) R_p + diag(c), and pulls every A_p towards diag(c) V.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

REGIMES = ("divergent", "convergent", "mixed", "undecided")


def sym(matrix: np.ndarray) -> np.ndarray:
    return (matrix + matrix.T) / 2


def head_matrices(w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, w_o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W, V) of (1) for a head with maps W_q, W_k, W_v and O.

    Shapes: W_q and W_k are d_k x D, W_v is d_v x D, and O is D x d_v."""
    w_q, w_k, w_v, w_o = (np.asarray(m, dtype=np.float64) for m in (w_q, w_k, w_v, w_o))
    if w_q.shape != w_k.shape or w_v.shape[1] != w_q.shape[1] or w_o.shape != (w_q.shape[1], w_v.shape[0]):
        raise ValueError(f"head maps of inconsistent shapes: W_q {w_q.shape}, W_k {w_k.shape}, W_v {w_v.shape}, "
                         f"O {w_o.shape}; expected (d_k, D), (d_k, D), (d_v, D), (D, d_v)")
    return w_q.T @ w_k / math.sqrt(w_q.shape[0]), w_o @ w_v


def value_range(v: np.ndarray, tolerance: float = 1e-6) -> np.ndarray:
    """An orthonormal basis (D x r) of the range of V, r its numerical rank."""
    u, s, _ = np.linalg.svd(v)
    rank = int((s > tolerance * max(s[0], np.finfo(float).tiny)).sum())
    return u[:, :rank]


def reduce_to_value_range(w: np.ndarray, v: np.ndarray, tolerance: float = 1e-6,
                          basis: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(U^T W U, U^T V U): the matrices of the tokens' moving part, on the range of V.

    `basis` is U, when the caller has it already."""
    basis = value_range(v, tolerance) if basis is None else basis
    return basis.T @ w @ basis, basis.T @ v @ basis


@dataclasses.dataclass(frozen=True)
class HeadRegime:
    regime: str  # one of REGIMES
    dimension: int  # where the conditions were read: D, or the rank of V
    score_eigenvalues: tuple[float, float]  # min and max of sym(W)
    value_eigenvalues: tuple[float, float]  # min and max of sym(A), A = sym(W) V
    negative_share: float  # the share of sym(A)'s eigenvalues below zero

    @property
    def decided(self) -> bool:
        return self.regime in ("divergent", "convergent")


def _signs(eigenvalues: np.ndarray, tolerance: float) -> tuple[int, int, int]:
    scale = max(float(np.abs(eigenvalues).max()), np.finfo(float).tiny)
    return (int((eigenvalues > tolerance * scale).sum()), int((eigenvalues < -tolerance * scale).sum()),
            len(eigenvalues))


def classify(w: np.ndarray, v: np.ndarray, tolerance: float = 1e-6, reduce: bool = True) -> HeadRegime:
    """The regime of (1), by the conditions of the module docstring.

    With `reduce`, they are read on the range of V when V is rank-deficient."""
    w, v = np.asarray(w, dtype=np.float64), np.asarray(v, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or v.shape != w.shape:
        raise ValueError(f"W and V must be square matrices of one size, got {w.shape} and {v.shape}")
    if reduce:
        w, v = reduce_to_value_range(w, v, tolerance)
    if w.size == 0:
        return HeadRegime("undecided", 0, (0.0, 0.0), (0.0, 0.0), 0.0)
    score = np.linalg.eigvalsh(sym(w))
    value = np.linalg.eigvalsh(sym(sym(w) @ v))
    positive, _, n = _signs(score, tolerance)
    above, below, _ = _signs(value, tolerance)
    if positive < n:
        regime = "undecided"
    elif above == n:
        regime = "divergent"
    elif below == n:
        regime = "convergent"
    else:
        regime = "mixed"
    return HeadRegime(regime, n, (float(score[0]), float(score[-1])), (float(value[0]), float(value[-1])),
                      below / n)


def rotation(position: int, dimension: int, base: float = 10000.0) -> np.ndarray:
    """RoPE's rotation of one position (Su et al. 2021, Eq. 15): angle position * base^(-2i/D) on coordinate pair i."""
    if dimension % 2:
        raise ValueError(f"rotary encoding rotates coordinate pairs: the dimension must be even, got {dimension}")
    matrix = np.zeros((dimension, dimension))
    for i in range(dimension // 2):
        angle = position * base ** (-2 * i / dimension)
        c, s = math.cos(angle), math.sin(angle)
        matrix[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    return matrix


def rotary_regimes(w: np.ndarray, v: np.ndarray, positions: Sequence[int], diagonal: np.ndarray | float = 0.0,
                   tolerance: float = 1e-6, base: float = 10000.0) -> list[HeadRegime]:
    """Each position's regime under rotary encoding: the conditions on (R_p^T W R_p + diag(c), V).

    `diagonal` is c, the refinement's diagonal score term (0: none)."""
    w = np.asarray(w, dtype=np.float64)
    extra = np.diag(np.broadcast_to(np.asarray(diagonal, dtype=np.float64), (w.shape[0],)))
    out = []
    for p in positions:
        r = rotation(p, w.shape[0], base)
        out.append(classify(r.T @ w @ r + extra, v, tolerance, reduce=False))
    return out

