"""A run's per-step draws by `training.rng` (zoo/training/draws.py): counter-v1 gives a member its
solo draws in any population, on any device; torch-generator keeps its crops; the spec switch
keeps old hashes; and under counter-v1 a member trains alone as in any population, for the CNN
(dropout) and the Transformer (dropout and crops), with negative controls."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from zoo.families import create_family
from zoo.planning.plan import plan_runs, run_definition
from zoo.planning.spec import load_spec, spec_from_data
from zoo.training.device import to_device
from zoo.training.draws import SCHEMES, crop_at, population_draws, random_crops, solo_draws
from zoo.validation.schema import SchemaError, to_data

SEEDS, RATES, PADDINGS = [11, 12, 2 ** 40, 14], [0.0, 0.1, 0.5, 0.2], [0, 2, 1, 2]
CPU = torch.device("cpu")
TOLERANCE = 1e-4  # solo nn.Module vs population: float32 rounding, as tests/zoo/test_population.py


def _population(order: list[int], device=CPU, rates=RATES):
    return population_draws("counter-v1", [SEEDS[i] for i in order], [rates[i] for i in order],
                            [PADDINGS[i] for i in order], device)


def test_counter_population_draws_are_each_members_solo_draws():
    """Orders, dropout masks and crops of a member are its solo draws whatever population it
    is in, at whatever position; a population mask is the solo 0/1 mask divided by 1 - rate."""
    x = torch.randn(4, 6, 1, 8, 8)
    shape = (6, 4, 5, 5)
    everyone = torch.ones(4, dtype=torch.bool)
    for order in ([0, 1, 2, 3], [2, 0], [3], [1, 3, 0]):
        draws = _population(order)
        orders, masks = draws.orders(3, 50, everyone[:len(order)]), draws.masks(7, everyone[:len(order)])(2, shape)
        crops = draws.crops(7, x[order])
        for position, i in enumerate(order):
            solo = solo_draws("counter-v1", SEEDS[i], RATES[i], PADDINGS[i])
            assert torch.equal(orders[position], solo.order(3, 50)), (order, i)
            assert sorted(orders[position].tolist()) == list(range(50))
            kept = solo.masks(7)(2, shape)
            assert torch.equal(masks[position] != 0, kept.bool()), (order, i)
            assert torch.allclose(masks[position][kept.bool()], torch.tensor(1 / (1 - RATES[i])))
            assert torch.equal(crops[position], solo.crop(7, x[i])), (order, i)
    assert _population([0], rates=[0.0] * 4).masks(1, everyone[:1])(1, shape) is None  # no dropout: no draws
    # negative controls: another step, layer or epoch draws otherwise
    draws = _population([1])
    assert not torch.equal(draws.masks(7, everyone)(2, shape), draws.masks(8, everyone)(2, shape))
    assert not torch.equal(draws.masks(7, everyone)(2, shape), draws.masks(7, everyone)(3, shape))
    assert not torch.equal(draws.orders(3, 50), draws.orders(4, 50))


def test_dropout_keeps_at_the_members_rate():
    draws = _population([0, 1, 2, 3])
    masks = draws.masks(1, torch.ones(4, dtype=torch.bool))(1, (100, 400))
    for k, rate in enumerate(RATES):
        kept = float((masks[k] != 0).double().mean())
        assert abs(kept - (1 - rate)) < 5 * (rate * (1 - rate) / 40_000) ** 0.5 + 1e-12, (k, kept)


def test_counter_crops_are_shifts_within_each_members_padding():
    """Every crop is the image shifted by (dy - p, dx - p) with dy, dx in [0, 2p], p the
    member's own padding (the population pads by its largest); all (2p + 1)^2 shifts occur."""
    K, B = 4, 400
    x = torch.arange(K * B * 2 * 6 * 6, dtype=torch.float32).reshape(K, B, 2, 6, 6) + 1
    draws = _population([0, 1, 2, 3])
    crops = draws.crops(5, x)
    for k, p in enumerate(PADDINGS):
        padded = F.pad(x[k], (p,) * 4)
        seen = set()
        for b in range(B):
            shifts = [(dy, dx) for dy in range(2 * p + 1) for dx in range(2 * p + 1)
                      if torch.equal(crops[k, b], padded[b, :, dy:dy + 6, dx:dx + 6])]
            assert shifts, (k, b)  # a crop of the member's own padded image
            seen.add(shifts[0])
        assert len(seen) == (2 * p + 1) ** 2, (k, sorted(seen))
    assert torch.equal(crops[0], x[0])  # padding 0: unchanged


