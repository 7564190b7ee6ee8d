"""Weight spaces: the ordered tensors of a zoo member, and batches of them.

A `WeightSpace` is a frozen description of one architecture's parameters, in layer order. Each
`TensorSpec` names a tensor, its shape, its role (weight or bias) and its layer.

A `WeightBatch` holds B members of one weight space, one stacked tensor per parameter with a leading
batch dimension. The fast loader produces it and every NFN model consumes it.

The symmetry groups acting on a weight space (permutations, scalings, sign flips, GL(d) of attention)
are added to this module by the families that need them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Iterator, Literal, Sequence

import torch


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str  # the state-dict key, e.g. "conv1.weight"
    shape: tuple[int, ...]  # the member's tensor shape, without the batch dimension
    role: Literal["weight", "bias"]
    layer: int  # index of the layer this tensor belongs to, in forward order

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclasses.dataclass(frozen=True)
class WeightSpace:
    """The ordered parameter tensors of one architecture."""

    tensors: tuple[TensorSpec, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors)

    @property
    def num_params(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def num_layers(self) -> int:
        return 1 + max(t.layer for t in self.tensors)

    def to_json(self) -> list[dict]:
        return [{"name": t.name, "shape": list(t.shape), "role": t.role, "layer": t.layer} for t in self.tensors]

    @classmethod
    def from_json(cls, data: Sequence[dict]) -> "WeightSpace":
        return cls(tuple(TensorSpec(d["name"], tuple(d["shape"]), d["role"], d["layer"]) for d in data))

    @classmethod
    def from_state_dict(cls, state_dict: dict[str, torch.Tensor]) -> "WeightSpace":
        """Reads a weight space off an ordered state dict of `<layer>.weight` / `<layer>.bias`."""
        layers: dict[str, int] = {}
        specs = []
        for name, tensor in state_dict.items():
            prefix, _, role = name.rpartition(".")
            if role not in ("weight", "bias"):
                raise ValueError(f"tensor {name!r} is neither a weight nor a bias")
            layer = layers.setdefault(prefix, len(layers))
            specs.append(TensorSpec(name, tuple(tensor.shape), role, layer))
        return cls(tuple(specs))

    def fingerprint(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))


@dataclasses.dataclass(frozen=True)
class WeightBatch:
    """B members of one weight space: `tensors[i]` has shape (B, *space.tensors[i].shape)."""

    space: WeightSpace
    tensors: tuple[torch.Tensor, ...]

    def __post_init__(self) -> None:
        if len(self.tensors) != len(self.space.tensors):
            raise ValueError(f"expected {len(self.space.tensors)} tensors, got {len(self.tensors)}")
        batch = {t.shape[0] for t in self.tensors}
        if len(batch) != 1:
            raise ValueError(f"tensors disagree on the batch size: {sorted(batch)}")
        for tensor, spec in zip(self.tensors, self.space.tensors):
            if tuple(tensor.shape[1:]) != spec.shape:
                raise ValueError(f"{spec.name}: expected shape (B, {spec.shape}), got {tuple(tensor.shape)}")

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def __getitem__(self, index) -> "WeightBatch":
        """Selects members with a slice, an index tensor or a boolean mask."""
        if isinstance(index, int):
            index = slice(index, index + 1)
        return WeightBatch(self.space, tuple(t[index] for t in self.tensors))

    def to(self, *args, **kwargs) -> "WeightBatch":
        return WeightBatch(self.space, tuple(t.to(*args, **kwargs) for t in self.tensors))

    def flatten(self) -> torch.Tensor:
        """All parameters of each member in layer order, shape (B, num_params)."""
        return torch.cat([t.reshape(len(self), -1) for t in self.tensors], dim=1)

    @classmethod
    def from_flat(cls, space: WeightSpace, flat: torch.Tensor) -> "WeightBatch":
        """The inverse of `flatten`: (B, num_params) in layer order -> a batch of `space`."""
        if flat.ndim != 2 or flat.shape[1] != space.num_params:
            raise ValueError(f"expected (B, {space.num_params}) flattened parameters, got {tuple(flat.shape)}")
        sizes = [spec.numel for spec in space.tensors]
        return cls(space, tuple(part.reshape(len(flat), *spec.shape)
                                for part, spec in zip(flat.split(sizes, dim=1), space.tensors)))

    def state_dict(self, member: int) -> dict[str, torch.Tensor]:
        """One member's tensors, copied: a view would make `torch.save` write the whole batch."""
        return {spec.name: t[member].clone() for spec, t in zip(self.space.tensors, self.tensors)}

    def batches(self, batch_size: int, *, shuffle: bool = False,
                generator: torch.Generator | None = None) -> Iterator[tuple[torch.Tensor, "WeightBatch"]]:
        """Yields (row indices, sub-batch); shuffling needs an explicit generator."""
        if shuffle and generator is None:
            raise ValueError("shuffle=True needs an explicit torch.Generator (no global RNG state)")
        order = torch.randperm(len(self), generator=generator) if shuffle else torch.arange(len(self))
        for start in range(0, len(self), batch_size):
            index = order[start:start + batch_size]
            yield index, self[index]

    @classmethod
    def stack(cls, space: WeightSpace, state_dicts: Sequence[dict[str, torch.Tensor]]) -> "WeightBatch":
        return cls(space, tuple(torch.stack([sd[t.name] for sd in state_dicts]) for t in space.tensors))
