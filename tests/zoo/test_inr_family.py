"""The INR family: SIRENs fitted to real MNIST images in populations.

Weight space and initialization, the batched forward against the plain module, fitting
quality, a member in a population against the same member alone (bitwise) and against plain
`torch.optim.Adam` (float32 rounding), divergence masking, the sign-flip symmetry group with
a negative control, the specs at paper scale, and the whole pipeline on the `tiny` profile:
stage, pack, load with `datasets` and the fast loader, verify.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from zoo.planning.estimate import estimate
from zoo.families import create_family
from zoo.families.inr_population import fit_population
from zoo.families.inr import (INRArchitecture, Siren, coordinate_grid, init_siren,
                              pixel_targets, siren_forward)
from zoo.storage.folder import STAGING_FOLDER
from zoo.loader import load_split
from zoo.planning.plan import assign_splits, plan_runs
from zoo.planning.spec import load_spec, spec_from_data
from zoo.storage.staging import Staging
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.training.train import seeded_generator
from zoo.dataset.verify import verify
from zoo.weightspace import WeightBatch

MNIST = dataclasses.asdict(INRArchitecture())
PSNR_FLOOR_DB = 25.0  # tiny profile (lr 1e-3, 200 steps): every one of its 28 fits measured 29-37 dB
SYMMETRY_ATOL = 1e-5  # outputs of magnitude <= ~1.5; permuted sums change float32 rounding only


def spec_with(images: list[int], learning_rate: float = 1e-3, steps: int = 60, checkpoints=None):
    """The tiny inr-mnist spec fitting the listed images (validated like a file)."""
    data = load_spec("inr-mnist", "tiny").to_data()
    data["search_space"] = {"fixed": {"learning_rate": learning_rate}, "grid": {"image_index": images}, "sampled": None}
    data["training"].update(epochs=steps, checkpoint_epochs=checkpoints or [steps])
    return spec_from_data(data, "test_inr_family")


def fit(spec, runs, data) -> dict:
    """(image_index, step) -> CheckpointResult, through the family's population training."""
    results = {}
    create_family("inr").train_population(spec, runs, data,
                                          lambda run, r: results.__setitem__((run.hparams["image_index"], r.epoch), r))
    return results


@pytest.fixture(scope="module")
def mnist():
    """MNIST's 60,000 training images followed by its 10,000 test images."""
    return create_family("inr").load_data(load_spec("inr-mnist", "tiny"))


@pytest.fixture(scope="module")
def tiny_inr_zoo(tiny_inr_zoo_folder):
    """The `tiny` profile staged with zoo.training.worker.train_runs (no Ray) and packed (tests/conftest.py)."""
    return load_spec("inr-mnist", "tiny"), tiny_inr_zoo_folder


# --- the member ---------------------------------------------------------------------------

def test_siren_weight_space_has_1185_parameters_in_layer_order():
    family = create_family("inr")
    space = family.weight_space(load_spec("inr-mnist").architecture)
    assert space.num_params == 1185
    assert [(t.name, t.shape, t.role, t.layer) for t in space.tensors] == [
        ("sine1.weight", (32, 2), "weight", 0), ("sine1.bias", (32,), "bias", 0),
        ("sine2.weight", (32, 32), "weight", 1), ("sine2.bias", (32,), "bias", 1),
        ("output.weight", (1, 32), "weight", 2), ("output.bias", (1,), "bias", 2)]
    assert family.weight_space(load_spec("inr-cifar10").architecture).num_params == 1251  # 3 outputs
    assert family.symmetry(MNIST).hidden_sizes == (32, 32)


def test_initialization_follows_siren_and_its_own_seed():
    arch = INRArchitecture()
    weights = init_siren(arch, seeded_generator(0, "siren_init/7"))
    bounds = {"sine1.weight": 1 / 2, "sine2.weight": math.sqrt(6 / 32) / 30, "output.weight": math.sqrt(6 / 32) / 30,
              "sine1.bias": 1 / math.sqrt(2), "sine2.bias": 1 / math.sqrt(32), "output.bias": 1 / math.sqrt(32)}
    for name, bound in bounds.items():
        largest = weights[name].abs().max().item()
        assert largest <= bound, name
        if weights[name].numel() >= 32:  # uniform draws reach close to their bound
            assert largest > 0.8 * bound, name
    again = init_siren(arch, seeded_generator(0, "siren_init/7"))
    other = init_siren(arch, seeded_generator(0, "siren_init/8"))
    assert all(torch.equal(weights[n], again[n]) for n in weights)
    assert not torch.equal(weights["sine2.weight"], other["sine2.weight"])


