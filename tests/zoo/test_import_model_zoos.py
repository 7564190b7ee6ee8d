"""`nfnzoo import model-zoos` and the `pooled_cnn` family: a hand-made Ray Tune experiment folder
in the layout the Model Zoos' reference loader reads (model_zoos_fixture)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from torch import nn

from model_zoos_fixture import (EXPERIMENT, KINDS, MEAN, STD, ReferenceShapedCNN, make_experiment, mnist_test,
                                reference_cut)
from zoo.families import create_family
from zoo.imports import get_importer, list_importers
from zoo.loader import load_split
from zoo.split_set_loader import load_split_set
from zoo.symmetry.flatten import FlattenedFeedforwardSymmetry
from zoo.validation.inputs import InputError
from zoo.weightspace import WeightBatch

import_zoo = get_importer("model-zoos")
CONFIG = "model-zoos-mnist-hyperparameter-10-fixed-seeds"
SPLITS = ("train", "validation", "test")
OURS = ("conv1", "conv2", "conv3", "dense1", "dense2")


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """10 trials, checkpoints at epochs 0, 1 and 5 (made-up metrics); imported once."""
    parent = tmp_path_factory.mktemp("model-zoos")
    root = make_experiment(parent / "src")
    import_zoo(root, parent / "out")
    return root, parent / "out"


def _rows(out):
    for split in SPLITS:
        loaded = load_split(out, CONFIG, split)
        for i, row in loaded.metadata.iterrows():
            yield split, row, loaded.weights.state_dict(i)


def test_trials_imported_with_weights_hyperparameters_metrics_and_epochs(experiment):
    root, out = experiment
    assert "model-zoos" in list_importers()
    seen = 0
    for _, row, weights in _rows(out):
        config = json.loads((root / row["trial"] / "params.json").read_text())
        state = torch.load(root / row["trial"] / f"checkpoint_{row['epoch']:06d}" / "checkpoints", weights_only=True)
        theirs = [k for k in state]  # the reference's module_list order: conv1..3, linear 1..2
        assert [k for k in weights] == [f"{layer}.{role}" for layer in OURS for role in ("weight", "bias")]
        assert all(torch.equal(weights[ours], state[key]) for ours, key in zip(weights, theirs))
        assert row["activation"] == config["model::nlin"] and row["dropout"] == config["model::dropout"]
        assert row["init"] == config["model::init_type"] and row["optimizer"] == config["optim::optimizer"]
        assert row["learning_rate"] == config["optim::lr"] and row["weight_decay"] == config["optim::wd"]
        assert row["momentum"] == config.get("optim::momentum", 0.0) and row["batch_size"] == 10
        assert row["seed"] == config["seed"] and row["status"] == "ok"
        line = [json.loads(s) for s in (root / row["trial"] / "result.json").read_text().splitlines()][row["epoch"]]
        assert line["training_iteration"] == row["epoch"] and row["trial_id"] == line["trial_id"]
        assert (row["test_accuracy"], row["test_loss"]) == (line["test_acc"], line["test_loss"])
        assert (row["train_accuracy"], row["train_loss"]) == (line["train_acc"], line["train_loss"])
        assert row["val_loss"] != row["val_loss"]  # NaN: the trials record no validation metrics
        seen += 1
    assert seen == 30


def test_the_family_computes_the_reference_module(experiment):
    """Our member on the imported weights equals the reference-shaped module on the trial's own state dict."""
    root, out = experiment
    family = create_family("pooled_cnn")
    architecture = json.loads((out / "manifest.json").read_text())["configs"][CONFIG]["spec"]["architecture"]
    assert family.weight_space(architecture).num_params == 2464
    x, _ = mnist_test(256)
    pixels = x * STD + MEAN  # back to [0, 1]: our member normalizes itself
    checked = set()
    for _, row, weights in _rows(out):
        if row["epoch"] != 5:
            continue
        reference = ReferenceShapedCNN(1, row["activation"], row["dropout"]).eval()
        path = root / row["trial"] / f"checkpoint_{row['epoch']:06d}" / "checkpoints"
        reference.load_state_dict(torch.load(path, weights_only=True))  # strict: the reference's keys exactly
        ours = family.build(architecture, {"activation": row["activation"]}).eval()
        ours.load_state_dict(weights)
        with torch.no_grad():
            assert torch.allclose(ours(pixels), reference(x), atol=1e-5, rtol=1e-5)
        checked.add(row["activation"])
    assert checked == {kind[0] for kind in KINDS}


