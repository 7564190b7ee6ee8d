"""The Model Zoos page's recipe for the reference loader's filter (docs/zoos/model-zoos.md, the block after
`<!-- model-zoos-reference-filter -->`), run on our import of fixture folders and compared with an independent
re-implementation of `ModelDatasetBase`'s rule (ModelZoos/ModelZooDataset, checkpoints_to_datasets/dataset_base.py
and dataset_auxiliaries.py, the notebook's arguments), written here from its logic on the raw folders:

    folders of the experiment, random.seed(42) + shuffle, cut at int(0.7 n) and int(0.15 n);
    for each folder of the split and each epoch of epoch_lst: load checkpoint_<e> (else checkpoint_<e:06d>),
    skip when neither loads; take `module_list.<i>.weight` / `.bias` for i of the zoo size's layer list
    (a missing key: nothing); drop when one holds a NaN or an |value| > threshold; the sample's vector is
    those tensors in that order.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from model_zoos_fixture import make_experiment, reference_cut
from zoo.imports import get_importer
from zoo.split_set_loader import load_split_set

import_zoo = get_importer("model-zoos")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "zoos" / "model-zoos.md"
SMALL, LARGE = [0, 3, 6, 9, 11], [0, 4, 8, 13, 16]  # load_dataset.ipynb's layer lists (module_list indices)
EPOCHS, THRESHOLD = (1, 5), 5.0  # our epoch_lst (the fixture's checkpoints are 0, 1, 5) and the notebook's threshold
SPLITS = {"train": "train", "val": "validation", "test": "test"}  # the reference's names -> ours


def documented_recipe():
    page = PAGE.read_text(encoding="utf-8")
    code = re.search(r"<!-- model-zoos-reference-filter -->\n```python\n(.*?)```", page, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace["reference_kept"]


def reference_samples(root: Path, layers: list[int], epochs=EPOCHS, threshold=THRESHOLD) -> dict[str, list]:
    """split -> [(trial folder, epoch, vector)] as the reference loader keeps them, in its order."""
    cut = {"val" if name == "validation" else name: folders for name, folders in reference_cut(root).items()}
    samples: dict[str, list] = {}
    for split, paths in cut.items():
        samples[split] = []
        for path in paths:
            for epoch in epochs:
                state_dict = None
                for name in (f"checkpoint_{epoch}", f"checkpoint_{epoch:06d}"):
                    if (path / name / "checkpoints").is_file():
                        state_dict = torch.load(path / name / "checkpoints", weights_only=True)
                        break
                if state_dict is None:
                    continue
                tensors = [state_dict[f"module_list.{i}.{role}"] for i in layers for role in ("weight", "bias")
                           if f"module_list.{i}.{role}" in state_dict]
                if any(bool(torch.isnan(t).any()) for t in tensors):
                    continue
                if threshold != float("inf") and any(bool((t.abs() > threshold).any()) for t in tensors):
                    continue
                vector = torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.empty(0)
                samples[split].append((path.name, epoch, vector))
    return samples


def _ours(out: Path, config: str, rule) -> dict[str, list]:
    """split -> [(trial, epoch)] of our model-zoos split set's rows that `rule(split) -> mask` selects."""
    splits = load_split_set(out, config, "model-zoos")
    chosen = {}
    for theirs, ours in SPLITS.items():
        meta = splits[ours].metadata[rule(splits[ours]).numpy()]
        chosen[theirs] = list(zip(meta["trial"], meta["epoch"].astype(int)))
    return chosen


