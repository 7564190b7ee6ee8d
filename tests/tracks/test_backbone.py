"""The glyph-pretrained backbone: trained once per config, cached, checked by its sha256."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("timm")

from benchmarks.tracks.common.backbone import BackboneConfig, pretrained_backbone

TINY = BackboneConfig(embed_dim=16, depth=1, num_heads=2, letters=("A", "B", "\u0416"), steps=3, batch_size=6,
                      warmup_steps=1)


def test_pretrained_once_then_loaded_from_the_cache_with_the_same_weights(tmp_path):
    trained, record = pretrained_backbone(TINY, cache=tmp_path)
    assert not record["cached"] and len(record["sha256"]) == 64 and 0 <= record["train_accuracy"] <= 1
    loaded, again = pretrained_backbone(TINY, cache=tmp_path)
    assert again["cached"] and again["sha256"] == record["sha256"]
    images = torch.rand(2, 1, 32, 32)
    with torch.no_grad():
        assert torch.equal(trained(images), loaded(images)) and trained(images).shape == (2, 16)  # no head
    other = BackboneConfig(**{**TINY.__dict__, "seed": 1})
    assert other.key() != TINY.key()
    sidecar = json.loads((tmp_path / f"{TINY.key()}.json").read_text())
    assert sidecar["config"]["letters"] == list(TINY.letters)


def test_a_changed_cache_file_is_an_error_naming_it(tmp_path):
    pretrained_backbone(TINY, cache=tmp_path)
    weights = tmp_path / f"{TINY.key()}.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(ValueError, match=f"{weights.name}: sha256 .* is not the recorded"):
        pretrained_backbone(TINY, cache=tmp_path)


def test_pretraining_needs_two_letters(tmp_path):
    with pytest.raises(ValueError, match="at least 2 letters"):
        pretrained_backbone(BackboneConfig(letters=("A",), steps=1), cache=tmp_path)


def test_pretraining_gives_the_same_weights_whatever_the_callers_thread_count(tmp_path):
    threads = torch.get_num_threads()
    config = BackboneConfig(embed_dim=32, depth=2, num_heads=2, letters=("A", "B", "\u0416"), steps=6, batch_size=24,
                            warmup_steps=1)
    try:
        torch.set_num_threads(2)
        _, two = pretrained_backbone(config, cache=tmp_path / "two")
        assert torch.get_num_threads() == 2  # restored after the one-thread pretraining
        torch.set_num_threads(1)
        _, one = pretrained_backbone(config, cache=tmp_path / "one")
    finally:
        torch.set_num_threads(threads)
    assert two["sha256"] == one["sha256"] and two["torch_threads"] == 1
