"""Dry-run planning at paper scale, spec inheritance, and the data sources that are not offline here."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from zoo.cli import main
from zoo.data.images import SOURCE_INFO, SOURCES, find_local
from zoo.planning.estimate import estimate
from zoo.families import create_family
from zoo.validation.schema import SchemaError
from zoo.planning.spec import load_spec

CNN_SPECS = ["cnn-mnist", "cnn-fashion-mnist", "cnn-cifar10-gs", "cnn-svhn-gs"]


@pytest.mark.parametrize("name", CNN_SPECS)
def test_small_cnn_zoo_specs_plan_paper_scale(name):
    spec = load_spec(name)
    result = estimate(spec)
    assert (result.runs, result.checkpoints, result.params) == (30000, 270000, 4970)
    assert spec.training.checkpoint_epochs == (0, 1, 2, 3, 20, 40, 60, 80, 86)
    assert result.dataset_bytes > result.checkpoints * 4 * result.params


@pytest.mark.parametrize("name", ["cnn-mnist", "cnn-cifar10-gs"])
def test_forward_flops_match_torch_flop_counter(name):
    spec = load_spec(name, "tiny")
    family = create_family("cnn")
    model = family.build(spec.architecture).eval()
    x = torch.zeros(1, *SOURCE_INFO[spec.dataset.name].image_shape)
    with FlopCounterMode(display=False) as counter:
        model(x)
    # the counter sees convolutions and matmuls; the bias adds and pooling are negligible
    assert family.forward_flops(spec) == counter.get_total_flops()


def test_dry_run_prints_the_plan(capsys):
    assert main(["generate", "cnn-cifar10-gs", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "30,000 runs, 270,000 checkpoints" in out and "training FLOPs" in out and "GB" in out


def test_extends_merges_onto_the_base_and_reports_bad_bases(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text("extends: cnn-mnist\nname: child\ntraining: {epochs: 5, checkpoint_epochs: [0, 5]}\n")
    spec = load_spec(child)
    base = load_spec("cnn-mnist")
    assert (spec.name, spec.training.epochs, spec.training.batch_size) == ("child", 5, base.training.batch_size)
    assert spec.search_space == base.search_space
    # profiles inherited
    assert load_spec(child, "tiny").training.epochs == load_spec("cnn-mnist", "tiny").training.epochs
    missing = tmp_path / "missing.yaml"
    missing.write_text("extends: no-such-spec\nname: x\n")
    with pytest.raises(SchemaError, match="extends"):
        load_spec(missing)
    loop = tmp_path / "loop.yaml"
    loop.write_text("extends: loop.yaml\nname: loop\n")
    with pytest.raises(SchemaError, match="extends itself"):
        load_spec(loop)


@pytest.mark.parametrize("name, relative", [("fashion_mnist", "fashion_mnist/fashion_mnist.npz"),
                                            ("cifar10_gs", "cifar10/cifar10.npz"),
                                            ("svhn_gs", "svhn/svhn.npz")])
def test_online_sources_load_when_a_copy_is_reachable(name, relative):
    if find_local(relative) is None:
        pytest.skip(f"no local copy of {name} ({relative} under $NFNZOO_DATA or ../shared/data) ; online downloads are "
                    "not attempted in tests")
    train, test, classes = SOURCES.get(name)()
    info = SOURCE_INFO[name]
    assert (len(train), len(test), classes) == (info.train_size, info.test_size, info.num_classes)
    assert tuple(train.x.shape[1:]) == info.image_shape


def test_core_hours_come_from_the_measured_throughput(tmp_path, monkeypatch):
    import zoo.planning.estimate as estimate_module

    spec = load_spec("cnn-mnist", "tiny")
    measured = tmp_path / "throughput.json"
    measured.write_text('{"_about": "x", "cpu": {"cnn": {"flops_per_second": 1e9, "measured": "today"}}}')
    monkeypatch.setattr(estimate_module, "THROUGHPUT_FILE", measured)
    result = estimate(spec)
    assert result.device_hours == {"cpu": pytest.approx(result.training_flops / 1e9 / 3600)}
    assert any(line.startswith("estimated core-hours") for line in result.lines())
    measured.write_text('{"cpu": {"inr": {"flops_per_second": 1e9, "measured": "today"}}}')
    assert estimate(spec).device_hours == {}