def test_batched_forward_matches_the_module_and_the_pixel_order():
    arch = INRArchitecture()
    generator = torch.Generator().manual_seed(0)
    members = [init_siren(arch, generator) for _ in range(3)]
    coords = coordinate_grid(28)
    batched = siren_forward(arch, [torch.stack([m[n] for m in members]) for n in members[0]], coords)
    for i, weights in enumerate(members):
        module = Siren(arch)
        module.load_state_dict(weights)
        with torch.no_grad():
            assert torch.allclose(batched[i], module(coords), atol=1e-6)
    assert coords.shape == (784, 2) and coords[0].tolist() == [-1, -1] and coords[-1].tolist() == [1, 1]
    assert torch.allclose(coords[1], torch.tensor([-1, -1 + 2 / 27]))  # row-major: the column moves first
    image = torch.rand(1, 1, 28, 28, generator=generator)
    assert pixel_targets(image)[0, 3 * 28 + 5, 0] == image[0, 0, 3, 5] * 2 - 1


def test_forward_flops_match_torch_flop_counter():
    family = create_family("inr")
    model = family.build(MNIST)
    with FlopCounterMode(display=False) as counter:
        model(coordinate_grid(28))
    assert family.forward_flops(MNIST) * 784 == counter.get_total_flops() == 2 * 784 * (2 * 32 + 32 * 32 + 32)
    spec = load_spec("inr-mnist")
    assert family.examples_per_run(spec, {}) == 784 * 3000


# --- fitting --------------------------------------------------------------------------------

def test_tiny_population_fits_mnist_images(tiny_inr_zoo, mnist):
    spec, folder = tiny_inr_zoo
    records = {(r.hparams["image_index"], r.epoch): r for r in Staging(folder / STAGING_FOLDER)}
    assert len(records) == 56 and {r.status for r in records.values()} == {"ok"}
    for image_index in range(0, 70000, 2500):
        early, final = records[image_index, 100], records[image_index, 200]
        assert final.metrics["label"] == early.metrics["label"] == int(mnist.y[image_index])
        assert final.metrics["psnr"] > PSNR_FLOOR_DB, (image_index, final.metrics)
        assert final.metrics["psnr"] > early.metrics["psnr"] + 3  # still improving between the checkpoints
        assert math.isclose(final.metrics["psnr"], 10 * math.log10(4 / final.metrics["mse"]))
    # untrained, a SIREN is far from its image: the fit did the work
    initial = init_siren(INRArchitecture(), seeded_generator(0, "siren_init/0"))
    untrained = create_family("inr").evaluate(spec, {"image_index": 0}, initial, mnist)
    assert untrained["psnr"] < 10


def test_member_fits_the_same_in_any_population_and_as_plain_torch(mnist):
    images, rates = [0, 7, 2500, 45000, 69999], [1e-3, 5e-4, 2e-3, 1e-3, 3e-4]
    arch = INRArchitecture()
    inits = [init_siren(arch, seeded_generator(0, f"siren_init/{i}")) for i in images]
    together = fit_population(arch, inits, mnist.x[images], rates, 60, [60])[60][0]
    for member in (0, 3):
        alone = fit_population(arch, inits[member:member + 1], mnist.x[images[member]:images[member] + 1],
                               rates[member:member + 1], 60, [60])[60][0][0]
        for name, tensor in alone.items():  # the batched kernels do not depend on the population
            assert torch.equal(together[member][name], tensor), (member, name)
    # the same fit with nn.Module and torch.optim.Adam: equal to float32 rounding
    model = Siren(arch)
    model.load_state_dict(inits[1])
    optimizer = torch.optim.Adam(model.parameters(), lr=rates[1])
    coords, target = coordinate_grid(28), pixel_targets(mnist.x[images[1]:images[1] + 1])[0]
    for _ in range(60):
        loss = (model(coords) - target).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for name, tensor in model.state_dict().items():
        assert torch.allclose(together[1][name], tensor, rtol=1e-4, atol=1e-6), name
        assert not torch.equal(tensor, inits[1][name])


