"""Image edits for INR editing (Zhou et al. 2023, "Permutation Equivariant Neural Functionals",
Sec. 5.3): the image that an edited SIREN should render.

The target is computed from the original image the SIREN was fitted to, never from its render. We
use OpenCV (`opencv-python-headless`), the library the authors' code calls. That code is
experiments/stylize_siren.py in github.com/AllanYangZhou/nfn. Like it, we edit the 8-bit image.

`dilate` (MNIST) is `cv2.dilate(image, np.ones((3, 3), np.uint8), iterations=1)`. That is a 3x3
grey dilation: a 3x3 maximum filter, where pixels outside the image do not count.

`contrast` (CIFAR-10) is CLAHE (`cv2.createCLAHE(clipLimit=1.0, tileGridSize=(3, 3))`). It runs on
the L channel of `cv2.cvtColor(image, cv2.COLOR_BGR2LAB)`, and converts back with `COLOR_LAB2BGR`.
Their code passes the RGB array as if it were BGR, and so do we. So the target is the reference's.

`apply_edit(name, images)` takes and returns float images (N, C, H, W) in [0, 1]. The image
sources store 8-bit images exactly (`zoo.data.images`). So images are quantized back to uint8
first. This is checked: a value that is not a multiple of 1/255 is an error, not a silent rounding."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from zoo.registry import Registry

EDITS: Registry[Callable[[np.ndarray], np.ndarray]] = Registry("image edit")  # (H, W, C) uint8 -> same


@EDITS.register("dilate")
def dilate(image: np.ndarray) -> np.ndarray:
    import cv2

    out = cv2.dilate(image, np.ones((3, 3), np.uint8), iterations=1)
    return out.reshape(image.shape)  # OpenCV drops a single channel axis


@EDITS.register("contrast")
def contrast(image: np.ndarray) -> np.ndarray:
    import cv2

    if image.shape[2] != 3:
        raise ValueError(f"the contrast edit works on color images (3 channels); this one has {image.shape[2]}")
    lab = cv2.cvtColor(image, cv2.COLOR_BGR2LAB)  # the RGB array read as BGR, as the reference does
    lightness, a, b = cv2.split(lab)
    equalized = cv2.createCLAHE(clipLimit=1.0, tileGridSize=(3, 3)).apply(lightness)
    return cv2.cvtColor(cv2.merge((equalized, a, b)), cv2.COLOR_LAB2BGR)


def to_uint8(images: torch.Tensor) -> np.ndarray:
    """(N, C, H, W) floats in [0, 1] that are multiples of 1/255 -> (N, H, W, C) uint8."""
    scaled = images.detach().cpu().double().mul(255)
    rounded = scaled.round()
    if images.numel() and (rounded - scaled).abs().max() > 1e-3:
        raise ValueError("the images are not 8-bit intensities (multiples of 1/255); an edit needs the source's "
                         "original pixels")
    return rounded.clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()


def apply_edit(name: str, images: torch.Tensor) -> torch.Tensor:
    """The edit `name` of every image: (N, C, H, W) in [0, 1] -> the same shape, in [0, 1]."""
    edit = EDITS.get(name)
    edited = np.stack([edit(np.ascontiguousarray(image)) for image in to_uint8(images)]) if len(images) else \
        np.zeros((0, *images.shape[2:], images.shape[1]), np.uint8)
    return torch.from_numpy(edited).permute(0, 3, 1, 2).float().div(255).to(images.device)
