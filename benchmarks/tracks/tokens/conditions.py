"""Which way a head drives its tokens: the regime of dx_i/dt = sum_j softmax_j(x_i^T W x_j) V x_j.

Pham, Nguyen The, Tran, Chung, Tong, Nguyen and Vo, "Dynamical Properties of Tokens in
Self-Attention and Effects of Positional Encoding" (NeurIPS 2025) study the continuous-time
limit of attention with weights shared across depth (Sec. 3 of the paper): tokens x_1..x_n in
R^D obey

    dx_i/dt = sum_j P_ij V x_j,   P_ij = exp(x_i^T W x_j) / sum_k exp(x_i^T W x_k),       (1)

where, for a head with query, key, value and output maps W_q, W_k (d_k x D), W_v (d_v x D) and
O (D x d_v), W = W_q^T W_k / sqrt(d_k) is the matrix the score uses and V = O W_v the value map.
The paper gives sufficient conditions on the symmetric parts of the parameter matrices for the
tokens to converge to zero or diverge to infinity. Its theorem statements were not reachable
from this machine (only the abstract), so the conditions here are reconstructed from two facts
and one derivation, and `dynamics` checks them against integration:

- its public code (Fsoft-AIC/Attn-token-dynamic, `definite_reparametrizations.py`, read for
  facts) holds sym(W) = (W + W^T)/2 positive definite in every scenario and sets the signature
  of the symmetric part of A, with V = W^{-1} A (the value map solved from A), to all positive,
  half negative or all negative: the divergent, mixed and convergent scenarios;
- the derivation: with sym(W) positive definite, the token i of largest energy
  e_i = x_i^T sym(W) x_i scores itself highest (Cauchy-Schwarz in the sym(W) inner product,
  x_i^T sym(W) x_j <= sqrt(e_i e_j) <= e_i; exactly so when W is symmetric), so when scores are
  large its velocity tends to V x_i and

      de_i/dt = 2 x_i^T sym(W) V x_i = 2 x_i^T sym(A) x_i,   A = sym(W) V:                  (2)

  the largest energy grows when sym(A) is positive definite and shrinks when it is negative
  definite. Two exact special cases, used as closed-form tests: a single token (or tokens that
  coincide) follows x(t) = exp(V t) x(0) for any W, and the symmetric part of V bounds its norm,
  |x(t)| between exp(lambda_min(sym V) t) and exp(lambda_max(sym V) t) times |x(0)|.

A head is therefore `divergent` when sym(W) and sym(A) are positive definite, `convergent` when
sym(W) is positive definite and sym(A) negative definite, `mixed` when sym(A) is indefinite (its
share of negative eigenvalues is reported) and `undecided` when sym(W) is not positive definite
(the premise of (2) fails). Eigenvalues within `tolerance` times the largest magnitude count as
zero and make the definiteness fail.

Pretrained heads are low-rank (W and V have rank at most d_k, d_v < D). The velocity in (1)
lies in the range of V, so the component of every token orthogonal to range(V) never moves and
the dynamics live in that d_v-dimensional subspace: with U an orthonormal basis of range(V),
a token's moving part r = U^T x follows (1) with the reduced matrices U^T W U and U^T V U (plus a
bounded drive from the frozen part). The conditions are then read on the reduced matrices
(`reduce_to_value_range`), and "diverge" or "converge" speaks of the moving part.

Positional encodings. An absolute encoding is added to the tokens before the first layer: it
changes x(0), not W or V, so the regime is unchanged (the trajectory is not). Rotary encoding
rotates each token by its position before the score: x_i^T R_i^T W R_j x_j, so the self-score of
position p uses R_p^T W R_p, whose symmetric part is congruent to sym(W) (still positive
definite), but (2) becomes de/dt = 2 x^T sym(R_p^T sym(W) R_p V) x, whose signature can differ
from position to position (`rotary_regimes`). The paper's refinement for rotary models adds a
learnable positive diagonal term x_i^T diag(c) x_j to the score (its code: c = softplus(.)
initialised at 0.05): rotation-free, it makes the self-score matrix R_p^T sym(W) R_p + diag(c)
and pulls every position's A_p towards diag(c) V.
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
    """(W, V) of (1) for a head with q = W_q x, k = W_k x (d_k x D), v = W_v x (d_v x D) and output O v (D x d_v)."""
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
    """(U^T W U, U^T V U) on the range of V: the matrices of the moving part of the tokens
    (`basis`: U when the caller has it already)."""
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
    """The regime of (1) by the conditions of the module docstring (on the range of V when V is
    rank-deficient and `reduce`)."""
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
    """Each position's regime under rotary encoding, with the refinement's diagonal score term
    diag(c) (0: none): the conditions on (R_p^T W R_p + diag(c), V)."""
    w = np.asarray(w, dtype=np.float64)
    extra = np.diag(np.broadcast_to(np.asarray(diagonal, dtype=np.float64), (w.shape[0],)))
    out = []
    for p in positions:
        r = rotation(p, w.shape[0], base)
        out.append(classify(r.T @ w @ r + extra, v, tolerance, reduce=False))
    return out