def test_torch_generator_crops_are_the_released_random_crop():
    """random_crops (through crop_at) against explicit slicing with the same generator draws:
    torch.randint(0, 2p + 1, (2, B)), rows first."""
    x = torch.randn(7, 3, 8, 8)
    generator, reference_generator = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    cropped = random_crops(x, 2, generator)
    offsets = torch.randint(0, 5, (2, 7), generator=reference_generator)
    padded = F.pad(x, (2,) * 4)
    for b in range(7):
        dy, dx = offsets[0, b].item(), offsets[1, b].item()
        assert torch.equal(cropped[b], padded[b, :, dy:dy + 8, dx:dx + 8])
    assert torch.equal(crop_at(x[None], 0, torch.zeros(1, 7, 2, dtype=torch.long))[0], x)


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device here: the cross-device check runs where one is")
def test_counter_draws_are_the_same_bits_on_cuda():
    cuda = torch.device("cuda")
    everyone = torch.ones(4, dtype=torch.bool)
    on_cpu, on_cuda = _population([0, 1, 2, 3]), _population([0, 1, 2, 3], cuda)
    assert torch.equal(on_cuda.orders(2, 1000).cpu(), on_cpu.orders(2, 1000))
    assert torch.equal(on_cuda.masks(9, everyone)(1, (32, 16, 9, 9)).cpu(),
                       on_cpu.masks(9, everyone)(1, (32, 16, 9, 9)))
    x = torch.randn(4, 8, 1, 28, 28)
    assert torch.equal(on_cuda.crops(9, x.to(cuda)).cpu(), on_cpu.crops(9, x))


def test_the_spec_switch_keeps_old_hashes_and_names_bad_values():
    spec = load_spec("cnn-mnist", "tiny")
    assert spec.training.rng == "torch-generator" and set(SCHEMES) == {"torch-generator", "counter-v1"}
    data = to_data(spec)
    assert "rng" not in run_definition(spec)["training"]
    data["training"]["rng"] = "counter-v1"
    counter = spec_from_data(data)
    assert counter.hash() != spec.hash()
    assert run_definition(counter)["training"]["rng"] == "counter-v1"
    assert {r.run_id for r in plan_runs(counter)}.isdisjoint(r.run_id for r in plan_runs(spec))
    data["training"]["rng"] = "mt19937"
    with pytest.raises(SchemaError, match="training.rng"):
        spec_from_data(data)


# -- training under counter-v1 ------------------------------------------------------------------

def _counter_spec(name: str, **training) -> tuple:
    data = to_data(load_spec(name, "tiny"))
    data["dataset"].update(train_size=192, validation_size=100, test_size=100, eval_train_size=64)
    data["training"].update(epochs=2, checkpoint_epochs=[1, 2], rng="counter-v1", **training)
    if name.startswith("cnn"):
        data["architecture"]["population_convolution"] = "unfold"
    spec = spec_from_data(data)
    family = create_family(spec.family)
    return spec, family, family.load_data(spec)


def _runs(spec, count: int, **hparams) -> list:
    return [dataclasses.replace(run, run_id=f"{run.run_id}-{i}", seed=run.seed + i,
                                hparams={**run.hparams, "train_fraction": 0.5, **hparams})
            for i, run in enumerate((plan_runs(spec) * count)[:count])]


def _train(family, spec, data, runs, population: bool) -> dict:
    results = {}
    if population:
        family.train_population(spec, runs, data, lambda run, r: results.setdefault((run.run_id, r.epoch, r.best), r))
    else:
        for run in runs:
            family.train_run(spec, run, data, lambda r, run=run: results.setdefault((run.run_id, r.epoch, r.best), r))
    return results


