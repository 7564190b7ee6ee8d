"""Generative replay: one Gaussian per relation, fitted after its task, sampled to retrain shared heads.

WAVE-CRE (Le et al., AAAI 2025, Sec. 4.3) keeps no sentences of past tasks. After each task it fits
two Gaussian mixtures per relation, one component by default. One fits the relation's unprompted
queries, the other its prompted features. Later it retrains the shared task predictor and relation
classifier on pseudo-features. These are drawn from every seen relation's Gaussians.

The public code fits scikit-learn's `GaussianMixture(n_components=1, covariance_type="full",
reg_covar=1e-6)`. With one component, EM reaches its fixed point at the first M-step. That is the
sample mean and the biased sample covariance plus reg_covar * I. `add` computes this in closed form,
which is faster. The tests check it against scikit-learn's fit.

Storage: scikit-learn holds each full covariance in float64. That is 2d x 2d numbers, 4.7 MB at
2d = 768. We keep, in float32, the mean and a factor F with covariance = F F^T + r I. F takes the
cheaper of two exact forms.

The low-rank form comes from the SVD of the relation's centred features,
(X - mean) / sqrt(n) = U S V^T. Then F = V_k S_k, with k its rank (at most n - 1), and r = reg_covar.
It costs 2d * k numbers. A relation with fewer sentences than dimensions always takes it. That is
every relation here, and FewRel's 420 at 2d = 1536.

The other form is the packed lower-triangular Cholesky factor of the whole covariance. It costs
2d (2d + 1) / 2 numbers, with r = 0.

Both sample the same Gaussian, to float32 precision. The low-rank one takes 2d * k operations per
draw instead of (2d)^2. `stored_bytes` counts what is kept. `float64_full_bytes` counts what
scikit-learn's form would cost."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch


@dataclasses.dataclass
class RelationGaussians:
    reg_covar: float = 1e-6
    labels: list[int] = dataclasses.field(default_factory=list)
    means: list[np.ndarray] = dataclasses.field(default_factory=list)  # (D,) float32
    factors: list[np.ndarray] = dataclasses.field(default_factory=list)  # (D, k) low-rank, or packed Cholesky
    ridges: list[float] = dataclasses.field(default_factory=list)  # r: reg_covar (low-rank) or 0 (Cholesky)

    def add(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        """Fits one Gaussian per relation in `labels` to its rows of `features` (N, D)."""
        data = features.detach().double().cpu().numpy()
        labels = labels.cpu().numpy()
        for label in sorted(set(labels.tolist())):
            if label in self.labels:
                raise ValueError(f"relation {label} already has a Gaussian")
            members = data[labels == label]
            if len(members) < 2:
                raise ValueError(f"relation {label} has {len(members)} feature(s); a Gaussian needs 2")
            mean = members.mean(0)
            centred = (members - mean) / np.sqrt(len(members))
            _, singular, right = np.linalg.svd(centred, full_matrices=False)
            rank = int((singular > singular.max() * 1e-7).sum()) if singular.max() > 0 else 0
            dim = members.shape[1]
            if dim * rank < dim * (dim + 1) // 2:
                factor, ridge = (right[:rank].T * singular[:rank]).astype(np.float32), self.reg_covar
            else:
                covariance = centred.T @ centred + self.reg_covar * np.eye(dim)
                factor, ridge = np.linalg.cholesky(covariance)[np.tril_indices(dim)].astype(np.float32), 0.0
            self.labels.append(label)
            self.means.append(mean.astype(np.float32))
            self.factors.append(factor)
            self.ridges.append(ridge)

    def factor(self, k: int) -> np.ndarray:
        """Relation k's factor F (D, k or D), covariance = F F^T + ridge I."""
        stored, dim = self.factors[k], len(self.means[k])
        if stored.ndim == 2:
            return stored
        full = np.zeros((dim, dim), dtype=np.float32)
        full[np.tril_indices(dim)] = stored
        return full

    def covariance(self, k: int) -> np.ndarray:
        factor = self.factor(k).astype(np.float64)
        return factor @ factor.T + self.ridges[k] * np.eye(len(factor))

    def sample(self, per_relation: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """`per_relation` pseudo-features of every stored relation (float32, shuffled) and their labels."""
        if not self.labels:
            raise ValueError("no relation Gaussians stored yet")
        draws = []
        for k in range(len(self.labels)):
            factor = torch.from_numpy(self.factor(k))
            noise = torch.randn((per_relation, factor.shape[1]), generator=generator)
            draw = torch.from_numpy(self.means[k]) + noise @ factor.T
            if self.ridges[k]:
                draw = draw + self.ridges[k] ** 0.5 * torch.randn((per_relation, len(factor)), generator=generator)
            draws.append(draw)
        labels = torch.tensor(self.labels).repeat_interleave(per_relation)
        order = torch.randperm(len(labels), generator=generator)
        return torch.cat(draws)[order], labels[order]

    def stored_bytes(self) -> int:
        return int(sum(m.nbytes + f.nbytes + 4 for m, f in zip(self.means, self.factors)))

    def float64_full_bytes(self) -> int:
        return int(sum(8 * (len(m) + len(m) ** 2) for m in self.means))
