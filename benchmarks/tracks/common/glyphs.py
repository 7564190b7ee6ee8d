"""Glyph images rendered from the fonts matplotlib ships: an offline image source for the tracks.

Offline there is no pretrained ViT, and no image dataset beyond MNIST. So the prompt-based
continual-learning track pretrains its own small backbone on glyphs. It runs class-incremental
learning on held-out glyph classes.

The classes are the letters of the Latin, Greek and Cyrillic alphabets, upper and lower case. Some
letters' renders in the 12 faces are too close to an earlier letter's (cosine similarity above
`SIMILAR`). Such a letter is dropped, so no two classes share a picture. Latin A, Greek Alpha and
Cyrillic A are one shape. Once fitted to the canvas, so are S and s, C and c, K and Cyrillic K. That
leaves 121 letters at 32 x 32.

Each class is drawn in the 12 DejaVu faces: Sans, Serif and Sans Mono, each regular, bold, oblique
or italic, and bold oblique or italic. Glyphs are rendered with FreeType (`matplotlib.ft2font`) and
cropped to their ink. They are scaled to fit 3/4 of the canvas and centred. `augment` then applies
a random affine map per image (rotation, shear, scale, translation). It is drawn from a seeded
generator."""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

# the alphabets, in this order (a later letter identical to an earlier one is dropped)
LATIN = [chr(c) for c in range(0x41, 0x5B)] + [chr(c) for c in range(0x61, 0x7B)]
GREEK = [chr(c) for c in range(0x391, 0x3AA) if c != 0x3A2] + [chr(c) for c in range(0x3B1, 0x3CA)]
CYRILLIC = [chr(c) for c in range(0x410, 0x450)] + ["\u0401", "\u0451"]
FACES = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSans-BoldOblique.ttf",
         "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSerif-Italic.ttf", "DejaVuSerif-BoldItalic.ttf",
         "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansMono-Oblique.ttf",
         "DejaVuSansMono-BoldOblique.ttf")
# faces kept out of training for a continual-learning test split: one of each family, unseen styles
TEST_FACES = ("DejaVuSans-BoldOblique.ttf", "DejaVuSerif-Italic.ttf", "DejaVuSansMono-Bold.ttf")
TRAIN_FACES = tuple(face for face in FACES if face not in TEST_FACES)
RENDER_POINTS = 64  # FreeType size before scaling down: smooth edges at any canvas size
SIMILAR = 0.9  # cosine similarity of two letters' renders (all faces) above which the later one is dropped


def font_folder() -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


def _bitmap(char: str, face: str) -> np.ndarray:
    from matplotlib.ft2font import FT2Font, LoadFlags

    font = FT2Font(str(font_folder() / face))
    if font.get_char_index(ord(char)) == 0:
        raise ValueError(f"font {face} has no glyph for {char!r} (U+{ord(char):04X})")
    font.set_size(RENDER_POINTS, 72)
    font.set_text(char, 0.0, flags=LoadFlags.DEFAULT)
    font.draw_glyphs_to_bitmap(antialiased=True)
    return np.asarray(font.get_image(), dtype=np.uint8)


def render(char: str, face: str, size: int) -> np.ndarray:
    """One glyph as a (size, size) float32 image in [0, 1]: ink cropped, fitted to 3/4, centred."""
    from PIL import Image

    bitmap = _bitmap(char, face)
    rows, columns = np.nonzero(bitmap)
    if len(rows) == 0:
        raise ValueError(f"{char!r} in {face} renders no ink")
    ink = bitmap[rows.min():rows.max() + 1, columns.min():columns.max() + 1]
    scale = 0.75 * size / max(ink.shape)
    height, width = max(1, round(ink.shape[0] * scale)), max(1, round(ink.shape[1] * scale))
    small = np.asarray(Image.fromarray(ink).resize((width, height), Image.Resampling.LANCZOS), dtype=np.float32)
    canvas = np.zeros((size, size), dtype=np.float32)
    top, left = (size - height) // 2, (size - width) // 2
    canvas[top:top + height, left:left + width] = small / 255.0
    return np.clip(canvas, 0.0, 1.0)


@lru_cache(maxsize=4)
def letters(size: int = 32) -> tuple[str, ...]:
    """The distinct letters (see the module docstring), in alphabet order."""
    kept, vectors = [], []
    for char in LATIN + GREEK + CYRILLIC:
        vector = np.concatenate([render(char, face, size).ravel() for face in FACES])
        vector /= np.linalg.norm(vector)
        if not vectors or float(np.max(np.stack(vectors) @ vector)) <= SIMILAR:
            kept.append(char)
            vectors.append(vector)
    return tuple(kept)


@dataclasses.dataclass(frozen=True)
class GlyphRenders:
    """Every face of some letters: images (classes, faces, 1, size, size) in [0, 1]."""

    letters: tuple[str, ...]
    images: torch.Tensor

    @classmethod
    def of(cls, chosen: tuple[str, ...] | list[str], size: int = 32,
           faces: tuple[str, ...] = FACES) -> "GlyphRenders":
        stack = np.stack([np.stack([render(char, face, size) for face in faces]) for char in chosen])
        return cls(tuple(chosen), torch.from_numpy(stack).unsqueeze(2))

    def sample(self, per_class: int, generator: torch.Generator,
               augment: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """`per_class` images of each letter (a random face each, augmented): (images, labels)."""
        classes, faces = self.images.shape[:2]
        labels = torch.arange(classes).repeat_interleave(per_class)
        chosen = torch.randint(faces, (len(labels),), generator=generator)
        images = self.images[labels, chosen]
        return (augment_batch(images, generator) if augment else images.clone()), labels


def augment_batch(images: torch.Tensor, generator: torch.Generator, *, degrees: float = 12.0, shear: float = 10.0,
                  scale: tuple[float, float] = (0.8, 1.1), translate: float = 0.1) -> torch.Tensor:
    """A random affine map per image (B, C, H, W), by one batched grid sample (bilinear, zero fill)."""
    count = images.shape[0]

    def uniform(low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(count, generator=generator)

    angle, skew = uniform(-degrees, degrees) * math.pi / 180, uniform(-shear, shear) * math.pi / 180
    zoom = uniform(*scale)
    shift = torch.stack([uniform(-translate, translate), uniform(-translate, translate)], dim=1) * 2
    cos, sin = torch.cos(angle), torch.sin(angle)
    # the inverse map (output -> input coordinates), as grid_sample takes it
    linear = torch.stack([torch.stack([cos, -sin + torch.tan(skew)], 1),
                          torch.stack([sin, cos], 1)], 1) / zoom[:, None, None]
    theta = torch.cat([linear, -shift.unsqueeze(2)], dim=2)
    grid = torch.nn.functional.affine_grid(theta, list(images.shape), align_corners=False)
    return torch.nn.functional.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