def test_family_init_is_seeded_by_run_seed_and_image(mnist):
    spec = spec_with([3, 11], steps=1, checkpoints=[0, 1])
    results = fit(spec, plan_runs(spec), mnist)
    for image_index in (3, 11):
        expected = init_siren(INRArchitecture(), seeded_generator(0, f"siren_init/{image_index}"))
        assert all(torch.equal(results[image_index, 0].weights[n], expected[n]) for n in expected)
    reseeded = spec_from_data({**spec.to_data(), "seeds": [1]})
    other = fit(reseeded, plan_runs(reseeded), mnist)
    assert not torch.equal(other[3, 0].weights["sine2.weight"], results[3, 0].weights["sine2.weight"])


def test_diverging_member_is_masked_and_leaves_the_others_untouched(mnist):
    spec = spec_with([1, 2, 3], steps=30, checkpoints=[0, 10, 30])
    runs = plan_runs(spec)
    absurd = [dataclasses.replace(r, hparams={**r.hparams, "learning_rate": 1e30}) if r.hparams["image_index"] == 2
              else r for r in runs]
    results = fit(spec, absurd, mnist)
    assert results[2, 0].status == "ok"  # the initialization is fine
    for step in (10, 30):
        diverged = results[2, step]
        assert diverged.status == "diverged" and diverged.metrics["label"] == int(mnist.y[2])
        assert math.isnan(diverged.metrics["psnr"]) and math.isnan(diverged.metrics["mse"])
    # frozen where it diverged (after its first update), not updated with NaNs
    assert torch.equal(results[2, 10].weights["sine2.weight"], results[2, 30].weights["sine2.weight"])
    solo = fit(spec, [r for r in runs if r.hparams["image_index"] != 2], mnist)
    for image_index in (1, 3):
        assert results[image_index, 30].status == "ok"
        assert results[image_index, 30].metrics == solo[image_index, 30].metrics
        for name, tensor in solo[image_index, 30].weights.items():
            assert torch.equal(results[image_index, 30].weights[name], tensor), name


def test_data_and_recipe_that_do_not_fit_are_rejected(mnist):
    family = create_family("inr")
    data = load_spec("inr-mnist", "tiny").to_data()
    wrong_size = copy.deepcopy(data)
    wrong_size["architecture"]["image_size"] = 32
    with pytest.raises(ValueError, match="fits 1x32x32 images; mnist has 1x28x28"):
        family.load_data(spec_from_data(wrong_size))
    mini_batch = copy.deepcopy(data)
    mini_batch["training"]["batch_size"] = 128
    with pytest.raises(ValueError, match="full-batch; set training.batch_size to the 784 pixels"):
        family.load_data(spec_from_data(mini_batch))
    held_out = copy.deepcopy(data)
    held_out["dataset"]["validation_size"] = 5000
    with pytest.raises(ValueError, match="does not apply to INRs"):
        family.load_data(spec_from_data(held_out))
    beyond = copy.deepcopy(data)
    beyond["search_space"]["grid"]["image_index"] = [70000]
    beyond["splits"]["by"]["ranges"]["test"] = [50000, 80000]
    spec = spec_from_data(beyond)
    with pytest.raises(ValueError, match="image_index 70000 is outside mnist's 70000 images"):
        family.train_population(spec, plan_runs(spec), mnist, lambda run, result: None)


# --- symmetry -------------------------------------------------------------------------------