def _edit(root: Path, trial: str, epoch: int, key: str, index: tuple, value: float) -> None:
    path = root / trial / f"checkpoint_{epoch:06d}" / "checkpoints"
    state = torch.load(path, weights_only=True)
    state[key][index] = value
    torch.save(state, path)


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    """20 CNN-s trials (dropout 0 and 0.5, checkpoints 0, 1, 5) with edited checkpoints, imported once."""
    parent = tmp_path_factory.mktemp("model-zoos-filter")
    root = make_experiment(parent / "src", trials=20)
    names = [p.name for p in sorted(root.iterdir()) if p.is_dir()]
    dropout = {n: json.loads((root / n / "params.json").read_text())["model::dropout"] > 0 for n in names}
    train = [p.name for p in reference_samples_order(root)[:14]]
    with_drop = [n for n in train if dropout[n]]
    without = [n for n in train if not dropout[n]]
    # dropout trials' keys: conv1 0, conv2 4, conv3 8, dense1 11, dense2 14; without dropout 0, 3, 6, 9, 11
    edits = {
        "conv2_out_of_range": (with_drop[0], 5, "module_list.4.weight", (0, 0, 0, 0), 7.0),  # the reference keeps it
        "conv3_nan": (with_drop[1], 1, "module_list.8.bias", (2,), float("nan")),  # kept too
        "dense2_out_of_range": (with_drop[2], 5, "module_list.14.weight", (3, 4), -100.0),  # kept too
        "dense1_out_of_range": (with_drop[0], 1, "module_list.11.weight", (1, 2), -6.0),  # dropped by both
        "conv1_inf": (with_drop[2], 1, "module_list.0.bias", (0,), float("inf")),  # dropped by both
        "no_dropout_conv2": (without[0], 5, "module_list.3.weight", (1, 1, 1, 1), 7.0),  # dropped by both
        "no_dropout_exactly_5": (without[1], 5, "module_list.0.weight", (0, 0, 0, 0), 5.0),  # kept: strict >
    }
    for trial, epoch, key, index, value in edits.values():
        _edit(root, trial, epoch, key, index, value)
    shutil.rmtree(root / without[2] / "checkpoint_000001")  # a missing checkpoint: no sample, no row
    import_zoo(root, parent / "out")
    (config,) = json.loads((parent / "out" / "manifest.json").read_text())["configs"]
    return root, parent / "out", config, edits, dropout


def reference_samples_order(root: Path) -> list[Path]:
    folders = [p for p in sorted(root.iterdir()) if p.is_dir()]
    random.Random(42).shuffle(folders)
    return folders


def test_the_documented_recipe_gives_the_reference_samples_and_the_naive_rules_do_not(edited):
    root, out, config, edits, dropout = edited
    reference = reference_samples(root, SMALL)
    expected = {split: [(trial, epoch) for trial, epoch, _ in samples] for split, samples in reference.items()}
    kept = documented_recipe()
    assert _ours(out, config, lambda part: kept(part, epochs=EPOCHS, threshold=THRESHOLD)) == expected  # in order

    train = set(expected["train"])
    for name in ("conv2_out_of_range", "conv3_nan", "dense2_out_of_range", "no_dropout_exactly_5"):
        assert edits[name][:2] in train, name
    for name in ("dense1_out_of_range", "conv1_inf", "no_dropout_conv2"):
        assert edits[name][:2] not in train, name
    assert len(expected["train"]) == 14 * 2 - 1 - 3  # one missing checkpoint, three dropped by the reference

    # negative controls: all five layers bounded (the page's old advice), or status "ok", keep fewer train samples
    def all_layers(part):
        bounded = torch.stack([(t.abs() <= THRESHOLD).flatten(1).all(1) for t in part.weights.tensors], 1).all(1)
        return bounded & torch.tensor(part.metadata["epoch"].isin(EPOCHS).to_numpy())

    def status_ok(part):
        return torch.tensor((part.metadata["status"].eq("ok") & part.metadata["epoch"].isin(EPOCHS)).to_numpy())

    naive = _ours(out, config, all_layers)
    assert naive != expected
    assert set(expected["train"]) - set(naive["train"]) == {edits[n][:2] for n in
                                                          ("conv2_out_of_range", "conv3_nan", "dense2_out_of_range")}
    assert set(naive["train"]) <= set(expected["train"]) and naive["val"] == expected["val"]
    ok = _ours(out, config, status_ok)
    assert ok != expected and edits["conv3_nan"][:2] not in ok["train"]
    assert edits["conv2_out_of_range"][:2] in ok["train"]  # finite: status cannot see the threshold


def test_the_reference_vectors_are_conv1_and_dense1_for_dropout_members(edited):
    """948 values for a dropout member (conv1 and dense1, weight then bias), 2,464 otherwise; both are our
    row's tensors in that order, as the page says."""
    root, out, config, _, dropout = edited
    reference = reference_samples(root, SMALL)
    splits = load_split_set(out, config, "model-zoos")
    lengths = set()
    for theirs, ours in SPLITS.items():
        part = splits[ours]
        where = {(t, int(e)): i for i, (t, e) in enumerate(zip(part.metadata["trial"], part.metadata["epoch"]))}
        for trial, epoch, vector in reference[theirs]:
            i = where[(trial, epoch)]
            names = ("conv1", "dense1") if dropout[trial] else ("conv1", "conv2", "conv3", "dense1", "dense2")
            ours_vector = torch.cat([t[i].reshape(-1) for n, t in zip(part.weights.space.names, part.weights.tensors)
                                     if n.split(".")[0] in names])
            assert torch.equal(ours_vector, vector), (trial, epoch)
            lengths.add((dropout[trial], vector.numel()))
    assert lengths == {(True, 948), (False, 2464)}


