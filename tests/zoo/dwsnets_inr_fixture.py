"""DWSNets INR folders made by hand in the layouts the DWSNets, Neural Graphs and ScaleGMN loaders read.

Not copied from any release: random weights in state dicts of a module built like DWSNets' `INR`
(an `nn.Sequential` named `seq` of two sine layers holding `weight` and `bias` directly, then a plain
Linear), so the key names are PyTorch's own for that structure, not strings typed to match our importer.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn


class _SineLayer(nn.Module):
    def __init__(self, fan_in: int, fan_out: int, scale: float):
        super().__init__()  # weights of a fitted SIREN's size: sine arguments of tens of radians at most
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in).uniform_(-scale, scale))
        self.bias = nn.Parameter(torch.empty(fan_out).uniform_(-scale, scale))


class _ReferenceShapedINR(nn.Module):
    def __init__(self, hidden: int = 32):
        super().__init__()
        self.seq = nn.Sequential(_SineLayer(2, hidden, 0.5), _SineLayer(hidden, hidden, 0.03), nn.Linear(hidden, 1))


def _state(seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return {k: v.detach().clone() for k, v in _ReferenceShapedINR().state_dict().items()}


RELEASE_SPELLING = {"train": "training", "test": "testing"}  # the released folders' (third-party readers use it)


def make_mnist_inrs(folder: Path, ids: dict[str, list[int]], spelling: str = "short") -> dict[str, tuple[int, dict]]:
    """Writes `mnist_png_<split>_<label>_<id>/checkpoints/model_final.pth` (label = (id * 7 + split) % 10),
    `<split>` spelled `train`/`test` (DWSNets' generator script) or, with `spelling="release"`,
    `training`/`testing` (the released folders, as code reading the release spells them), and returns
    relative path -> (label, state dict)."""
    written = {}
    for split, chosen in ids.items():
        for image_id in chosen:
            label = (image_id * 7 + (split == "test")) % 10
            named = RELEASE_SPELLING[split] if spelling == "release" else split
            relative = f"mnist_png_{named}_{label}_{image_id}/checkpoints/model_final.pth"
            state = _state(1000 * (split == "test") + image_id)
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            torch.save(state, folder / relative)
            written[relative] = (label, state)
    return written


def make_fmnist_inrs(folder: Path, ids: dict[str, list[int]]) -> dict[str, tuple[int, dict]]:
    """Writes `<split>/model_<id>.pth`, each state dict holding its `label` (an int, as the release's:
    Neural Graphs json-dumps it), and returns relative path -> (label, state dict without the label)."""
    written = {}
    for split, chosen in ids.items():
        for image_id in chosen:
            label = (image_id * 3 + (split == "test")) % 10
            relative = f"{split}/model_{image_id}.pth"
            state = _state(5000 + 1000 * (split == "test") + image_id)
            (folder / split).mkdir(parents=True, exist_ok=True)
            torch.save({**state, "label": label}, folder / relative)
            written[relative] = (label, state)
    return written


def write_splits(path: Path, splits: dict[str, list[str]], labels: dict[str, int] | None, prefix: str) -> None:
    """A splits file: {split: {"path": [...], "label": [...]}} (DWSNets' generator; labels as strings, as
    it takes them from the folder name) or, without labels, {split: [path, ...]} (the Fashion-MNIST
    release's). Paths get `prefix` in front, as each repository wrote them from its own working directory."""
    if labels is None:
        data = {split: [prefix + p for p in paths] for split, paths in splits.items()}
    else:
        data = {split: {"path": [prefix + p for p in paths], "label": [str(labels[p]) for p in paths]}
                for split, paths in splits.items()}
    path.write_text(json.dumps(data))
