"""The `paper` profiles' code path: a timm ViT (random, tiny) on Split CIFAR-100 and an ImageNet-R folder.

The paper's setting needs timm's ImageNet-21k weights and CIFAR-100 or ImageNet-R, none of which
is reachable here; these tests run the same profiles with a randomly initialised tiny timm ViT,
synthetic CIFAR-100 arrays in a local data root (the route the real file takes) and a folder of
synthetic images, and one epoch of each stage.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("timm")

import timm

from benchmarks.results import load_results
from benchmarks.tracks.common.backbone import TimmBackbone, load_backbone
from benchmarks.tracks.common.incremental import folder_sequence
from benchmarks.tracks.common.prompted_vit import INPUT_TRANSFORM, PromptedViT
from benchmarks.tracks.norga import track as norga
from benchmarks.tracks.common.learners import Training
from benchmarks.tracks.registry import create_track

TINY_TIMM = TimmBackbone(model="vit_tiny_patch16_224", pretrained=False, image_size=32,
                         overrides=(("patch_size", 8), ("embed_dim", 128), ("depth", 5), ("num_heads", 2)))
ONE = Training(epochs=1, lr=1e-3, batch_size=16)


def _fast(profile: norga.NorgaProfile, benchmark: norga.Benchmark) -> norga.NorgaProfile:
    """The paper profile with the tiny timm ViT and one epoch of everything; all else as it is."""
    hide = dataclasses.replace(profile.hide, tii_epochs=1, align_epochs=1, prompt_epochs=1, head_epochs=1,
                               pseudo_per_class=4, batch_size=16)
    return dataclasses.replace(
        profile, backbone=TINY_TIMM, benchmarks=(benchmark,), hide=hide,
        l2p=dataclasses.replace(profile.l2p, training=ONE), dualprompt=dataclasses.replace(profile.dualprompt,
                                                                                           training=ONE),
        coda=dataclasses.replace(profile.coda, training=ONE), bounds=ONE)


def test_the_paper_profiles_name_the_papers_backbone_and_data():
    for name in ("paper", "paper-imr"):
        profile = norga.PROFILES[name]
        assert profile.backbone == TimmBackbone("vit_base_patch16_224.augreg_in21k", pretrained=True, image_size=224)
        assert timm.list_pretrained(profile.backbone.model) == [profile.backbone.model]  # a weight tag timm knows
        assert [b.tasks for b in profile.benchmarks] == [10] and profile.methods == tuple(norga.METHODS)
        assert profile.hide.layers == (0, 1, 2, 3, 4) and profile.hide.batch_size == 128
    assert norga.PROFILES["paper"].benchmarks[0].source == "cifar100" and norga.PROFILES["paper"].hide.length == 5
    assert norga.PROFILES["paper-imr"].benchmarks[0].source == "imagenet-r"
    assert norga.PROFILES["paper-imr"].hide.length == 20


def _cifar100_root(root):
    rng = np.random.default_rng(0)
    folder = root / "cifar100"
    folder.mkdir(parents=True)
    np.savez(folder / "cifar100.npz", x_train=rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8),
             y_train=np.repeat(np.arange(100), 2), x_test=rng.integers(0, 256, (100, 32, 32, 3), dtype=np.uint8),
             y_test=np.arange(100))
    return root


def _image_folder(root, classes=20, per_class=3):
    from PIL import Image

    rng = np.random.default_rng(1)
    for c in range(classes):
        folder = root / f"n{c:08d}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            size = (int(rng.integers(40, 90)), int(rng.integers(40, 90)))  # not square, not the stored size
            Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(folder / f"{i}.png")
    (root / "README.txt").write_text("not a class")
    return root


def test_the_paper_profile_runs_on_split_cifar100_with_a_timm_vit(tmp_path, monkeypatch):
    monkeypatch.setenv("NFNZOO_DATA", str(_cifar100_root(tmp_path / "data")))
    profile = _fast(norga.PROFILES["paper"], norga.Benchmark("cifar100", 10, None, None))
    monkeypatch.setitem(norga.PROFILES, "paper-test", profile)
    written = create_track("norga").run("paper-test", [42], tmp_path / "out", workers=1)
    assert len(written) == len(norga.METHODS)
    results = load_results(tmp_path / "out/cifar100-10tasks/norga-sigmoid.json")
    assert results.task_config["benchmark"]["source"] == "cifar100" and results.model_config["length"] == 5
    assert 0 <= results.summary["final_average_accuracy"].mean <= 1
    assert (tmp_path / "out/cifar100-10tasks-accuracy.png").exists()


def test_the_paper_imagenet_r_profile_runs_on_an_image_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(norga.IMAGENET_R_VARIABLE, str(_image_folder(tmp_path / "imagenet-r")))
    profile = dataclasses.replace(_fast(norga.PROFILES["paper-imr"], norga.Benchmark("imagenet-r", 10, None, None)),
                                  methods=("norga-sigmoid", "coda-prompt", "joint"))
    monkeypatch.setitem(norga.PROFILES, "paper-imr-test", profile)
    written = create_track("norga").run("paper-imr-test", [42], tmp_path / "out", workers=1)
    assert [p.name for p in written] == ["norga-sigmoid.json", "coda-prompt.json", "joint.json"]
    assert load_results(written[0]).model_config["length"] == 20


def test_the_image_folder_split_is_fixed_and_the_class_order_follows_the_seed(tmp_path):
    root = _image_folder(tmp_path / "imr")
    first, again, other = (folder_sequence(root, 10, seed, size=48) for seed in (42, 42, 40))
    assert [t.classes for t in first.tasks] == [t.classes for t in again.tasks] != [t.classes for t in other.tasks]
    by_class = {c: t for t in first.tasks for c in t.classes}
    for task in other.tasks:  # the same images on each side of the split, whatever the order
        for c in task.classes:
            mine = by_class[c]
            assert np.array_equal(task.train.x[task.train.y == c], mine.train.x[mine.train.y == c])
    task = first.tasks[0]
    assert task.train.x.shape[1:] == (3, 48, 48) and len(task.train) == 2 * 2 and len(task.test) == 2 * 1
    with pytest.raises(ValueError, match="not a folder"):
        folder_sequence(tmp_path / "missing", 10, 0)
    with pytest.raises(ValueError, match="20 classes do not split into 3 equal tasks"):
        folder_sequence(root, 3, 0, size=16)


def test_without_imagenet_r_the_error_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.delenv(norga.IMAGENET_R_VARIABLE, raising=False)
    monkeypatch.setenv("NFNZOO_DATA", str(tmp_path))
    with pytest.raises(ValueError, match="NFNZOO_IMAGENET_R"):
        norga._sequence(norga.Benchmark("imagenet-r", 10, None, None), (), 0)


def test_a_timm_backbone_resizes_and_normalises_its_inputs():
    model, record = load_backbone(dataclasses.replace(TINY_TIMM, mean=(0.5, 0.4, 0.3), std=(0.2, 0.2, 0.2)))
    transform = getattr(model, INPUT_TRANSFORM)
    images = np.random.default_rng(0).random((2, 3, 64, 64)).astype(np.float32)
    import torch

    x = torch.from_numpy(images)
    prepared = transform(x)
    assert prepared.shape == (2, 3, 32, 32)
    expected = (torch.nn.functional.interpolate(x, size=(32, 32), mode="bilinear", antialias=True)
                - torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1)) / 0.2
    torch.testing.assert_close(prepared, expected)
    vit = PromptedViT(model)
    with torch.no_grad():
        torch.testing.assert_close(vit.features(x), model.forward_head(model.forward_features(prepared),
                                                                       pre_logits=True))
    assert record["sha256"] == load_backbone(TINY_TIMM)[1]["sha256"]  # seeded
    assert len(record["sha256"]) == 64 and record["pretrained"] is False
    with pytest.raises(ValueError, match="timm cannot create 'no_such_vit'"):
        load_backbone(TimmBackbone(model="no_such_vit", pretrained=False))