def test_with_an_infinite_threshold_only_nans_count(edited):
    """The class default (weight_threshold=inf) skips the threshold: the recipe with threshold=inf agrees."""
    root, out, config, edits, _ = edited
    reference = reference_samples(root, SMALL, threshold=float("inf"))
    expected = {split: [(trial, epoch) for trial, epoch, _ in samples] for split, samples in reference.items()}
    kept = documented_recipe()
    assert _ours(out, config, lambda part: kept(part, epochs=EPOCHS, threshold=float("inf"))) == expected
    train = set(expected["train"])
    assert edits["conv1_inf"][:2] in train and edits["dense1_out_of_range"][:2] in train


def test_cnn_l_dropout_members_are_checked_on_all_five_layers(tmp_path):
    """The large layer list finds every layer of a CNN-l trial (dropout modules always there): a conv2 value
    out of range drops it, in the reference and in the recipe; the CNN-s dropout rule would keep it."""
    trials = []
    root = tmp_path / "tune_zoo_cifar10_large_hyperparameter_10_fixed_seed"
    for index in range(4):
        torch.manual_seed(index)
        layers = [nn.Conv2d(3, 16, 3), nn.MaxPool2d(2, 2), nn.ReLU(), nn.Dropout(0.5),
                  nn.Conv2d(16, 32, 3), nn.MaxPool2d(2, 2), nn.ReLU(), nn.Dropout(0.5),
                  nn.Conv2d(32, 15, 3), nn.MaxPool2d(2, 2), nn.ReLU(), nn.Dropout(0.5),
                  nn.Flatten(), nn.Linear(60, 20), nn.ReLU(), nn.Dropout(0.5), nn.Linear(20, 10)]
        state = {f"module_list.{k}": v for k, v in nn.Sequential(*layers).state_dict().items()}
        if index < 2:
            state["module_list.4.weight"][0, 0, 0, 0] = 7.0
        trial = root / f"NN_tune_trainable_aa000_{index:05d}_{index}_seed={index}"
        (trial / "checkpoint_000005").mkdir(parents=True)
        torch.save(state, trial / "checkpoint_000005" / "checkpoints")
        config = {"model::type": "CNN3", "model::channels_in": 3, "model::nlin": "relu", "model::dropout": 0.5,
                  "model::init_type": "kaiming_uniform", "optim::optimizer": "adam", "optim::lr": 1e-4,
                  "optim::wd": 1e-2, "seed": index, "training::batchsize": 10}
        (trial / "params.json").write_text(json.dumps(config))
        (trial / "result.json").write_text(json.dumps({"training_iteration": 5, "train_loss": 2.0, "train_acc": 0.3,
                                                       "test_loss": 2.1, "test_acc": 0.25}) + "\n")
        trials.append(trial.name)
    import_zoo(root, tmp_path / "out")
    (config_name,) = json.loads((tmp_path / "out" / "manifest.json").read_text())["configs"]
    reference = reference_samples(root, LARGE, epochs=(5,))
    expected = {split: [(trial, epoch) for trial, epoch, _ in samples] for split, samples in reference.items()}
    assert sorted(t for s in expected.values() for t, _ in s) == trials[2:]
    assert {v.numel() for s in reference.values() for _, _, v in s} == {10853}
    kept = documented_recipe()
    assert _ours(tmp_path / "out", config_name, lambda part: kept(part, epochs=(5,))) == expected

    def as_if_small(part):  # the CNN-s dropout rule (conv1 and dense1 only) on these rows: a negative control
        names = part.weights.space.names
        bounded = torch.stack([(t.abs() <= THRESHOLD).flatten(1).all(1) for n, t in zip(names, part.weights.tensors)
                               if n.split(".")[0] in ("conv1", "dense1")], 1).all(1)
        return bounded

    assert _ours(tmp_path / "out", config_name, as_if_small) != expected
