"""A Small Transformer Zoo member's weights as Transformer-NFN's per-block features.

Tran et al. 2025, "Equivariant Neural Functional Networks for Transformers" (ICLR 2025), Sec. 3: the weight
space of an encoder block in the row-vector convention. Per head i it holds W_Q^(i), W_K^(i) in R^{D x d_k},
W_V^(i) in R^{D x d_v} and W_O^(i) in R^{d_v x D}. The MLP holds W_A in R^{D x D_A}, b_A in R^{D_A}, W_B in
R^{D_A x D} and b_B in R^D.

PyTorch stores the transposes: `nn.Linear.weight` is (out, in). Heads are stacked along the rows of the
query, key and value maps, and along the columns of the out-projection. `AttentionLayout` finds the tensors
of `zoo.families.transformer` members by name. `block_features` returns the paper's layout with a channel
axis. The attention's tensors are

    wq, wk (B, C, h, D, d_k),   wv (B, C, h, D, d_v),   wo (B, C, h, d_v, D).

The MLP's are

    wa (B, C, D, D_A),   ba (B, C, D_A),   wb (B, C, D_A, D),   bb (B, C, D).

The rest of the member (the input stem, the classifier head) is outside the blocks.
`AttentionLayout.embedding` and `.classifier` list those tensors. The tensors' shapes do not show the number
of heads, nor whether the member has residual connections. The models that read this layout take them as
hyperparameters (`num_heads`, `residual`). The benchmark tasks check these against the zoo's architecture.
"""

from __future__ import annotations

import dataclasses
import re

import torch

from zoo.weightspace import WeightBatch, WeightSpace

BLOCK_TENSORS = {"wq": "attention.queries.weight", "wk": "attention.keys.weight", "wv": "attention.values.weight",
                 "wo": "attention.out_projection.weight", "wa": "fc1.weight", "ba": "fc1.bias",
                 "wb": "fc2.weight", "bb": "fc2.bias"}
_BLOCK = re.compile(r"^encoder\.(\d+)\.")


def is_attention_space(space: WeightSpace) -> bool:
    """True for the weight space of a transformer-family member (encoder blocks by name)."""
    return any(name.startswith("encoder.") and name.endswith(".attention.queries.weight") for name in space.names)


@dataclasses.dataclass(frozen=True)
class AttentionLayout:
    """Where each block's tensors are in a weight space, and the block's sizes."""

    num_heads: int
    blocks: tuple[dict[str, int], ...]  # per block: key of BLOCK_TENSORS -> tensor index
    embedding: tuple[int, ...]  # tensor indices before the first block (the input stem)
    classifier: tuple[int, ...]  # tensor indices after the last block (the classifier head)
    d_model: int
    d_k: int
    d_v: int
    mlp_dim: int

    @classmethod
    def from_space(cls, space: WeightSpace, num_heads: int) -> "AttentionLayout":
        index = {name: i for i, name in enumerate(space.names)}
        numbers = sorted({int(m.group(1)) for name in space.names if (m := _BLOCK.match(name))})
        if not numbers or numbers != list(range(len(numbers))):
            raise ValueError("not a transformer-family weight space: expected tensors encoder.0., encoder.1., ... "
                             f"(got {list(space.names)[:6]}...)")
        blocks = []
        for b in numbers:
            missing = [f"encoder.{b}.{suffix}" for suffix in BLOCK_TENSORS.values()
                       if f"encoder.{b}.{suffix}" not in index]
            if missing:
                raise ValueError(f"not a transformer-family weight space: block {b} lacks {missing}")
            blocks.append({key: index[f"encoder.{b}.{suffix}"] for key, suffix in BLOCK_TENSORS.items()})
        in_blocks = {i for block in blocks for i in block.values()}
        first, last = min(in_blocks), max(in_blocks)
        others = [i for i in range(len(space.names)) if i not in in_blocks]
        if any(first < i < last for i in others):
            raise ValueError("a transformer-family weight space holds its encoder blocks contiguously; "
                             f"{[space.names[i] for i in others if first < i < last]} sit between them")
        shape = {key: space.tensors[i].shape for key, i in blocks[0].items()}
        inner_k, d_model = shape["wq"]
        inner_v = shape["wv"][0]
        if num_heads < 1 or inner_k % num_heads or inner_v % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide the blocks' query width {inner_k} "
                             f"and value width {inner_v}")
        for b, block in enumerate(blocks):
            found = {key: space.tensors[i].shape for key, i in block.items()}
            if found != shape:
                raise ValueError(f"block {b}'s tensor shapes {found} differ from block 0's {shape}")
        return cls(num_heads, tuple(blocks), tuple(i for i in others if i < first),
                   tuple(i for i in others if i > last), d_model, inner_k // num_heads, inner_v // num_heads,
                   shape["wa"][0])

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)


def block_features(weights: WeightBatch, layout: AttentionLayout) -> list[dict[str, torch.Tensor]]:
    """Each block's tensors in the paper's layout with one channel (the module docstring)."""
    h, features = layout.num_heads, []
    for block in layout.blocks:
        t = {key: weights.tensors[i] for key, i in block.items()}
        batch, d_model = t["wq"].shape[0], layout.d_model
        features.append({
            "wq": t["wq"].reshape(batch, h, layout.d_k, d_model).transpose(-1, -2).unsqueeze(1),
            "wk": t["wk"].reshape(batch, h, layout.d_k, d_model).transpose(-1, -2).unsqueeze(1),
            "wv": t["wv"].reshape(batch, h, layout.d_v, d_model).transpose(-1, -2).unsqueeze(1),
            "wo": t["wo"].reshape(batch, d_model, h, layout.d_v).permute(0, 2, 3, 1).unsqueeze(1),
            "wa": t["wa"].transpose(-1, -2).unsqueeze(1),
            "ba": t["ba"].unsqueeze(1),
            "wb": t["wb"].transpose(-1, -2).unsqueeze(1),
            "bb": t["bb"].unsqueeze(1),
        })
    return features


def block_weights(features: list[dict[str, torch.Tensor]], layout: AttentionLayout, space: WeightSpace,
                  channel: int = 0) -> WeightBatch:
    """The inverse of `block_features` for one channel: the blocks' tensors in PyTorch's layout. The stem
    and classifier tensors are zero. It is for acting on equivariant features with `zoo.symmetry`."""
    batch = features[0]["wq"].shape[0]
    tensors = [torch.zeros(batch, *t.shape, dtype=features[0]["wq"].dtype, device=features[0]["wq"].device)
               for t in space.tensors]
    for block, f in zip(layout.blocks, features):
        f = {key: value[:, channel] for key, value in f.items()}
        rows = {key: f[key].transpose(-1, -2).reshape(batch, -1, layout.d_model) for key in ("wq", "wk", "wv")}
        rows["wo"] = f["wo"].permute(0, 3, 1, 2).reshape(batch, layout.d_model, -1)
        rows.update(wa=f["wa"].transpose(-1, -2), ba=f["ba"], wb=f["wb"].transpose(-1, -2), bb=f["bb"])
        for key, index in block.items():
            tensors[index] = rows[key].contiguous()
    return WeightBatch(space, tuple(tensors))


def flat(weights: WeightBatch, indices: tuple[int, ...]) -> torch.Tensor:
    """The tensors at `indices`, flattened and concatenated: (B, total entries)."""
    return torch.cat([weights.tensors[i].flatten(1) for i in indices], dim=1)
