"""A run's per-step random draws while training, by the spec's `training.rng` scheme.

A member's trajectory depends on its draws.
They are each epoch's batch order, and each step's dropout masks and random-crop offsets.
Under both schemes a member draws the same numbers alone and in any population.
Population size, position and device do not change them.
The schemes differ in where the work happens and how fast.

``torch-generator`` is the scheme of every spec that names none.
All zoos made before counter-v1 use it, and their hashes and ``verify --retrain`` depend on it.
It gives each member one seeded CPU `torch.Generator` per purpose:
`seeded_generator(seed, "shuffle" | "dropout" | "crop")`.
Each advances in the order the member's solo run draws.
A population loops over its members on the host and copies the draws to the training device.

``counter-v1`` is Philox-4x32-10 (`zoo.training.counter_rng`; Salmon et al. 2011).
Its key is the run's 60-bit `content_hash({"seed", "rng"})`.
A draw is addressed by (stream, step, index), with no state.
So a whole population's draws are a few integer tensor operations on the training device.
There are three kinds of streams.
SHUFFLE has step = epoch and gives a permutation of the member's subset positions.
CROP has step = global step and gives offsets (dy, dx) per example, each in [0, 2 * padding].
DROPOUT + layer has step = global step.
It keeps a unit where a 16-bit draw is below round((1 - rate) 2^16), two draws per word.
The arithmetic is integer, so CPU and CUDA draw the same bits.
On the CPU it runs through randomgen's C Philox, one call per member.
On CUDA it runs as tensor ops for all members.

Under both schemes the initialization and the train subset are drawn once per run.
They come from the seeded generators, since they are not per-step work.
`SCHEMES` maps a scheme to its `solo` and `population` constructors.
`solo` is one run, with the reference loops' draws; `population` is K runs.
A solo mask is 0/1, and the model divides by 1 - rate, as `nn.Dropout` does.
A population mask is already divided.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from zoo.planning.spec import content_hash
from zoo.training import counter_rng
from zoo.training.train import seeded_generator

SHUFFLE, CROP, DROPOUT = 1, 2, 16  # counter-v1 streams; dropout layer l draws from stream DROPOUT + l

Masks = Callable[[int, tuple[int, ...]], "torch.Tensor | None"]


def random_crops(x: torch.Tensor, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Each image shifted by up to `padding` pixels: a random crop of the zero-padded image.

    This is the released Small Transformer Zoo's RandomCrop(size, padding=2), with a seeded generator.
    """
    batch = x.shape[0]
    offsets = torch.randint(0, 2 * padding + 1, (2, batch), generator=generator)
    return crop_at(x[None], padding, offsets.T[None].to(x.device))[0]


def crop_at(x: torch.Tensor, padding: int, starts: torch.Tensor) -> torch.Tensor:
    """x (K, B, C, H, W) zero-padded by `padding`, each image cropped back to H x W.

    Each crop starts at its (row, column) in `starts` (K, B, 2).
    The indexing is integer, so it is exact on any device.
    """
    K, B, _, height, width = x.shape
    padded = F.pad(x, (padding,) * 4)
    rows = starts[..., 0, None] + torch.arange(height, device=x.device)  # (K, B, H)
    cols = starts[..., 1, None] + torch.arange(width, device=x.device)  # (K, B, W)
    members = torch.arange(K, device=x.device)[:, None, None, None]
    examples = torch.arange(B, device=x.device)[None, :, None, None]
    cropped = padded[members, examples, :, rows[..., :, None], cols[..., None, :]]  # (K, B, H, W, C)
    return cropped.permute(0, 1, 4, 2, 3)


class TorchGeneratorSolo:
    """One run's draws from its own seeded CPU generators, in its solo loop's order."""

    def __init__(self, seed: int, dropout: float = 0.0, crop_padding: int = 0):
        self.dropout, self.crop_padding = dropout, crop_padding
        self.shuffle = seeded_generator(seed, "shuffle")
        self.dropout_generator = seeded_generator(seed, "dropout")
        self.crop_generator = seeded_generator(seed, "crop")

    def order(self, epoch: int, size: int) -> torch.Tensor:
        return torch.randperm(size, generator=self.shuffle)

    def masks(self, step: int) -> Masks:
        """0/1 keep masks, `torch.empty(shape).bernoulli_(1 - rate, generator)` on the CPU."""
        return lambda layer, shape: torch.empty(shape).bernoulli_(1 - self.dropout, generator=self.dropout_generator)

    def crop(self, step: int, x: torch.Tensor) -> torch.Tensor:
        return random_crops(x, self.crop_padding, self.crop_generator) if self.crop_padding else x


