"""The Transformer family: weight space, data, recipe, paper-scale plans, training, the full pipeline."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from zoo.families import create_family
from zoo.families.transformer import TransformerHParams, learning_rate_at
from zoo.storage.folder import STAGING_FOLDER, save_spec
from zoo.loader import load_split
from zoo.dataset.pack import pack
from zoo.planning.plan import BEST_EPOCH, plan_runs
from zoo.validation.schema import SchemaError
from zoo.planning.spec import content_hash, load_spec, spec_from_data
from zoo.storage.staging import Staging
from zoo.data.text import PAD_ID, TEXT_SOURCES, clean_text, tokenize
from zoo.training.train import CLASSIFICATION_METRICS
from zoo.dataset.verify import verify
from zoo.training.worker import train_runs

SPECS = ["transformer-mnist", "transformer-agnews"]
SENSIBLE = {"optimizer": "adam", "learning_rate": 1e-3, "init_std": 0.3, "l2": 1e-6, "dropout": 0.0,
            "train_fraction": 1.0, "warmup_epochs": 1, "final_learning_rate": 1e-5}


def fixed_spec(name: str, hparams: dict, *, epochs: int, **dataset):
    """The tiny profile of `name` with one fixed configuration, validated like a file."""
    data = load_spec(name, "tiny").to_data()
    crop = data["search_space"]["fixed"]["crop_padding"]
    data["search_space"] = {"fixed": {"crop_padding": crop, **hparams}, "grid": {}, "sampled": None, "grids": []}
    data["training"].update(epochs=epochs, checkpoint_epochs=list(range(epochs + 1)), keep_best=True)
    data["dataset"].update(dataset)
    return spec_from_data(data, "test_transformer_family")


def train_one(spec) -> list:
    family = create_family("transformer")
    results = []
    family.train_run(spec, plan_runs(spec)[0], family.load_data(spec), results.append)
    return results


# --- the member and its weight space ---------------------------------------------------------

@pytest.mark.parametrize("name, params, stem", [("transformer-mnist", 18506, ["embedding.conv1.weight",
                                                                              "embedding.conv1.bias"]),
                                                ("transformer-agnews", 17764, [])])
def test_weight_space_is_exactly_the_trainable_parameters_in_forward_order(name, params, stem):
    family = create_family("transformer")
    architecture = load_spec(name).architecture
    space, model = family.weight_space(architecture), family.build(architecture)
    block = [f"attention.{m}.weight" for m in ("queries", "keys", "values", "out_projection")]
    block += [f"{m}.{r}" for m in ("fc1", "fc2") for r in ("weight", "bias")]
    expected = stem + [f"encoder.{b}.{n}" for b in range(2) for n in block]
    expected += [f"classifier.{m}.{r}" for m in ("fc1", "fc2") for r in ("weight", "bias")]
    assert list(space.names) == expected
    assert list(model.state_dict()) == [n for n, p in model.named_parameters() if p.requires_grad] == expected
    assert space.num_params == params == sum(p.numel() for p in model.parameters())
    # one layer per linear map, in forward order: Q, K, V, O, fc1, fc2 per block, then the head
    layers = [t.layer for t in space.tensors]
    assert layers == sorted(layers) and space.num_layers == len(stem) // 2 + 2 * 6 + 2
    shapes = {t.name: t.shape for t in space.tensors}
    assert shapes["encoder.0.attention.queries.weight"] == (32, 32)  # 2 heads x d_k 16, from d_model 32
    assert shapes["encoder.1.fc1.weight"] == (64, 32) and shapes["encoder.1.fc2.weight"] == (32, 64)
    assert shapes["classifier.fc2.weight"] == (10 if "mnist" in name else 4, 32)
    assert "positional_encoding" not in model.state_dict()  # fixed, not stored


def test_forward_flops_match_torch_flop_counter():
    family = create_family("transformer")
    for name, x in (("transformer-mnist", torch.zeros(1, 1, 28, 28)),
                    ("transformer-agnews", torch.full((1, 64), 2000, dtype=torch.long))):
        spec = load_spec(name)
        model = family.build(spec.architecture).eval()
        model(x)  # loads the frozen word vectors (a PCA) outside the count
        with FlopCounterMode(display=False) as counter:
            model(x)
        assert family.forward_flops(spec) == family.forward_flops(spec.architecture) == counter.get_total_flops()
    spec = load_spec("transformer-mnist")
    # training.drop_last: 38,500 examples are 300 full batches of 128 (38,400) per epoch
    assert family.examples_per_run(spec, {"train_fraction": 0.7}) == 100 * (math.ceil(0.7 * 55000) // 128) * 128
    assert family.run_flops(spec, {"train_fraction": 1.0}) > 3 * 100 * (55000 // 128) * 128 * family.forward_flops(spec)


def test_architecture_and_hyperparameters_are_validated():
    data = load_spec("transformer-agnews").to_data()
    data["architecture"]["reduced_embeddings_sha256"] = ""
    with pytest.raises(SchemaError, match="reduced_embeddings_sha256: required"):
        spec_from_data(data, "agnews")
    data = load_spec("transformer-mnist", "tiny").to_data()
    data["search_space"]["grids"][1]["learning_rate"] = [5e-2, 0.0]
    with pytest.raises(SchemaError,
                       match=r"grids\[1\]\.learning_rate\[1\]: expected a learning rate \(> 0\), got 0\.0"):
        spec_from_data(data, "mnist")  # on load now, not when planning
    data["search_space"]["grids"][1]["learning_rate"] = ["fast"]
    with pytest.raises(SchemaError, match=r"search_space\.grids\[1\]\.learning_rate\[0\]"):
        spec_from_data(data, "mnist")


def test_learning_rate_warms_up_linearly_then_decays_to_the_final_rate():
    hp = TransformerHParams(**{**SENSIBLE, "learning_rate": 5e-2, "warmup_epochs": 10, "crop_padding": 0})
    rates = [learning_rate_at(epoch, hp, 100) for epoch in range(1, 101)]
    assert rates[:10] == pytest.approx([5e-2 * (e + 1) / 10 for e in range(10)])  # lr / 10 ... lr
    assert rates[10] == pytest.approx(5e-2) and all(a > b for a, b in zip(rates[10:], rates[11:]))
    assert rates[-1] == pytest.approx(1e-5 + (5e-2 - 1e-5) * (1 + math.cos(math.pi * 89 / 90)) / 2)
    assert learning_rate_at(101, hp, 100) == pytest.approx(1e-5)  # the end of training


# --- paper-scale plans ------------------------------------------------------------------------

@pytest.mark.parametrize("name", SPECS)
def test_specs_plan_the_released_grid_16000_runs_and_64000_checkpoints(name):
    spec = load_spec(name)
    runs = plan_runs(spec)
    assert len(runs) == 16000 and sum(len(r.checkpoints) for r in runs) == 64000  # x 2 data sets = 128,000
    assert spec.training.checkpoint_epochs == (50, 75, 100) and spec.training.keep_best
    assert all([c.epoch for c in r.checkpoints] == [50, 75, 100, BEST_EPOCH] and r.checkpoints[-1].best for r in runs)
    assert (spec.training.epochs, spec.training.batch_size) == (100, 128)
    values = Counter()
    for run in runs:
        hp = TransformerHParams(**run.hparams)
        values[(hp.optimizer, hp.learning_rate, hp.init_std)] += 1
    adaptive = {(o, lr, std) for o in ("adam", "rmsprop") for lr in (3e-4, 5e-4, 1e-3, 3e-3, 5e-3, 1e-2, 3e-2, 5e-2)
                for std in (0.1, 0.2, 0.3, 0.4, 0.5)}
    sgd = {(o, lr, std) for o in ("sgd", "sgd_momentum") for lr in (1e-3, 3e-3, 5e-3, 7e-3, 1e-2, 3e-2, 5e-2, 7e-2)
           for std in (0.1, 0.15, 0.2, 0.25, 0.3)}
    assert set(values) == adaptive | sgd and set(values.values()) == {5 * 4 * 5}  # x L2 x fraction x dropout
    assert {r.hparams["warmup_epochs"] for r in runs} == {10}
    assert {r.hparams["final_learning_rate"] for r in runs} == {1e-5}


# --- data -------------------------------------------------------------------------------------

def test_offline_ag_news_is_a_fixed_balanced_resplit_of_the_test_articles():
    train_texts, train_labels, test_texts, test_labels = TEXT_SOURCES.get("ag_news_7600")()
    assert (len(train_texts), len(test_texts)) == (5700, 1900)
    assert Counter(test_labels.tolist()) == {0: 475, 1: 475, 2: 475, 3: 475}
    again = TEXT_SOURCES.get("ag_news_7600")()
    assert again[2] == test_texts and not set(train_texts) & set(test_texts[:50])
    tokens = tokenize(["Fears for T N pension after talks", ""], 16)
    assert tokens.shape == (2, 16) and tokens[0, 0] == 101 and (tokens[1, 2:] == PAD_ID).all()  # [CLS], padding
    assert clean_text("a second\\team #36;10 it#39;s "
                      "&lt;b&gt;x&lt;/b&gt; quot;y quot;") == "a second team $10 it's x \"y \""


def test_word_vectors_that_differ_from_the_recorded_hash_are_refused():
    data = load_spec("transformer-agnews", "tiny").to_data()
    data["architecture"]["reduced_embeddings_sha256"] = "0" * 64
    with pytest.raises(ValueError, match="reduced_sha256 is 67900bda.*records 0000"):
        create_family("transformer").load_data(spec_from_data(data, "agnews"))


# --- training ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, init_std, floor", [("transformer-mnist", 0.3, 0.25), ("transformer-agnews", 0.1, 0.55)])
def test_a_sensible_run_beats_chance_and_keeps_its_best_validation_epoch(name, init_std, floor):
    # 3 epochs on 2,000 examples: Adam at 1e-3, init std 0.3 (MNIST) or 0.1 (AG News)
    results = train_one(fixed_spec(name, {**SENSIBLE, "init_std": init_std}, epochs=3, train_size=2000))
    *regular, best = results
    by_epoch = {r.epoch: r for r in regular}
    assert [r.epoch for r in regular] == [0, 1, 2, 3] and {r.status for r in results} == {"ok"}
    assert set(best.metrics) == {*CLASSIFICATION_METRICS, "is_best"}
    last = by_epoch[3]
    chance = 0.1 if "mnist" in name else 0.25
    assert last.metrics["test_accuracy"] > max(floor, chance + 0.1)
    assert last.metrics["train_loss"] < math.log(1 / chance)
    # emitted last, flagged best, under its real epoch: same weights and metrics as that epoch's row
    assert best.best and best.metrics["is_best"] is True and not any(r.best or r.metrics["is_best"] for r in regular)
    assert 1 <= best.epoch <= 3
    assert best.metrics["val_accuracy"] == max(r.metrics["val_accuracy"] for r in regular)
    assert all(torch.equal(best.weights[k], by_epoch[best.epoch].weights[k]) for k in best.weights)
    assert best.metrics["test_accuracy"] == by_epoch[best.epoch].metrics["test_accuracy"]


def test_training_is_reproducible_with_dropout_and_crops():
    spec = fixed_spec("transformer-mnist", {**SENSIBLE, "dropout": 0.2, "train_fraction": 0.7}, epochs=1,
                      train_size=300, validation_size=100, test_size=100)
    assert spec.search_space.fixed["crop_padding"] == 2
    first, second = train_one(spec), train_one(spec)
    assert all(torch.equal(first[-1].weights[k], second[-1].weights[k]) for k in first[-1].weights)


def test_a_diverging_run_records_nan_checkpoints_and_keeps_its_best():
    # no warm-up; epoch 2 runs at (lr + final) / 2 ~ 5e8: SGD diverges
    hparams = {**SENSIBLE, "optimizer": "sgd", "warmup_epochs": 0, "final_learning_rate": 1e9}
    spec = fixed_spec("transformer-agnews", hparams, epochs=2, train_size=300, validation_size=100, test_size=100)
    *regular, best = train_one(spec)
    by_epoch = {r.epoch: r for r in regular}
    assert by_epoch[1].status == "ok" and by_epoch[2].status == "diverged"
    assert all(math.isnan(by_epoch[2].metrics[m]) for m in CLASSIFICATION_METRICS)
    assert best.best and best.status == "ok" and best.metrics["is_best"] and best.epoch in (0, 1)
    assert all(math.isfinite(best.metrics[m]) for m in CLASSIFICATION_METRICS)


# --- the pipeline -----------------------------------------------------------------------------

def test_tiny_agnews_zoo_stages_packs_verifies_and_loads(tmp_path, read_with_datasets):
    spec = load_spec("transformer-agnews", "tiny")
    save_spec(spec, tmp_path)
    runs = plan_runs(spec)
    finished = []
    written = train_runs(spec, runs, Staging(tmp_path / STAGING_FOLDER),
                         on_run_done=lambda run, n: finished.append((run.run_id, n)))
    assert written == 12  # 4 runs x (1, 2, best)
    assert finished == [(run.run_id, 3) for run in runs]  # once per run, after its best checkpoint
    entry = pack(tmp_path)["configs"][spec.name]
    assert entry["complete"] and entry["packed_checkpoints"] == 12
    (architecture,) = entry["architectures"].values()
    assert architecture["num_params"] == 17764
    assert architecture["architecture"]["reduced_embeddings_sha256"].startswith("67900bda")
    seen = read_with_datasets(tmp_path, spec.name)  # plain `datasets`, no zoo
    assert seen["imported_zoo"] is False
    split, got = next(iter(seen["splits"].items()))
    assert got["features"]["is_best"] == "Value('bool')" and "best_epoch" not in got["features"]
    assert got["features"]["learning_rate"] == "Value('float64')" and got["features"]["init_std"] == "Value('float64')"
    assert sorted(got["first_row"]) == sorted(create_family("transformer").weight_space(spec.architecture).names)
    loaded = load_split(tmp_path, spec.name, split)
    assert len(loaded) == got["rows"] and loaded.weights.space.num_params == 17764
    rows = loaded.metadata
    best_ids = {r.checkpoints[-1].model_id for r in runs}
    assert (rows["is_best"] == rows["model_id"].isin(best_ids)).all() and rows["is_best"].any()
    assert rows[rows["is_best"]]["epoch"].between(0, 2).all()  # the real epoch of the best weights
    # packed in plan order: each run's regular epochs ascending, then its best
    assert list(rows["model_id"]) == [m for r in runs for m in r.model_ids if m in set(rows["model_id"])]
    report = verify(tmp_path, recompute=3)  # the stored val/test metrics are recomputed from the weights
    assert report.ok, report.problems
    assert len(report.recomputed) == 3 and all(m["match"] for r in report.recomputed for m in r["metrics"].values())


def test_drop_last_trains_full_batches_only_as_the_reference():
    """training.drop_last (the reference's DataLoader(drop_last=True)): only full batches; a pool
    smaller than one batch is refused; specs without it keep their hashes and run ids."""
    from zoo.planning.plan import run_definition
    from zoo.planning.spec import TrainingSpec
    from zoo.training.train import batch_starts

    dropping = TrainingSpec(epochs=1, batch_size=32, checkpoint_epochs=(1,), drop_last=True)
    keeping = TrainingSpec(epochs=1, batch_size=32, checkpoint_epochs=(1,))
    assert list(batch_starts(100, dropping)) == [0, 32, 64] and list(batch_starts(100, keeping)) == [0, 32, 64, 96]
    with pytest.raises(ValueError, match="training examples are fewer than one batch of 32"):
        batch_starts(31, dropping)
    spec = load_spec("transformer-mnist")
    assert spec.training.drop_last and run_definition(spec)["training"]["drop_last"] is True
    assert "drop_last" not in run_definition(load_spec("cnn-mnist"))["training"]
    cnn = load_spec("cnn-mnist")
    data = cnn.to_data()
    assert data["training"].pop("drop_last") is False and data["training"].pop("keep_best") is False
    assert data["training"].pop("rng") == "torch-generator"
    assert data["training"].pop("reproducibility") == "native"
    del data["search_space"]["grids"]
    assert cnn.hash() == content_hash(data)  # the hash of a spec written before the option existed
