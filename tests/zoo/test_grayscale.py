"""The grayscale sources' colour conversion (`zoo.data.images._grayscale`): ITU-R BT.601 luma, exact.

Every one of the 16.8M colours is checked against the integer formula, computed another way (int64
`divmod`), and a sample against Python's own arithmetic: `round(s / 1000)` of the integer sum `s` is
exact, since a correctly rounded division lands on a tie `q + 0.5` only when the true quotient is
one (a tie is representable) and stays at least 1/1000 from one otherwise, and Python's `round`
takes a tie to the even integer. The negative control: the float32 matrix product the conversion
used before (OpenBLAS, whose kernels differ by processor) puts some colours a grey level apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from zoo.data.images import _grayscale


@pytest.fixture(scope="module")
def every_colour() -> np.ndarray:
    """(2**24, 3) uint8: every RGB colour once, red the slowest."""
    codes = np.arange(1 << 24, dtype=np.uint32)
    return np.stack([codes >> 16, codes >> 8, codes], axis=-1).astype(np.uint8)  # astype keeps the low byte


def _integer_luma(colours: np.ndarray) -> np.ndarray:
    """(299 R + 587 G + 114 B) / 1000 rounded half to even, in int64."""
    total = colours.astype(np.int64) @ np.array([299, 587, 114], dtype=np.int64)  # integer: NumPy's own loop
    quotient, remainder = np.divmod(total, 1000)
    halfway_up = (remainder == 500) & (quotient % 2 == 1)
    return (quotient + ((remainder > 500) | halfway_up)).astype(np.uint8)


def test_every_colour_is_the_exact_integer_luma(every_colour):
    assert np.array_equal(_grayscale(every_colour), _integer_luma(every_colour))


def test_a_sample_matches_pythons_own_arithmetic(every_colour):
    sample = every_colour[np.random.default_rng(0).choice(len(every_colour), 4000, replace=False)]
    ties = np.array([[0, 0, 250], [1, 1, 1], [255, 128, 0], [100, 50, 25]], dtype=np.uint8)  # and a few by hand
    colours = np.concatenate([sample, ties])
    reference = [round((299 * int(r) + 587 * int(g) + 114 * int(b)) / 1000) for r, g, b in colours]
    assert _grayscale(colours).tolist() == reference
    # 114 * 250 = 28,500 is a tie between 28 and 29 (to even: 28); 1,000 * 1 / 1000 is exactly 1
    assert _grayscale(ties[:2]).tolist() == [28, 1]


def test_images_keep_their_shape_and_other_input_is_refused():
    images = np.random.default_rng(1).integers(0, 256, (2, 4, 5, 3), dtype=np.uint8)
    assert _grayscale(images).shape == (2, 4, 5) and _grayscale(images).dtype == np.uint8
    with pytest.raises(ValueError, match=r"expects uint8 colour images \(\.\.\., 3\); got float32"):
        _grayscale(images.astype(np.float32))
    with pytest.raises(ValueError, match="got uint8 \\(2, 4, 5\\)"):
        _grayscale(images[..., 0])


def test_the_float_product_the_conversion_replaced_puts_some_colours_a_level_apart(every_colour):
    """Negative control: float32 weights times float32 channels, rounded, is not the exact luma."""
    product = every_colour.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    floated = np.clip(np.rint(product), 0, 255).astype(np.uint8)
    exact = _grayscale(every_colour)
    apart = floated != exact
    assert apart.any() and np.abs(floated.astype(int) - exact)[apart].max() == 1
