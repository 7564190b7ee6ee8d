"""Symmetries of the Transformer family's weights (pre-LayerNorm encoder blocks, ReLU MLPs).

The group is from Tran et al. 2025, "Equivariant Neural Functional Networks for Transformers"
(ICLR 2025).
The paper finds the maximal group preserving a multi-head attention map,
(GL(d_k)^h x GL(d_v)^h) ⋊ S_h.
It acts on an encoder block's weights together with two permutations.
One is pi_O, of the model dimension after the attention; the other is pi_A, of the MLP's hidden units.

The paper uses the row-vector convention.
There W_Q^(i), W_K^(i) are in R^{D x d_k} and W_V^(i) is in R^{D x d_v}.
W_O^(i) is in R^{d_v x D}, W_A in R^{D x D_A} and W_B in R^{D_A x D}.
One block's element g = (tau, M, N, pi_O, pi_A, ...) acts as

    W_Q^(i) -> P_in^T W_Q^(tau(i)) M_i^T;        W_K^(i) -> P_in^T W_K^(tau(i)) M_i^{-1};
    W_V^(i) -> P_in^T W_V^(tau(i)) N_i;          W_O^(i) -> N_i^{-1} W_O^(tau(i)) P_O;
    W_A -> P_O^T W_A P_A D_A,   b_A -> b_A P_A D_A;   W_B -> D_A^{-1} P_A^T W_B P_B,   b_B -> b_B P_B.

So Q K^T and each head's V W_O are unchanged.
Here M_i belongs to new head i and is applied to old head tau(i).
The paper attaches it to the old head instead; the group is the same.

PyTorch stores the transposes (`nn.Linear.weight` is (out, in)).
So the query rows of head i become M_i @ rows[tau(i)].
The key rows become M_i^{-T} @ rows[tau(i)], and the value rows N_i^T @ rows[tau(i)].
The out-projection's column block i becomes cols[tau(i)] @ N_i^{-T}.

This architecture admits more than the paper's group, within limits.
Each claim below is tested in tests/zoo/test_attention_symmetry.py, with negative controls.

D_A is a positive diagonal on the MLP hidden units (`mlp_scaling`).
It holds because ReLU(d z) = d ReLU(z) for d > 0.
The paper's group has only P_A.

Without residual connections, each sublayer's output is read only through a LayerNorm.
That LayerNorm has no scale or shift, and LN(y P) = LN(y) P.
So the model dimension can be permuted after the attention: P_O, the paper's pi_O.
It can also be permuted after the MLP: P_B (`permute_block_outputs`), not in the paper's group.
P_B is read by the next block's Q/K/V (P_in above).
After the last block, the final LayerNorm, the mean pooling and the classifier's first layer read it.
Feature *scalings* there are not symmetries: the LayerNorm's mean and variance mix the features.

The model dimension entering the first block is fixed.
A sinusoidal positional encoding is added to the patch (or word) embedding.
It is not a weight, yet it would have to be permuted too.

With residual connections (`residual=True`), no model-dimension permutation survives.
Every sublayer output is added to the stream, which starts with the fixed positional encoding.
So P_O = P_B = I, and only the heads, GL factors and MLP units remain.

LN(-y) = -LN(y) also gives a global sign flip of a whole interface; it is not included.

Elements are batched along a leading dimension: B members get B independent elements.
The GL matrices are float64 and are cast to the weights' dtype when acting.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from zoo.weightspace import WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class AttentionElement:
    """Per encoder block (tuples indexed by block); permutations say "new unit i is old unit p[:, i]"."""

    heads: tuple[torch.Tensor, ...]  # (B, h) int64: tau
    query_key: tuple[torch.Tensor, ...]  # (B, h, d_k, d_k) float64: M_i, invertible
    value_output: tuple[torch.Tensor, ...]  # (B, h, d_v, d_v) float64: N_i, invertible
    attention_features: tuple[torch.Tensor, ...]  # (B, D) int64: P_O, after the attention's out-projection
    hidden_units: tuple[torch.Tensor, ...]  # (B, D_A) int64: P_A
    hidden_scales: tuple[torch.Tensor, ...]  # (B, D_A) float64: the diagonal of D_A
    block_features: tuple[torch.Tensor, ...]  # (B, D) int64: P_B, after the MLP (the block's output)

    @property
    def batch_size(self) -> int:
        return self.heads[0].shape[0]


def _permute(tensor: torch.Tensor, axis: int, permutation: torch.Tensor) -> torch.Tensor:
    """tensor (B, ...) with axis `axis` (after the batch dim) reindexed: new[i] = old[permutation[:, i]]."""
    shape = [permutation.shape[0]] + [1] * (tensor.ndim - 1)
    shape[axis + 1] = permutation.shape[1]
    return torch.gather(tensor, axis + 1, permutation.view(shape).expand(tensor.shape))


def _along(values: torch.Tensor, axis: int, ndim: int) -> torch.Tensor:
    shape = [values.shape[0]] + [1] * (ndim - 1)
    shape[axis + 1] = values.shape[1]
    return values.view(shape)


def _heads(matrices: torch.Tensor, permutation: torch.Tensor) -> torch.Tensor:
    """(B, h, ...) reindexed along the head axis."""
    return matrices[torch.arange(matrices.shape[0])[:, None], permutation]


def _random_permutation(generator: torch.Generator, batch_size: int, n: int) -> torch.Tensor:
    return torch.argsort(torch.rand(batch_size, n, generator=generator), dim=1)


def _random_orthogonal(generator: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    """Haar-distributed orthogonal matrices: QR of a Gaussian, signs fixed by R's diagonal."""
    q, r = torch.linalg.qr(torch.randn(*shape, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)


@dataclasses.dataclass(frozen=True)
class AttentionSymmetry:
    """The group acting on the weights of `zoo.families.transformer` members (module docstring).

    `AttentionSymmetry(space, heads, mlp_scaling=False, permute_block_outputs=False)` is exactly
    the Transformer-NFN group of the paper (per block: tau, M, N, pi_O, pi_A).
    """

    space: WeightSpace
    num_heads: int
    residual: bool = False  # True: no model-dimension permutations (P_O = P_B = I)
    mlp_scaling: bool = True  # positive scaling of the MLP hidden units (ReLU)
    permute_block_outputs: bool = True  # P_B; only without residuals
    max_log_scale: float = math.log(2.0)  # GL singular values and MLP scales are log-uniform in [1/2, 2]
    # None: GL condition numbers up to exp(2 max_log_scale); a number k: every GL element's
    # singular values span exactly [k^-1/2, k^1/2] (both ends attained, the rest log-uniform between)
    condition_number: float | None = None
    # True: M_i and N_i are permutation matrices and D_A = I, the subgroup that only relabels
    # neurons (heads, a head's query/key rows jointly, its value rows, pi_O, pi_A): what a graph
    # metanetwork's node relabelling is exact to ("attention-permutation" in `nfn_models`)
    permutations_only: bool = False

    def __post_init__(self) -> None:
        missing = [name for b in range(self.num_blocks) for name in self._block_names(b).values()
                   if name not in self._index]
        if self.num_blocks == 0 or missing or "classifier.fc1.weight" not in self._index:
            raise ValueError("not a transformer-family weight space: expected encoder.<b>.attention.{queries,keys,"
                             f"values,out_projection}}.weight, encoder.<b>.fc1/fc2 and classifier.fc1; "
                             f"missing {missing}")

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.space.names)}

    @functools.cached_property
    def num_blocks(self) -> int:
        return sum(1 for name in self.space.names if name.endswith(".attention.queries.weight"))

    @staticmethod
    def _block_names(block: int) -> dict[str, str]:
        prefix = f"encoder.{block}."
        names = {m: f"{prefix}attention.{m}.weight" for m in ("queries", "keys", "values", "out_projection")}
        names.update({f"{m}.{r}": f"{prefix}{m}.{r}" for m in ("fc1", "fc2") for r in ("weight", "bias")})
        return names

    def _shape(self, name: str) -> tuple[int, ...]:
        return self.space.tensors[self._index[name]].shape

    @property
    def sizes(self) -> dict[str, int]:
        """d_model, d_k, d_v and the MLP width, read off the weight space."""
        names = self._block_names(0)
        inner_k, d_model = self._shape(names["queries"])
        return {"d_model": d_model, "d_k": inner_k // self.num_heads,
                "d_v": self._shape(names["values"])[0] // self.num_heads, "mlp": self._shape(names["fc1.weight"])[0]}

    def identity(self, batch_size: int) -> AttentionElement:
        s, h, n = self.sizes, self.num_heads, self.num_blocks

        def arange(size: int) -> tuple[torch.Tensor, ...]:
            return tuple(torch.arange(size).expand(batch_size, size).clone() for _ in range(n))

        def eye(size: int) -> tuple[torch.Tensor, ...]:
            return tuple(torch.eye(size, dtype=torch.float64).expand(batch_size, h, size, size).clone()
                         for _ in range(n))

        return AttentionElement(arange(h), eye(s["d_k"]), eye(s["d_v"]), arange(s["d_model"]), arange(s["mlp"]),
                                tuple(torch.ones(batch_size, s["mlp"], dtype=torch.float64) for _ in range(n)),
                                arange(s["d_model"]))

    def _random_gl(self, generator: torch.Generator, batch_size: int, size: int) -> torch.Tensor:
        """Invertible matrices U diag(s) V^T, with Haar U, V and log-uniform s.

        The condition number is at most exp(2 max_log_scale), 4 by default, or exactly `condition_number`.
        """
        shape = (batch_size, self.num_heads, size, size)
        u, v = _random_orthogonal(generator, shape), _random_orthogonal(generator, shape)
        unit = 2 * torch.rand(batch_size, self.num_heads, size, generator=generator, dtype=torch.float64) - 1
        if self.condition_number is None:
            s = torch.exp(unit * self.max_log_scale)
        else:
            if not self.condition_number >= 1:
                raise ValueError(f"condition_number must be >= 1, got {self.condition_number}")
            if size > 1:
                unit[..., 0], unit[..., 1] = 1.0, -1.0  # the extremes, attained
            s = torch.exp(unit * math.log(self.condition_number) / 2)
        return u * s.unsqueeze(-2) @ v.transpose(-1, -2)

    def _random_permutation_matrices(self, generator: torch.Generator, batch_size: int, size: int) -> torch.Tensor:
        """(B, h, size, size) float64 permutation matrices: M^{-T} = M, so queries and keys move alike."""
        order = torch.rand(batch_size, self.num_heads, size, generator=generator).argsort(-1)
        return torch.eye(size, dtype=torch.float64)[order]

    def sample(self, generator: torch.Generator, batch_size: int) -> AttentionElement:
        s, identity = self.sizes, self.identity(batch_size)
        parts: dict[str, list[torch.Tensor]] = {f.name: [] for f in dataclasses.fields(AttentionElement)}
        for b in range(self.num_blocks):
            parts["heads"].append(_random_permutation(generator, batch_size, self.num_heads))
            inner = self._random_permutation_matrices if self.permutations_only else self._random_gl
            parts["query_key"].append(inner(generator, batch_size, s["d_k"]))
            parts["value_output"].append(inner(generator, batch_size, s["d_v"]))
            parts["attention_features"].append(identity.attention_features[b] if self.residual
                                               else _random_permutation(generator, batch_size, s["d_model"]))
            parts["hidden_units"].append(_random_permutation(generator, batch_size, s["mlp"]))
            parts["hidden_scales"].append(
                torch.exp((2 * torch.rand(batch_size, s["mlp"], generator=generator, dtype=torch.float64) - 1)
                          * self.max_log_scale) if self.mlp_scaling and not self.permutations_only
                else identity.hidden_scales[b])
            parts["block_features"].append(identity.block_features[b] if self.residual or not self.permute_block_outputs
                                           else _random_permutation(generator, batch_size, s["d_model"]))
        return AttentionElement(**{name: tuple(values) for name, values in parts.items()})

    def act(self, element: AttentionElement, weights: WeightBatch) -> WeightBatch:
        tensors = list(weights.tensors)
        batch, h = len(weights), self.num_heads
        for b in range(self.num_blocks):
            i = {key: self._index[name] for key, name in self._block_names(b).items()}
            tau = element.heads[b]
            m, n = element.query_key[b], element.value_output[b]
            m_inverse_t, n_inverse_t = torch.linalg.inv(m).transpose(-1, -2), torch.linalg.inv(n).transpose(-1, -2)
            for key, left in (("queries", m), ("keys", m_inverse_t), ("values", n.transpose(-1, -2))):
                rows = tensors[i[key]]  # (B, h * d, D)
                heads = _heads(rows.view(batch, h, -1, rows.shape[-1]), tau)  # (B, h, d, D)
                rows = (left.to(rows.dtype) @ heads).reshape(rows.shape)
                if b > 0:  # the previous block's output features, P_in
                    rows = _permute(rows, 1, element.block_features[b - 1])
                tensors[i[key]] = rows
            out = tensors[i["out_projection"]]  # (B, D, h * d_v)
            blocks = _heads(out.view(batch, out.shape[1], h, -1).transpose(1, 2), tau)  # (B, h, D, d_v)
            out = (blocks @ n_inverse_t.to(out.dtype)).transpose(1, 2).reshape(out.shape)
            tensors[i["out_projection"]] = _permute(out, 0, element.attention_features[b])
            units, scales, features = element.hidden_units[b], element.hidden_scales[b], element.block_features[b]
            fc1, fc1_bias = tensors[i["fc1.weight"]], tensors[i["fc1.bias"]]  # (B, D_A, D), (B, D_A)
            fc1 = _permute(_permute(fc1, 0, units), 1, element.attention_features[b])
            tensors[i["fc1.weight"]] = fc1 * _along(scales.to(fc1.dtype), 0, fc1.ndim)
            tensors[i["fc1.bias"]] = _permute(fc1_bias, 0, units) * scales.to(fc1_bias.dtype)
            fc2 = _permute(_permute(tensors[i["fc2.weight"]], 1, units), 0, features)  # (B, D, D_A)
            tensors[i["fc2.weight"]] = fc2 / _along(scales.to(fc2.dtype), 1, fc2.ndim)
            tensors[i["fc2.bias"]] = _permute(tensors[i["fc2.bias"]], 0, features)
        head = self._index["classifier.fc1.weight"]  # reads the last block's output (after LN and pooling)
        tensors[head] = _permute(tensors[head], 1, element.block_features[-1])
        return WeightBatch(weights.space, tuple(tensors))

    def inverse(self, element: AttentionElement) -> AttentionElement:
        def permutations(values: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            return tuple(torch.argsort(p, dim=1) for p in values)

        heads = permutations(element.heads)
        return AttentionElement(
            heads=heads,
            query_key=tuple(torch.linalg.inv(_heads(m, t)) for m, t in zip(element.query_key, heads)),
            value_output=tuple(torch.linalg.inv(_heads(n, t)) for n, t in zip(element.value_output, heads)),
            attention_features=permutations(element.attention_features),
            hidden_units=permutations(element.hidden_units),
            hidden_scales=tuple(1.0 / torch.gather(s, 1, torch.argsort(p, dim=1))
                                for s, p in zip(element.hidden_scales, element.hidden_units)),
            block_features=permutations(element.block_features))

    def compose(self, first: AttentionElement, second: AttentionElement) -> AttentionElement:
        """act(compose(a, b), w) == act(a, act(b, w)).

        Here tau = tau_b[tau_a], P = P_b[P_a] and M_i = M^a_i M^b_{tau_a(i)}.
        N_i = N^b_{tau_a(i)} N^a_i, since N acts from the right in the paper's layout.
        """
        def permutations(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            return tuple(torch.gather(pb, 1, pa) for pa, pb in zip(a, b))

        return AttentionElement(
            heads=permutations(first.heads, second.heads),
            query_key=tuple(ma @ _heads(mb, ta) for ma, mb, ta in zip(first.query_key, second.query_key, first.heads)),
            value_output=tuple(_heads(nb, ta) @ na for na, nb, ta in
                               zip(first.value_output, second.value_output, first.heads)),
            attention_features=permutations(first.attention_features, second.attention_features),
            hidden_units=permutations(first.hidden_units, second.hidden_units),
            hidden_scales=tuple(sa * torch.gather(sb, 1, pa) for sa, sb, pa in
                                zip(first.hidden_scales, second.hidden_scales, first.hidden_units)),
            block_features=permutations(first.block_features, second.block_features))