def _outputs(weights: WeightBatch, coords: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return siren_forward(INRArchitecture(), weights.tensors, coords)


def test_sign_flips_and_permutations_preserve_fitted_sirens(tiny_inr_zoo):
    _, folder = tiny_inr_zoo
    fitted = load_split(folder, "inr-mnist", "train").weights[:6]  # fitted SIRENs: the realistic case
    symmetry = create_family("inr").symmetry(MNIST)
    assert symmetry.mode == "sign"
    on_grid, between = coordinate_grid(28), coordinate_grid(55)  # also off the pixel centres
    element = symmetry.sample(torch.Generator().manual_seed(0), len(fitted))
    assert (torch.cat(element.scales) == -1).any()  # the sample does flip signs
    moved = symmetry.act(element, fitted)
    assert not torch.equal(moved.flatten(), fitted.flatten())
    for coords in (on_grid, between):
        assert torch.allclose(_outputs(moved, coords), _outputs(fitted, coords), atol=SYMMETRY_ATOL)
    # negative control: positive rescaling of hidden units is not a symmetry of sine
    scaling = FeedforwardSymmetry(symmetry.space, "scale")
    rescaled = scaling.act(scaling.sample(torch.Generator().manual_seed(0), len(fitted)), fitted)
    assert (_outputs(rescaled, on_grid) - _outputs(fitted, on_grid)).abs().amax(dim=(1, 2)).min() > 0.1


def test_sign_group_laws_hold_exactly(tiny_inr_zoo):
    _, folder = tiny_inr_zoo
    weights = load_split(folder, "inr-mnist", "test").weights[:4]
    symmetry = create_family("inr").symmetry(MNIST)
    generator = torch.Generator().manual_seed(1)
    a, b = symmetry.sample(generator, 4), symmetry.sample(generator, 4)
    assert torch.equal(symmetry.act(symmetry.compose(a, b), weights).flatten(),
                       symmetry.act(a, symmetry.act(b, weights)).flatten())
    assert torch.equal(symmetry.act(symmetry.inverse(a), symmetry.act(a, weights)).flatten(), weights.flatten())
    assert torch.equal(symmetry.act(symmetry.identity(4), weights).flatten(), weights.flatten())


# --- specs, splits and the pipeline ---------------------------------------------------------

@pytest.mark.parametrize("name, images, test_size, params", [("inr-mnist", 70000, 20000, 1185),
                                                              ("inr-cifar10", 60000, 10000, 1251)])
def test_specs_plan_every_image_with_the_classic_splits(name, images, test_size, params):
    spec = load_spec(name)
    runs = plan_runs(spec)
    assert [r.hparams["image_index"] for r in runs] == list(range(images))
    split_of = assign_splits([r.run_id for r in runs], spec, runs)
    for run in runs[44999:45001] + runs[49999:50001]:
        index = run.hparams["image_index"]
        assert split_of[run.run_id] == ("train" if index < 45000 else "validation" if index < 50000 else "test")
    counts = {s: sum(1 for v in split_of.values() if v == s) for s in ("train", "validation", "test")}
    assert counts == {"train": 45000, "validation": 5000, "test": test_size}
    result = estimate(spec)
    assert (result.runs, result.checkpoints, result.params) == (images, images, params)


def test_every_inr_spec_and_profile_loads():
    for name in ("inr-mnist", "inr-fashion-mnist", "inr-cifar10"):
        full = load_spec(name)
        assert full.family == "inr" and full.training.epochs == 3000
        for profile in ("tiny", "demo"):
            spec = load_spec(name, profile)
            assert spec.splits == full.splits and spec.architecture == full.architecture
    assert load_spec("inr-fashion-mnist").dataset.name == "fashion_mnist"
    cifar = load_spec("inr-cifar10", "tiny")
    architecture = cifar.architecture
    assert (architecture["out_features"], architecture["image_size"], cifar.training.batch_size) == (3, 32, 1024)
    assert len(plan_runs(cifar)) == 24


def test_tiny_zoo_packs_loads_and_verifies(tiny_inr_zoo, mnist, read_with_datasets):
    spec, folder = tiny_inr_zoo
    seen = read_with_datasets(folder, "inr-mnist")
    assert {s: v["rows"] for s, v in seen["splits"].items()} == {"train": 36, "validation": 4, "test": 16}
    assert not seen["imported_zoo"]
    features = seen["splits"]["train"]["features"]
    assert "int64" in features["label"] and "int64" in features["image_index"] and "float64" in features["psnr"]
    assert seen["splits"]["train"]["first_row"]["sine2.weight"]["shape"] == [32, 32]
    test = load_split(folder, "inr-mnist", "test")
    assert len(test) == 16 and set(test.metadata["image_index"]) == set(range(50000, 70000, 2500))
    assert test.metadata["label"].tolist() == mnist.y[test.metadata["image_index"].tolist()].tolist()
    family = create_family("inr")
    row = int(test.metadata.index[test.metadata["epoch"] == 200][0])
    stored = test.metadata.iloc[row]
    recomputed = family.evaluate(spec, {"image_index": int(stored["image_index"])}, test.weights.state_dict(row), mnist)
    assert recomputed == {"label": stored["label"], "psnr": stored["psnr"], "mse": stored["mse"]}
    report = verify(folder)
    assert report.ok, report.problems


def test_tiny_zoo_metrics_recompute(tiny_inr_zoo):
    _, folder = tiny_inr_zoo
    report = verify(folder, recompute=3)
    assert report.ok, report.problems
    assert len(report.recomputed) == 3
