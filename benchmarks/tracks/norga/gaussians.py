"""Per-class Gaussian statistics of features, and pseudo-features drawn from them.

HiDe-Prompt (Wang et al., NeurIPS 2023, Sec. 4) and NoRGa (Le et al., NeurIPS 2024) keep no
examples of past tasks. After each task they store each class's feature mean and covariance. Later
they train classifiers on features sampled from N(mean, cov) of every class seen so far. These are
the task-identity classifier's alignment, and the task-adaptive head's retraining.

Facts from the authors' code: the covariance is `torch.cov` of the class's features plus 1e-4 I.
Each class contributes the same number of samples per epoch."""

from __future__ import annotations

import dataclasses

import torch

RIDGE = 1e-4  # added to every covariance's diagonal (the authors' value)


@dataclasses.dataclass
class ClassGaussians:
    """Means (K, D) and the Cholesky factors (K, D, D) of the covariances of the classes seen so far."""

    labels: list[int] = dataclasses.field(default_factory=list)
    means: list[torch.Tensor] = dataclasses.field(default_factory=list)
    factors: list[torch.Tensor] = dataclasses.field(default_factory=list)

    def add(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        """Stores the statistics of every class in `labels` (features (N, D))."""
        features = features.detach().to(torch.float64)
        for label in sorted(set(labels.tolist())):
            if label in self.labels:
                raise ValueError(f"class {label} already has statistics")
            members = features[labels == label]
            if len(members) < 2:
                raise ValueError(f"class {label} has {len(members)} feature(s); a covariance needs 2")
            covariance = torch.cov(members.T) + RIDGE * torch.eye(members.shape[1], dtype=torch.float64,
                                                                  device=members.device)
            self.labels.append(label)
            self.means.append(members.mean(0))
            self.factors.append(torch.linalg.cholesky(covariance))

    def sample(self, per_class: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """`per_class` pseudo-features of every stored class: (features float32, labels), shuffled.

        They are on the statistics' device. The draws come from `generator`, on the CPU, whatever that
        device."""
        if not self.labels:
            raise ValueError("no class statistics stored yet")
        means, factors = torch.stack(self.means), torch.stack(self.factors)
        noise = torch.randn((len(self.labels), per_class, means.shape[1]), generator=generator, dtype=torch.float64)
        features = means[:, None, :] + torch.einsum("kij,knj->kni", factors, noise.to(means.device))
        labels = torch.tensor(self.labels).repeat_interleave(per_class)
        order = torch.randperm(len(labels), generator=generator)
        return features.reshape(-1, means.shape[1])[order].to(torch.float32), labels[order].to(means.device)