def test_model_zoos_split_set_equals_the_reference_rule(experiment):
    """An independent re-implementation: list the folders, seed the global random as the reference,
    shuffle, cut 70/15/15 by int(); every checkpoint of a trial follows it in epoch order."""
    root, out = experiment
    expected = reference_cut(root)
    got = load_split_set(out, CONFIG, "model-zoos")
    for split in SPLITS:
        trials = [f.name for f in expected[split] for _ in (0, 1, 5)]
        assert list(got[split].metadata["trial"]) == trials
        assert list(got[split].metadata["epoch"]) == [0, 1, 5] * len(expected[split])
        assert set(load_split(out, CONFIG, split).metadata["trial"]) == {f.name for f in expected[split]}
    assert [len(expected[s]) for s in SPLITS] == [7, 1, 2]


def test_reference_module_indices_are_the_loaders_layer_lists():
    from zoo.imports.model_zoos import module_indices

    assert module_indices("CNN", 0.0) == [0, 3, 6, 9, 11]  # load_dataset.ipynb, small zoos
    assert module_indices("CNN3", 0.0) == [0, 4, 8, 13, 16]  # ... large zoos (dropout modules always)
    reference = ReferenceShapedCNN(1, "relu", 0.5)
    assert [int(k.split(".")[1]) for k in reference.state_dict()][::2] == module_indices("CNN", 0.5)


def test_cli_import_then_verify_and_recompute(experiment, tmp_path, capsys):
    from zoo.cli import main
    from zoo.dataset.verify import verify

    root, _ = experiment
    out = tmp_path / "out"
    assert main(["import", "model-zoos", str(root), "--out", str(out)]) == 0
    assert "split sets: model-zoos (train 21, validation 3, test 6)" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0
    assert "Model Zoos (Schürholt et al. 2022)" in (out / "README.md").read_text()
    pytest.importorskip("zoo.dataset.evaluation")  # re-scoring an imported config needs its recorded evaluation
    # one trial scored on the whole MNIST test set, as the reference's test epoch, re-scored by our member
    scored = make_experiment(tmp_path / "scored", trials=1, epochs=(1,), scored=True)
    import_zoo(scored, tmp_path / "scored-out")
    report = verify(tmp_path / "scored-out", recompute=1, seed=1)
    assert report.ok, report.problems
    assert [set(r["metrics"]) for r in report.recomputed] == [{"test_loss", "test_accuracy"}]


def test_bad_inputs_are_one_line_name_the_file_and_leave_the_output_unchanged(experiment, tmp_path):
    root, previous = experiment
    out = tmp_path / "out"
    shutil.copytree(previous, out)
    def contents() -> dict:  # the lock file stays and names its last holder (zoo.storage.lock): not content
        return {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".nfnzoo.lock"}

    before = contents()
    source = tmp_path / "src" / EXPERIMENT
    shutil.copytree(root, source)
    trial = sorted(p for p in source.iterdir() if p.is_dir())[3]

    def rejected(pattern: str, culprit) -> None:
        with pytest.raises(InputError, match=pattern) as error:
            import_zoo(source, out, config=CONFIG)
        assert str(culprit) in str(error.value) and "\n" not in str(error.value)
        assert contents() == before

    victim = trial / "checkpoint_000005" / "checkpoints"
    state = torch.load(victim, weights_only=True)
    key = list(state)[5]  # the third convolution's bias: module_list.6 or .8, by the trial's dropout
    del state[key]
    torch.save(state, victim)
    rejected(rf"missing \['{key}'\]", victim)
    shutil.copy(root / trial.name / "checkpoint_000005" / "checkpoints", victim)

    results = trial / "result.json"
    lines = results.read_text().splitlines()
    results.write_text("\n".join(lines[:2] + ['{"training_iteration": 2, "test_acc": 0.'] + lines[3:]) + "\n")
    rejected(r"result.json: line 3: not JSON", results)
    shutil.copy(root / trial.name / "result.json", results)

    odd = trial / "checkpoint_tmp8f3a"
    odd.mkdir()
    rejected(r"not a checkpoint_<epoch> folder", odd)
    odd.rmdir()

    params = trial / "params.json"
    params.write_text(params.read_text().replace('"model::nlin": "', '"model::nlin": "swish'))
    rejected(r"params.json: model::nlin is 'swish", params)


