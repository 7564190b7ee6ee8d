"""Zoo families (every registered one) and the CNN family: weight space, initialization, training."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from zoo.data.images import data_roots, find_local, load_task_data
from zoo.families import FAMILIES, create_family, list_families, register_family
from zoo.training.train import CLASSIFICATION_METRICS as METRIC_NAMES
from zoo.families.cnn import CNNFamily
from zoo.storage.folder import STAGING_FOLDER, save_spec
from zoo.dataset.info import describe
from zoo.dataset.pack import pack
from zoo.planning.plan import plan_runs
from zoo.registry import Registry, UnknownNameError
from zoo.planning.spec import DatasetSpec, load_spec, spec_from_data
from zoo.storage.staging import Staging
from zoo.training.train import run_train_subset, seeded_generator
from zoo.dataset.verify import verify
from zoo.weightspace import WeightSpace
from zoo.training.worker import train_runs

SANE = {"optimizer": "adam", "learning_rate": 3e-3, "l2": 0.0, "init": "normal", "init_std": 0.1,
        "activation": "relu", "dropout": 0.0, "train_fraction": 1.0}


def fixed_spec(hparams: dict, *, epochs: int = 2, **dataset) -> object:
    """The tiny cnn-mnist spec with one fixed configuration (validated like a file)."""
    data = load_spec("cnn-mnist", "tiny").to_data()
    data["search_space"] = {"fixed": dict(hparams), "grid": {}, "sampled": None}
    data["training"].update(epochs=epochs, checkpoint_epochs=list(range(epochs + 1)))
    data["dataset"].update(validation_size=500, test_size=500, eval_train_size=500, **dataset)
    return spec_from_data(data, "test_cnn_family")


def train_one(spec) -> list:
    family = create_family(spec.family)
    results = []
    family.train_run(spec, plan_runs(spec)[0], family.load_data(spec), results.append)
    return results


# --- the registry, for every family ---------------------------------------------------------

def test_registry_rejects_duplicates_and_lists_valid_names():
    registry: Registry[int] = Registry("widget")
    registry.register("b")(2)
    registry.register("a")(1)
    assert registry.names() == ["a", "b"] and "a" in registry and registry.get("b") == 2
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        registry.register("a")(3)
    with pytest.raises(UnknownNameError) as caught:
        registry.get("c")
    assert str(caught.value) == "unknown widget 'c'; valid names: a, b"


def test_unknown_family_lists_the_registered_ones():
    assert "cnn" in list_families()
    with pytest.raises(KeyError, match="unknown zoo family 'mlp'; valid names: cnn"):
        create_family("mlp")
    with pytest.raises(ValueError, match="already registered"):
        register_family("cnn")(type("Another", (), {}))
    assert FAMILIES.get("cnn") is CNNFamily


@pytest.mark.parametrize("name", list_families())
def test_family_weight_space_matches_its_model(name):
    family = create_family(name)
    default = {f.name: f.default for f in dataclasses.fields(family.Architecture)}
    model = family.build(default)
    space = family.weight_space(default)
    assert space == WeightSpace.from_state_dict(model.state_dict())
    assert space.names == tuple(n for n, _ in model.named_parameters())  # every tensor is a parameter
    assert space.num_params == sum(p.numel() for p in model.parameters())
    assert [t.layer for t in space.tensors] == sorted(t.layer for t in space.tensors)
    assert WeightSpace.from_json(space.to_json()) == space
    for cls in (family.Architecture, family.HParams):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen


# --- the CNN --------------------------------------------------------------------------------

def test_cnn_has_the_papers_4970_parameters_in_layer_order():
    space = create_family("cnn").weight_space(load_spec("cnn-mnist").architecture)
    assert space.num_params == 4970
    assert [(t.name, t.shape, t.role, t.layer) for t in space.tensors] == [
        ("conv1.weight", (16, 1, 3, 3), "weight", 0), ("conv1.bias", (16,), "bias", 0),
        ("conv2.weight", (16, 16, 3, 3), "weight", 1), ("conv2.bias", (16,), "bias", 1),
        ("conv3.weight", (16, 16, 3, 3), "weight", 2), ("conv3.bias", (16,), "bias", 2),
        ("dense.weight", (10, 16), "weight", 3), ("dense.bias", (10,), "bias", 3)]
    assert space.num_layers == 4


@pytest.mark.parametrize("padding, sides", [("valid", [13, 6, 2]), ("symmetric", [14, 7, 4])])
def test_cnn_feature_maps_shrink_by_the_padding(padding, sides):
    """The bundled spec's "valid" padding is the released model's 28 -> 13 -> 6 -> 2; "symmetric"
    (zoos made before the field) gives 28 -> 14 -> 7 -> 4."""
    model = create_family("cnn").build({**load_spec("cnn-mnist").architecture, "padding": padding})
    h = torch.zeros(2, 1, 28, 28)
    sizes = []
    for conv in model.convs:
        h = conv(h)
        sizes.append(tuple(h.shape[1:]))
    assert sizes == [(16, side, side) for side in sides]
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


@pytest.mark.parametrize("init, check", [
    ("normal", lambda w, std: abs(w.std().item() - std) < 0.1 * std),
    ("truncated_normal", lambda w, std: w.abs().max().item() <= 2 * std and w.std().item() < std),
    ("uniform", lambda w, std: w.abs().max().item() <= math.sqrt(3) * std and abs(w.std().item() - std) < 0.1 * std),
], ids=["normal", "truncated_normal", "uniform"])
def test_initialization_follows_init_and_std_with_zero_biases(init, check):
    spec = fixed_spec({**SANE, "init": init, "init_std": 0.05}, epochs=0, train_size=100)
    (result,) = train_one(spec)
    assert result.epoch == 0 and result.status == "ok"
    for name, tensor in result.weights.items():
        if name.endswith("bias"):
            assert torch.count_nonzero(tensor) == 0, name
    weights = torch.cat([t.reshape(-1) for n, t in result.weights.items() if n.endswith("weight")])
    assert check(weights, 0.05), (init, weights.std().item(), weights.abs().max().item())
    assert math.isclose(result.metrics["test_accuracy"], 0.1, abs_tol=0.1)  # untrained: about chance


def test_training_on_mnist_beats_chance():
    results = train_one(fixed_spec(SANE, epochs=2))
    assert [r.epoch for r in results] == [0, 1, 2] and {r.status for r in results} == {"ok"}
    first, last = results[0].metrics, results[-1].metrics
    assert set(last) == set(METRIC_NAMES)
    assert last["test_accuracy"] > 0.3 and last["test_accuracy"] > first["test_accuracy"] + 0.15
    assert last["val_accuracy"] > 0.3
    assert last["train_loss"] < first["train_loss"] - 0.3
    assert not torch.equal(results[0].weights["conv1.weight"], results[-1].weights["conv1.weight"])


def test_diverging_run_is_recorded_not_raised(tmp_path):
    spec = fixed_spec({**SANE, "optimizer": "sgd", "learning_rate": 1e4, "init_std": 1e3}, epochs=2, train_size=200)
    save_spec(spec, tmp_path)
    staging = Staging(tmp_path / STAGING_FOLDER)
    assert train_runs(spec, plan_runs(spec), staging) == 3
    by_epoch = {r.epoch: r for r in staging}
    assert by_epoch[0].status == "ok" and all(math.isfinite(v) for v in by_epoch[0].metrics.values())
    for epoch in (1, 2):
        assert by_epoch[epoch].status == "diverged"
        assert set(by_epoch[epoch].metrics) == set(METRIC_NAMES)
        assert all(math.isnan(v) for v in by_epoch[epoch].metrics.values())
    # a zoo with diverged members packs, describes and verifies (recomputation skips them)
    entry = pack(tmp_path)["configs"][spec.name]
    assert entry["status"] == {"diverged": 2, "ok": 1} and entry["complete"]
    assert "status: diverged 2, ok 1" in describe(tmp_path)
    report = verify(tmp_path, recompute=2)
    assert report.ok, report.problems
    assert report.recomputed and all(r["model_id"] == by_epoch[0].model_id for r in report.recomputed)


def test_train_subset_is_seeded_and_sized():
    data = load_task_data(DatasetSpec(name="mnist", validation_size=500, train_size=1000, test_size=100))
    tenth = run_train_subset(data.train, 0.1, seed=0)
    assert len(tenth) == 100
    assert torch.equal(tenth.x, run_train_subset(data.train, 0.1, seed=0).x)
    assert not torch.equal(tenth.x, run_train_subset(data.train, 0.1, seed=1).x)
    assert len(run_train_subset(data.train, 1.0, seed=3)) == 1000
    with pytest.raises(ValueError, match=r"train_fraction must be in \(0, 1\]"):
        run_train_subset(data.train, 0.0, seed=0)


def test_generator_streams_are_independent_and_reproducible():
    def draw(seed, stream):
        return torch.rand(4, generator=seeded_generator(seed, stream))

    assert torch.equal(draw(0, "init"), draw(0, "init"))
    assert not torch.equal(draw(0, "init"), draw(0, "shuffle"))
    assert not torch.equal(draw(0, "init"), draw(1, "init"))


# --- data -----------------------------------------------------------------------------------

def test_mnist_is_found_locally_and_split_with_the_seed(monkeypatch, tmp_path):
    assert find_local("mnist/mnist.npz") is not None
    monkeypatch.setenv("NFNZOO_DATA", str(tmp_path))
    assert data_roots()[0] == tmp_path
    assert find_local("mnist/mnist.npz") is not None  # falls back to ../shared/data
    spec = DatasetSpec(name="mnist", validation_size=300, train_size=700, test_size=200, seed=4)
    data, again = load_task_data(spec), load_task_data(spec)
    assert (len(data.train), len(data.validation), len(data.test), data.num_classes) == (700, 300, 200, 10)
    assert data.train.x.shape[1:] == (1, 28, 28) and data.train.x.dtype == torch.float32
    assert 0.0 <= data.train.x.min() and data.train.x.max() <= 1.0 and data.train.x.max() > 0.9
    assert torch.equal(data.validation.x, again.validation.x) and torch.equal(data.test.y, again.test.y)
    other = load_task_data(dataclasses.replace(spec, seed=5))
    assert not torch.equal(other.validation.x, data.validation.x)
    with pytest.raises(ValueError, match="leaves no training data"):
        load_task_data(dataclasses.replace(spec, validation_size=60000))


def test_architecture_that_does_not_fit_the_data_is_rejected():
    data = load_spec("cnn-mnist", "tiny").to_data()
    data["architecture"]["in_channels"] = 3
    spec = spec_from_data(data)
    with pytest.raises(ValueError, match="expects 3 input channels and 10 classes; mnist has 1 and 10"):
        create_family("cnn").load_data(spec)
