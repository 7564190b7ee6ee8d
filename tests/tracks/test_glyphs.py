"""The glyph source: distinct letters, centred renders in [0, 1], seeded augmentation."""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.tracks.common.glyphs import FACES, SIMILAR, GlyphRenders, augment_batch, letters, render


def test_the_letters_are_distinct_and_cross_script_twins_are_dropped():
    chosen = letters(32)
    assert len(chosen) == 121 and len(set(chosen)) == len(chosen)
    assert "A" in chosen and "\u0391" not in chosen and "\u0410" not in chosen  # Latin A, Greek Alpha, Cyrillic A
    renders = GlyphRenders.of(chosen, 32).images.flatten(1).numpy().astype(np.float64)
    renders /= np.linalg.norm(renders, axis=1, keepdims=True)
    similarity = renders @ renders.T - 2 * np.eye(len(chosen))
    assert similarity.max() <= SIMILAR


def test_a_render_is_centred_ink_in_the_unit_range():
    image = render("W", FACES[0], 32)
    assert image.shape == (32, 32) and image.dtype == np.float32 and 0 <= image.min() and image.max() <= 1
    rows, columns = np.nonzero(image > 0.05)
    assert max(rows.max() - rows.min(), columns.max() - columns.min()) + 1 <= 25  # fitted to 3/4 of 32
    assert abs((rows.min() + rows.max()) / 2 - 15.5) <= 1.5 and abs((columns.min() + columns.max()) / 2 - 15.5) <= 1.5


def test_sampling_and_augmentation_follow_the_seed_and_change_the_images():
    renders = GlyphRenders.of(("A", "B", "\u0416"), 32)
    first = renders.sample(4, torch.Generator().manual_seed(7))
    again = renders.sample(4, torch.Generator().manual_seed(7))
    assert torch.equal(first[0], again[0]) and first[1].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    plain = renders.sample(4, torch.Generator().manual_seed(7), augment=False)[0]
    assert first[0].shape == plain.shape == (12, 1, 32, 32) and not torch.allclose(first[0], plain)
    identity = augment_batch(plain, torch.Generator(), degrees=0, shear=0, scale=(1, 1), translate=0)
    torch.testing.assert_close(identity, plain, atol=1e-5, rtol=0)  # the zero map leaves the image
