"""An NFN SIREN folder made by hand in the layout `SirenDataset` reads (AllanYangZhou/nfn).

Not copied from any release: random weights in state dicts of a module built like the reference
`Siren` (a Sequential of sine layers that hold a `linear`, then a plain Linear output), so the key
names are PyTorch's own for that structure, not strings typed to match our importer.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class _SineLayer(nn.Module):
    def __init__(self, fan_in: int, fan_out: int):
        super().__init__()
        self.linear = nn.Linear(fan_in, fan_out)


class _ReferenceShapedSiren(nn.Module):
    def __init__(self, hidden: int = 32, out: int = 1):
        super().__init__()
        self.net = nn.Sequential(_SineLayer(2, hidden), _SineLayer(hidden, hidden), nn.Linear(hidden, out))


def make_sirens(folder: Path, indices, fit: str = "base", prefix: str = "randinit_smaller", seed: int = 0,
                out: int = 1) -> dict[int, tuple[int, dict[str, torch.Tensor]]]:
    """Writes `<prefix>[_<fit>]_<label>s/net<index>.pth` for `indices` (label = index % 10) and
    returns index -> (label, state dict)."""
    stem = prefix if fit == "base" else f"{prefix}_{fit}"
    written = {}
    for index in indices:
        torch.manual_seed(seed * 100003 + index)
        state = _ReferenceShapedSiren(out=out).state_dict()
        label = index % 10
        path = folder / f"{stem}_{label}s" / f"net{index}.pth"
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, path)
        written[index] = (label, state)
    return written
