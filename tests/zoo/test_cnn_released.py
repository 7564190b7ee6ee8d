"""The CNN family computes the released Small CNN Zoo model; zoos made before keep their meaning.

The released training code (google-research `dnn_predict_accuracy/train_network.py`) builds
Keras' `Conv2D(16, 3, strides=2)` with the default "valid" padding and scales pixels to
[-1, 1]. Keras 3 on the torch backend (the `keras-reference` extra) is the oracle: that model,
built layer by layer in Keras with a member's weights transposed to Keras' layout, gives our
logits. A spec without the new fields (every zoo made before them) keeps its hash, its ids and
its function.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from zoo.dataset.pack import pack
from zoo.dataset.verify import verify
from zoo.families import create_family
from zoo.families.cnn import CNNArchitecture, SmallCNN
from zoo.loader import load_split
from zoo.planning.plan import plan_runs
from zoo.planning.spec import load_spec, spec_from_data
from zoo.planning.spec_files import SPECS_DIR
from zoo.storage.folder import STAGING_FOLDER, read_manifest, save_spec
from zoo.storage.record import architecture_id
from zoo.storage.staging import Staging
from zoo.training.worker import train_runs

NEW_FIELDS = ("padding", "input_range", "population_convolution")
CNN_SPECS = ["cnn-mnist", "cnn-fashion-mnist", "cnn-cifar10-gs", "cnn-svhn-gs"]


def old_spec_file(tmp_path: Path) -> Path:
    """cnn-mnist.yaml as it was before the fields existed: the same file without them."""
    raw = yaml.safe_load((SPECS_DIR / "cnn-mnist.yaml").read_text())
    for field in NEW_FIELDS:
        del raw["architecture"][field]
    path = tmp_path / "cnn-mnist.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def feature_maps(architecture: dict, side: int) -> list[int]:
    model = create_family("cnn").build(architecture)
    h, sides = torch.zeros(1, 1, side, side), []
    for conv in model.convs:
        h = conv(h)
        sides.append(h.shape[-1])
    return sides


# --- old specs keep their meaning -----------------------------------------------------------

def test_a_spec_without_the_fields_keeps_its_hash_ids_and_function(tmp_path):
    """Hashes and ids pinned from the code before the fields (commit 70e688a) on the same file."""
    old = old_spec_file(tmp_path)
    full, tiny = load_spec(old), load_spec(old, "tiny")
    assert full.hash() == "8840c1585654d3d4a7e6" and tiny.hash() == "a6dac325755af685a54c"
    first = plan_runs(tiny)[0]
    assert (first.run_id, first.model_ids[0]) == ("e1cbdadcbb963735a137", "8e8ef422513c4560e43d")
    assert not set(NEW_FIELDS) & set(tiny.architecture)  # absent, so outside every hash
    arch = CNNArchitecture(**tiny.architecture)
    assert (arch.padding, arch.input_range, arch.population_convolution) == ("symmetric", "unit", "grouped")
    assert feature_maps(tiny.architecture, 28) == [14, 7, 4]
    assert create_family("cnn").forward_flops(tiny) == 2 * 9 * 16 * (14 * 14 + 16 * (7 * 7 + 4 * 4)) + 2 * 160
    bundled = load_spec("cnn-mnist", "tiny")
    assert bundled.hash() != tiny.hash() and plan_runs(bundled)[0].run_id != first.run_id


@pytest.mark.parametrize("name", CNN_SPECS)
def test_bundled_cnn_specs_take_the_released_values(name):
    spec = load_spec(name)
    assert {field: spec.architecture[field] for field in NEW_FIELDS} == {
        "padding": "valid", "input_range": "signed", "population_convolution": "unfold"}
    side = 28 if "mnist" in name else 32
    assert feature_maps(spec.architecture, side) == ([13, 6, 2] if side == 28 else [15, 7, 3])


def test_an_old_spec_zoo_verifies_recomputes_and_retrains(tmp_path):
    """A zoo generated from a spec without the fields: its rows keep the old architecture, and
    `verify --recompute` and `--retrain` re-evaluate and retrain it under the old meaning."""
    data = load_spec(old_spec_file(tmp_path), "tiny").to_data()
    data["dataset"].update(train_size=600, validation_size=300, test_size=300, eval_train_size=300)
    data["search_space"]["sampled"]["count"] = 3
    data["training"].update(epochs=1, checkpoint_epochs=[0, 1])
    spec = spec_from_data(data, "test_cnn_released")
    folder = tmp_path / "old-zoo"
    save_spec(spec, folder)
    assert train_runs(spec, plan_runs(spec), Staging(folder / STAGING_FOLDER)) == 6
    pack(folder)
    report = verify(folder, recompute=3, retrain=2, seed=0)
    assert report.ok, report.problems
    assert len(report.recomputed) == 3 and all(r["identical"] for r in report.retrained)
    entry = read_manifest(folder)["configs"]["cnn-mnist"]
    assert not set(NEW_FIELDS) & set(entry["spec"]["architecture"])
    rows = load_split(folder, "cnn-mnist", sorted(entry["splits"])[0]).metadata
    old_id = architecture_id("cnn", spec.architecture, create_family("cnn").weight_space(spec.architecture))
    assert set(rows["architecture"]) == {old_id}  # the rows' safetensors headers hold the old architecture


# --- the Keras oracle -----------------------------------------------------------------------

def keras_released_model(keras, weights: dict[str, torch.Tensor], activation: str):
    """The released `build_cnn`'s layers (3 x Conv2D(16, 3, strides=2), default padding, global
    average pooling, Dense(10)) with our weights in Keras' layout (conv HWIO, dense (in, out))."""
    model = keras.Sequential([keras.Input((28, 28, 1))]
                             + [keras.layers.Conv2D(16, 3, strides=2, activation=activation) for _ in range(3)]
                             + [keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
    for i, layer in enumerate(model.layers[:3], start=1):
        layer.set_weights([weights[f"conv{i}.weight"].permute(2, 3, 1, 0).numpy(), weights[f"conv{i}.bias"].numpy()])
    model.layers[4].set_weights([weights["dense.weight"].T.numpy(), weights["dense.bias"].numpy()])
    return model


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # Keras' own numpy call
def test_keras_released_model_gives_our_logits(tiny_zoo, monkeypatch):
    """Members of the tiny zoo (the bundled spec): Keras' logits on 500 real MNIST test images,
    scaled as the released code does (x / 255, then -1 + 2x), equal ours to 1e-5, from the
    solo model and from the population forward pass that training evaluates with."""
    monkeypatch.setenv("KERAS_BACKEND", "torch")  # read when keras is first imported
    keras = pytest.importorskip("keras", minversion="3")
    family = create_family("cnn")
    entry = read_manifest(tiny_zoo)["configs"]["cnn-mnist"]
    spec = spec_from_data(entry["spec"])
    architecture = spec.architecture
    assert (architecture["padding"], architecture["input_range"]) == ("valid", "signed")
    old_architecture = {k: v for k, v in architecture.items() if k not in NEW_FIELDS}
    images = family.load_data(spec).test.x[:500]  # (500, 1, 28, 28) in [0, 1]
    members = [(loaded.metadata["activation"].iloc[row], loaded.weights.state_dict(row))
               for loaded in (load_split(tiny_zoo, "cnn-mnist", split) for split in sorted(entry["splits"]))
               for row in range(len(loaded)) if loaded.metadata["epoch"].iloc[row] > 0]
    checked, scales, gaps, errors = set(), [], [], []
    for activation, weights in members:
        expected = keras_released_model(keras, weights, activation)(-1.0 + images.permute(0, 2, 3, 1) * 2.0)
        expected = torch.as_tensor(keras.ops.convert_to_numpy(expected))
        with torch.no_grad():
            model, old = (SmallCNN(CNNArchitecture(**a), activation).eval() for a in (architecture, old_architecture))
            model.load_state_dict(weights)
            old.load_state_dict(weights)
            ours, before = model(images), old(images)
            population = family.population_forward(architecture, {k: v.unsqueeze(0) for k, v in weights.items()},
                                                    images, activations=[activation], shared_input=True)[0]
        torch.testing.assert_close(ours, expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(population, expected, rtol=0, atol=1e-5)
        checked.add(activation)
        errors.append(max((ours - expected).abs().max().item(), (population - expected).abs().max().item()))
        scales.append(expected.abs().max().item())
        gaps.append((before - expected).abs().max().item())
    assert checked == {"relu", "tanh"} and len(scales) == 12
    assert max(scales) > 5  # trained members' logits, not a dead network's near-zeros
    print(f"largest logit {max(scales):.2f}, largest difference from Keras {max(errors):.2e}, "
          f"old function's largest difference {max(gaps):.2f}")
    assert max(gaps) > 1  # negative control: the old padding and input range compute another function