@pytest.mark.parametrize("activation, wrong", [("relu", "sign"), ("tanh", "sign"), ("gelu", "scale")])
def test_random_group_elements_preserve_the_function(experiment, activation, wrong):
    """Channel permutations through the flatten (and positive scales for ReLU) keep the outputs; sign
    flips through a max pool, scales through GELU, or a conv permutation the dense layer misses do not."""
    _, out = experiment
    family = create_family("pooled_cnn")
    architecture = json.loads((out / "manifest.json").read_text())["configs"][CONFIG]["spec"]["architecture"]
    hparams = {"activation": activation}
    symmetry = family.symmetry(architecture, hparams)
    assert symmetry.mode == {"relu": "scale"}.get(activation, "permutation")
    weights = load_split(out, CONFIG, "train").weights[:4]
    pixels = mnist_test(64)[0] * STD + MEAN

    def outputs(batch: WeightBatch) -> torch.Tensor:
        results = []
        for i in range(len(batch)):
            model = family.build(architecture, hparams).eval()
            model.load_state_dict(batch.state_dict(i))
            with torch.no_grad():
                results.append(model(pixels))
        return torch.stack(results)

    reference = outputs(weights)
    element = symmetry.sample(torch.Generator().manual_seed(2), len(weights))
    moved = symmetry.act(element, weights)
    assert not torch.equal(moved.tensors[6], weights.tensors[6])  # dense1's inputs moved in blocks
    assert (outputs(moved) - reference).abs().max() < 1e-4
    back = symmetry.act(symmetry.inverse(element), moved)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(back.tensors, weights.tensors))

    broken = FlattenedFeedforwardSymmetry(symmetry.space, wrong)
    changed = broken.act(broken.sample(torch.Generator().manual_seed(3), len(weights)), weights)
    assert (outputs(changed) - reference).abs().max() > 1e-2
    # the conv channels permuted, the dense layer's input blocks left as they were
    half = WeightBatch(weights.space, tuple(m if spec.layer <= 2 else w for spec, m, w in
                                            zip(weights.space.tensors, moved.tensors, weights.tensors)))
    assert (outputs(half) - reference).abs().max() > 1e-2


def test_generate_refuses_the_import_only_family(tmp_path, capsys):
    from zoo.cli import main

    assert main(["generate", "model-zoos-mnist", "--dry-run"]) == 0  # the recipe plans: 2,560 runs
    assert "2,560 runs" in capsys.readouterr().out
    assert main(["generate", "model-zoos-mnist", "--out", str(tmp_path / "zoo")]) != 0
    assert "import-only" in capsys.readouterr().err and not (tmp_path / "zoo").exists()
    with pytest.raises(NotImplementedError, match="import-only"):
        create_family("pooled_cnn").train_population(None, [], None, None)


def test_a_cnn_l_trial_imports_into_the_same_function(tmp_path):
    """CNN-l (`CNN3`, 32x32, three pooled convs, dropout modules always present): keys 0, 4, 8, 13, 16."""
    torch.manual_seed(7)
    act = nn.GELU
    layers = [nn.Conv2d(3, 16, 3), nn.MaxPool2d(2, 2), act(), nn.Dropout(0.0),
              nn.Conv2d(16, 32, 3), nn.MaxPool2d(2, 2), act(), nn.Dropout(0.0),
              nn.Conv2d(32, 15, 3), nn.MaxPool2d(2, 2), act(), nn.Dropout(0.0),
              nn.Flatten(), nn.Linear(60, 20), act(), nn.Dropout(0.0), nn.Linear(20, 10)]
    reference = nn.Sequential(*layers).eval()  # indexed as the reference's module_list
    config = {"model::type": "CNN3", "model::channels_in": 3, "model::nlin": "gelu", "model::dropout": 0,
              "model::init_type": "kaiming_uniform", "optim::optimizer": "adam", "optim::lr": 1e-4, "optim::wd": 1e-2,
              "seed": 3, "training::batchsize": 10}
    trial = tmp_path / "tune_zoo_cifar10_uniform_large" / "NN_tune_trainable_aa000_00000_0_seed=3"
    (trial / "checkpoint_000002").mkdir(parents=True)
    (trial / "params.json").write_text(json.dumps(config))
    (trial / "result.json").write_text(json.dumps({"training_iteration": 2, "train_loss": 2.0, "train_acc": 0.3,
                                                   "test_loss": 2.1, "test_acc": 0.25}) + "\n")
    state = {f"module_list.{k}": v for k, v in reference.state_dict().items()}
    assert [k for k in state][::2] == [f"module_list.{i}.weight" for i in (0, 4, 8, 13, 16)]
    torch.save(state, trial / "checkpoint_000002" / "checkpoints")
    manifest = import_zoo(trial.parent, tmp_path / "out")
    (config_name,) = manifest["configs"]
    architecture = manifest["configs"][config_name]["spec"]["architecture"]
    loaded = load_split(tmp_path / "out", config_name, "test")  # one trial: int(0.7) = int(0.15) = 0
    model = create_family("pooled_cnn").build(architecture, {"activation": "gelu"}).eval()
    model.load_state_dict(loaded.weights.state_dict(0))
    pixels = torch.rand(8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(model(pixels), reference((pixels - 0.5) / 0.5), atol=1e-5)
    assert loaded.weights.space.num_params == 10853 and "evaluation" not in manifest["configs"][config_name]["imported"]
