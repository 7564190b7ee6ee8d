"""A prompt pool with keys, and the two ways a query picks from it.

L2P (Wang et al., CVPR 2022, Sec. 4.2, Eq. 3-5) keeps M prompts P_j, each L tokens of width D. So
do WAVE-CRE's per-task pools (Le et al., AAAI 2025, Sec. 4). Each prompt has a key k_j in the query
space. Below, gamma is the cosine similarity.

Selection is the papers' rule. It takes the N prompts whose keys are most similar to the query
q(x), concatenated into an N * L-token prompt. The pull constraint is the sum of gamma(q, k_j) over
the chosen keys. A loss subtracts lambda times it, or adds lambda * (1 - gamma).

Mixture is the public WAVE code's rule, an option. It weighs the whole pool by
w = softmax_j gamma(q, k_j). The prompt is the single L-token (1/M) sum_j w_j P_j. The pull is still
over the top N keys.

The pool initialises prompts, then keys, uniformly in [-1, 1] from the generator it is given."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

SELECTIONS = ("top-n", "mixture")


class PromptPool(nn.Module):
    def __init__(self, size: int, length: int, dim: int, key_dim: int, generator: torch.Generator):
        super().__init__()
        if size < 1 or length < 1:
            raise ValueError(f"a prompt pool needs at least one prompt of one token, got {size} x {length}")
        self.prompts = nn.Parameter(torch.rand((size, length, dim), generator=generator) * 2 - 1)
        self.keys = nn.Parameter(torch.rand((size, key_dim), generator=generator) * 2 - 1)

    @property
    def size(self) -> int:
        return self.prompts.shape[0]

    def similarity(self, queries: torch.Tensor) -> torch.Tensor:
        """gamma(q, k_j) for every query and key: (B, M)."""
        return F.normalize(queries, dim=1) @ F.normalize(self.keys, dim=1).T

    def chosen(self, queries: torch.Tensor, top_n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The indices (B, N) of the N most similar keys and their similarities (B, N)."""
        if not 1 <= top_n <= self.size:
            raise ValueError(f"cannot choose {top_n} of a pool of {self.size} prompts")
        top = self.similarity(queries).topk(top_n, dim=1)
        return top.indices, top.values

    def prompt(self, queries: torch.Tensor, top_n: int, selection: str = "top-n") -> tuple[torch.Tensor, torch.Tensor]:
        """(the prompt for each query, the pull).

        The prompt is (B, N * L, D), or (B, L, D) for the mixture. The pull (B,) sums gamma(q, k) over the N
        chosen keys."""
        index, similarity = self.chosen(queries, top_n)
        if selection == "top-n":
            tokens = self.prompts[index].flatten(1, 2)
        elif selection == "mixture":
            weights = self.similarity(queries).softmax(dim=1)  # (B, M)
            tokens = torch.einsum("bm,mld->bld", weights, self.prompts) / self.size
        else:
            raise ValueError(f"unknown prompt selection {selection!r}; expected one of {SELECTIONS}")
        return tokens, similarity.sum(dim=1)