class TorchGeneratorPopulation:
    """K runs' draws, each from its own generators exactly as its solo run draws them (a host loop)."""

    def __init__(self, seeds: Sequence[int], dropout: Sequence[float], crop_padding: Sequence[int],
                 device: torch.device):
        self.members = [TorchGeneratorSolo(s, p, c) for s, p, c in zip(seeds, dropout, crop_padding)]
        self.device = device

    def orders(self, epoch: int, size: int, active: torch.Tensor) -> torch.Tensor:
        """(K, size); an inactive member's generator is not advanced."""
        return torch.stack([m.order(epoch, size) if active[k] else torch.arange(size)
                            for k, m in enumerate(self.members)]).to(self.device)

    def masks(self, step: int, active: torch.Tensor) -> Masks:
        """Dropout masks (K, *shape) divided by 1 - rate.

        A solo run draws `bernoulli_(1 - p, generator)`.
        `torch.rand(shape, float64, generator) < 1 - p` gives the same bits, faster.
        It also leaves the same generator state.
        That is how torch's CPU bernoulli_ samples, and a test pins it.
        """
        rates = [m.dropout for m in self.members]
        if not any(p > 0 for p in rates):
            return lambda layer, shape: None
        stepping = [p > 0 and bool(alive) for p, alive in zip(rates, active.tolist())]
        keep = torch.tensor([1 - p if draws else 1.0 for p, draws in zip(rates, stepping)])  # float32

        def draw(layer: int, shape: tuple[int, ...]) -> torch.Tensor:
            kept = torch.ones((len(self.members), *shape), dtype=torch.bool)
            for k, draws in enumerate(stepping):
                if draws:
                    uniform = torch.rand(shape, dtype=torch.float64, generator=self.members[k].dropout_generator)
                    torch.lt(uniform, 1 - rates[k], out=kept[k])
            return (kept.to(torch.float32) / keep.view(-1, *[1] * len(shape))).to(self.device)

        return draw

    def crops(self, step: int, x: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        """x (K, b, C, H, W) with each active member's images cropped by its own generator."""
        if not any(m.crop_padding for m in self.members):
            return x
        return torch.stack([m.crop(step, x[k]) if active[k] else x[k] for k, m in enumerate(self.members)])


def counter_key(seed: int) -> int:
    """A run's counter-v1 key: 60 bits of a hash of its seed, as `seeded_generator` seeds."""
    return int(content_hash({"seed": seed, "rng": "counter-v1"}, 15), 16)


class CounterPopulation:
    """K runs' counter-v1 draws, computed together on the training device (module docstring)."""

    def __init__(self, seeds: Sequence[int], dropout: Sequence[float], crop_padding: Sequence[int],
                 device: torch.device):
        self.device = torch.device(device)
        self.keys = torch.tensor([counter_key(s) for s in seeds], dtype=torch.int64, device=self.device)
        self.rates = list(dropout)
        self.keep = torch.tensor([1 - p for p in dropout], dtype=torch.float64, device=self.device)
        self.scale = (1 / self.keep.to(torch.float32))  # 1 / (1 - rate) per member
        self.padding = torch.tensor(list(crop_padding), dtype=torch.int64, device=self.device)
        self.max_padding = max(crop_padding, default=0)

    def orders(self, epoch: int, size: int, active: torch.Tensor | None = None) -> torch.Tensor:
        """(K, size): member k's permutation of its subset positions for `epoch`."""
        return counter_rng.permutation(self.keys, SHUFFLE, epoch, 0, size, device=self.device)

    def keep_masks(self, step: int, layer: int, shape: tuple[int, ...]) -> torch.Tensor:
        """(K, *shape) bool: True where a unit is kept (probability 1 - rate; always at rate 0)."""
        return counter_rng.bernoulli(self.keys, DROPOUT + layer, step, 0, shape, self.keep, device=self.device, bits=16)

    def masks(self, step: int, active: torch.Tensor | None = None) -> Masks:
        """Dropout masks (K, *shape) divided by 1 - rate; None when no member drops out."""
        if not any(p > 0 for p in self.rates):
            return lambda layer, shape: None
        zero = torch.zeros((), device=self.device)
        return lambda layer, shape: torch.where(self.keep_masks(step, layer, tuple(shape)),
                                                self.scale.view(-1, *[1] * len(shape)), zero)  # one pass

    def starts(self, step: int, batch: int) -> torch.Tensor:
        """(K, batch, 2) crop starts in images padded by the population's largest padding.

        A member with padding p draws (dy, dx) in [0, 2p], shifted by (max - p).
        """
        offsets = counter_rng.below(self.keys, CROP, step, 0, (batch, 2), 2 * self.padding + 1, device=self.device)
        return offsets + (self.max_padding - self.padding).view(-1, 1, 1)

    def crops(self, step: int, x: torch.Tensor, active: torch.Tensor | None = None) -> torch.Tensor:
        """x (K, b, C, H, W) randomly cropped per member and example (padding 0: unchanged)."""
        if not self.max_padding:
            return x
        return crop_at(x, self.max_padding, self.starts(step, x.shape[1]))


class CounterSolo:
    """One run's counter-v1 draws: the population's with K = 1.

    So alone it draws what it draws in any population.
    """

    def __init__(self, seed: int, dropout: float = 0.0, crop_padding: int = 0):
        self.population = CounterPopulation([seed], [dropout], [crop_padding], torch.device("cpu"))

    def order(self, epoch: int, size: int) -> torch.Tensor:
        return self.population.orders(epoch, size)[0]

    def masks(self, step: int) -> Masks:
        return lambda layer, shape: self.population.keep_masks(step, layer, tuple(shape))[0].to(torch.float32)

    def crop(self, step: int, x: torch.Tensor) -> torch.Tensor:
        return self.population.crops(step, x[None])[0]


SCHEMES: dict[str, dict[str, Callable]] = {
    "torch-generator": {"solo": TorchGeneratorSolo, "population": TorchGeneratorPopulation},
    "counter-v1": {"solo": CounterSolo, "population": CounterPopulation},
}


def solo_draws(rng: str, seed: int, dropout: float = 0.0, crop_padding: int = 0):
    """One run's draws under scheme `rng` (a spec's `training.rng`)."""
    return SCHEMES[rng]["solo"](seed, dropout, crop_padding)


def population_draws(rng: str, seeds: Sequence[int], dropout: Sequence[float], crop_padding: Sequence[int],
                     device: torch.device):
    """K runs' draws under scheme `rng`, made on `device`."""
    return SCHEMES[rng]["population"](seeds, dropout, crop_padding, device)