FAMILIES = {
    "cnn-mnist": {"optimizer": "adam", "learning_rate": 0.003, "activation": "relu", "dropout": 0.2},
    "transformer-mnist": {"optimizer": "adam", "learning_rate": 0.003, "dropout": 0.1, "crop_padding": 2,
                          "warmup_epochs": 0},
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_counter_v1_members_train_alone_as_in_any_population(name, assert_members_match):
    """Bitwise: a member alone, among 3 and in another position; to float32 rounding: its solo
    nn.Module run. Negative controls: another seed, and the same run under torch-generator."""
    spec, family, data = _counter_spec(name)
    runs = _runs(spec, 3, **FAMILIES[name])
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = _train(family, spec, data, runs[:1], True)
        others = [_train(family, spec, data, runs, True), _train(family, spec, data, [runs[2], runs[0]], True)]
        solo = _train(family, spec, data, runs[:1], False)
        reseeded = _train(family, spec, data, [dataclasses.replace(runs[0], seed=runs[0].seed + 7)], True)
        legacy_spec = dataclasses.replace(spec, training=dataclasses.replace(spec.training, rng="torch-generator"))
        legacy = _train(family, legacy_spec, data, runs[:1], True)
    finally:
        torch.set_num_threads(previous)
    for key, result in alone.items():
        for other in others:
            assert other[key].metrics == result.metrics, key
            for weight, tensor in result.weights.items():
                assert torch.equal(other[key].weights[weight], tensor), (key, weight)
    assert_members_match(solo, alone, TOLERANCE, TOLERANCE)
    last = max(alone)
    first_weight = next(iter(alone[last].weights))
    for control in (reseeded, legacy):
        assert not torch.allclose(control[last].weights[first_weight], alone[last].weights[first_weight],
                                  rtol=100 * TOLERANCE, atol=100 * TOLERANCE)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_counter_v1_population_follows_its_solo_runs_on_each_device(name, device, assert_members_match):
    """The population's draws are made where its data lives (the CPU here; CUDA in the GPU check,
    `benchmarks/perf/gpu_check.sh`), and its members follow their solo CPU runs."""
    spec, family, data = _counter_spec(name)
    runs = _runs(spec, 2, **FAMILIES[name])
    solo = _train(family, spec, data, runs, False)
    together = _train(family, spec, to_device(data, device), runs, True)
    tolerance = TOLERANCE if device.type == "cpu" else 5e-3  # cuBLAS vs oneDNN rounding, as the other CUDA checks
    assert_members_match(solo, together, tolerance, tolerance)


def test_a_counter_v1_zoo_records_its_scheme_and_retrains_bit_for_bit(tmp_path):
    """A tiny Transformer zoo with dropout and crops made under counter-v1 (no Ray): its stored
    spec says counter-v1, and `verify --retrain` retraces every run from it (that check's own
    negative control, a nudged weight, is tests/zoo/test_verify.py's)."""
    from zoo.dataset.pack import pack
    from zoo.dataset.verify import verify
    from zoo.storage.folder import STAGING_FOLDER, save_spec
    from zoo.storage.staging import Staging
    from zoo.training.worker import train_runs

    data = load_spec("transformer-mnist", "tiny").to_data()
    data["dataset"].update(train_size=192, validation_size=100, test_size=100, eval_train_size=64)
    data["search_space"]["fixed"].update(dropout=0.1, crop_padding=2)
    data["search_space"]["grids"] = [{"optimizer": ["adam"], "learning_rate": [0.001, 0.03], "init_std": [0.3]}]
    data["training"].update(epochs=2, checkpoint_epochs=[1, 2], rng="counter-v1")
    data["splits"]["fractions"] = {"train": 0.5, "validation": 0.25, "test": 0.25}
    spec = spec_from_data(data, "tests/zoo/test_draws.py")
    runs = plan_runs(spec)
    save_spec(spec, tmp_path)
    assert len(runs) == 2 and train_runs(spec, runs, Staging(tmp_path / STAGING_FOLDER)) == 2 * len(runs[0].checkpoints)
    pack(tmp_path)
    manifest = (tmp_path / "manifest.json").read_text()
    assert '"rng": "counter-v1"' in manifest
    report = verify(tmp_path, retrain=2)
    assert len(report.retrained) == 2 and all(r["identical"] for r in report.retrained), report.retrained


def test_generate_takes_the_scheme_and_says_it(capsys):
    """`nfnzoo generate --rng counter-v1` replaces the spec's scheme (the dry run says so); the
    flag offers exactly the registered schemes; a bad value is refused by argparse."""
    from zoo.cli import main

    assert main(["generate", "cnn-mnist", "--profile", "tiny", "--rng", "counter-v1", "--dry-run"]) == 0
    assert "checkpoints, training.rng: counter-v1" in capsys.readouterr().out
    assert main(["generate", "cnn-mnist", "--profile", "tiny", "--dry-run"]) == 0
    assert "training.rng:" not in capsys.readouterr().out.splitlines()[0]
    with pytest.raises(SystemExit):
        main(["generate", "cnn-mnist", "--rng", "mt19937", "--dry-run"])
    assert f"invalid choice: 'mt19937' (choose from {', '.join(map(repr, SCHEMES))})" in capsys.readouterr().err
