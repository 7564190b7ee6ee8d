"""The Model Zoos (Schürholt et al. 2022) in our format: their CNN zoos, into our `pooled_cnn` family.

The paper "Model Zoos: A Dataset of Diverse Populations of Neural Network Models" (Schürholt, Taskiran,
Knyazev, Giró-i-Nieto, Borth; NeurIPS 2022 Datasets and Benchmarks; arXiv 2209.14764; licence CC-BY 4.0)
publishes its raw zoos on Zenodo. Each zoo is a Ray Tune experiment folder (`tune_zoo_<data
set>_<kind>`, e.g. tune_zoo_mnist_uniform). The facts below are from the reference code
(ModelZoos/ModelZooDataset), read for facts only. The files are written by
`model_definitions/def_NN_experiment.py` (`step` and `save_checkpoint`).

`<experiment>/<trial>/params.json` is the trial's config: `model::type`, `model::channels_in`,
`model::nlin`, `model::init_type`, `model::dropout`, `optim::optimizer`, `optim::lr`, `optim::wd`,
`optim::momentum` (SGD zoos), `training::batchsize`, `seed`.

`<experiment>/<trial>/result.json` holds one JSON object a line, one per epoch. Its keys are
`training_iteration`, `train_loss`, `train_acc`, `test_loss` and `test_acc`. `val_loss` and `val_acc`
appear where a validation set was passed. Iteration 0 is the initialization, scored before training.

`<experiment>/<trial>/checkpoint_<e>/checkpoints` is `torch.save(model.state_dict())` after epoch e. The
number e is plain or zero-padded to 6 digits, by Ray version.

The state dict's keys are `module_list.<i>.{weight,bias}` of the reference `nn.ModuleList`
(`def_net.py`). Its indices shift with the modules between the parameterized ones. CNN-s (`model::type`
CNN) holds pool and dropout modules after its first two convolutions only. It holds dropout only when
`model::dropout` > 0. Its keys are 0, 3, 6, 9, 11 without dropout and 0, 4, 8, 11, 14 with it. CNN-l
(`CNN3`) always holds them (0, 4, 8, 13, 16). These are the index lists `dataset_base.py` and
`load_dataset.ipynb` read. Ours are `conv1..3`, `dense1..2` (`zoo.families.pooled_cnn`). ResNet-18 zoos
are not imported.

Split set "model-zoos" follows `ModelDatasetBase` (`checkpoints_to_datasets/dataset_base.py`). It lists
every folder of the experiment and calls `random.seed(42); random.shuffle(...)`. With `ds_split` [0.7,
0.15, 0.15] (load_dataset.ipynb) it keeps [:int(0.7 n)] for train. The next int(0.15 n) go to validation
and the rest to test.

It lists the folders in `Path.iterdir` order, which the file system decides. We shuffle them in sorted
name order. So the set is the reference's wherever that listing was sorted, as the docs say.

Each trial's checkpoints follow it in epoch order. The reference loader then keeps its `epoch_lst`
epochs. It drops checkpoints with a NaN or a weight above `weight_threshold` (5 in the notebook) in the
layers of its layer list. For a small-model trial with dropout, that list finds only conv1 and dense1.
The tested recipe that reproduces its samples is in docs/zoos/model-zoos.md. We import every checkpoint
with all five layers. The shards' splits are the same assignment.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from zoo.imports import register_importer
from zoo.imports.checkpoints import load_state_dict
from zoo.imports.reading import as_float, as_int64, listing, reading, within
from zoo.imports.writer import BySplit, ImportedConfig, SplitSet, renamed_tensors, write_import
from zoo.planning.plan import checkpoint_id
from zoo.planning.spec import content_hash
from zoo.validation.bounds import MAX_PARAMS_JSON_BYTES as MAX_JSON_BYTES
from zoo.validation.bounds import MAX_RESULT_JSON_BYTES as MAX_RESULT_BYTES
from zoo.validation.bounds import MAX_STATE_DICT_BYTES, check_member
from zoo.validation.inputs import InputError, load_json_bytes, read_capped

FORMAT = "model-zoos"
URL = "https://github.com/ModelZoos/ModelZooDataset"
LICENSE, LICENSE_LINK = "cc-by-4.0", "https://creativecommons.org/licenses/by/4.0/"
SPLIT_SEED, SPLIT_FRACTIONS = 42, (0.7, 0.15)  # dataset_base.py's random.seed; load_dataset.ipynb's ds_split
# model::type -> our architecture's layer fields, and after which convolutions the reference puts dropout
MODEL_TYPES: dict[str, dict[str, Any]] = {
    "CNN": {"image_size": 28, "channels": [8, 6, 4], "kernel_sizes": [5, 5, 2], "pooled": [True, True, False],
            "hidden": 20, "dropout_after": (True, True, False), "dropout_always": False},
    "CNN3": {"image_size": 32, "channels": [16, 32, 15], "kernel_sizes": [3, 3, 3], "pooled": [True, True, True],
             "hidden": 20, "dropout_after": (True, True, True), "dropout_always": True},
}
# the experiment name's data set -> (our name, torchvision Normalize mean and std, crop, our loader scores it
# exactly as the reference did: ToTensor + Normalize on the original test images), from the zoo generators
DATASETS: dict[str, tuple[str, float, float, str, bool]] = {
    "mnist": ("mnist", 0.1307, 0.3081, "none", True),
    "f_mnist": ("fashion_mnist", 0.5, 0.5, "none", True),
    "svhn": ("svhn", 0.5, 0.5, "center", False),  # Grayscale, CenterCrop(28) (the uniform zoo's script)
    "usps": ("usps", 0.1307, 0.3081, "none", False),  # Resize(28): not reproduced by our loaders
    "cifar10": ("cifar10", 0.5, 0.5, "none", False),  # Resize(28) for CNN-s
    "stl": ("stl10", 0.5, 0.5, "none", False),  # Resize(32) (CNN-l; CNN-s as CIFAR-10)
}
EXPERIMENT = re.compile(r"tune_zoo_(f_mnist|mnist|svhn|usps|cifar10|stl)[_-]")
CHECKPOINT = re.compile(r"checkpoint_(\d{1,9})")
METRICS = {"train_loss": "train_loss", "train_accuracy": "train_acc", "test_loss": "test_loss",
           "test_accuracy": "test_acc", "val_loss": "val_loss", "val_accuracy": "val_acc"}  # ours <- theirs
REQUIRED_METRICS = ("train_loss", "train_acc", "test_loss", "test_acc")  # what every reference step records
HPARAM_KEYS = {"activation": "model::nlin", "init": "model::init_type", "dropout": "model::dropout",
               "optimizer": "optim::optimizer", "learning_rate": "optim::lr", "weight_decay": "optim::wd",
               "momentum": "optim::momentum", "batch_size": "training::batchsize"}  # ours <- theirs
CHUNK_TRIALS = 64
CONFIG_KEYS = ("model::type", "model::channels_in", "seed", *HPARAM_KEYS.values())  # what params.json gives a row
RECORD_KEYS = ("training_iteration", "trial_id", *METRICS.values())  # what a result.json line gives a row


def module_indices(model_type: str, dropout: float) -> list[int]:
    """The `module_list` indices of the five parameterized layers (module docstring).

    The modules run: each conv, its pool, its activation and its dropout; a flatten; the hidden layer,
    its activation and dropout; the output.
    """
    kind = MODEL_TYPES[model_type]
    with_dropout = kind["dropout_always"] or dropout > 0
    index, indices = 0, []
    for pooled, dropout_after in zip(kind["pooled"], kind["dropout_after"]):
        indices.append(index)
        index += 1 + int(pooled) + 1 + int(dropout_after and with_dropout)
    index += 1  # the flatten
    indices.append(index)
    indices.append(index + 2 + int(with_dropout))
    return indices


def reference_order(root: Path) -> list[str]:
    """Every folder of the experiment, shuffled as `ModelDatasetBase` does (module docstring)."""
    names = [p.name for p in listing(root, root) if p.is_dir()]  # sorted; a link among them is refused
    random.Random(SPLIT_SEED).shuffle(names)  # random.seed(42); random.shuffle(path_list)
    return names


def reference_splits(names: list[str]) -> dict[str, list[str]]:
    """The shuffled folders cut at int(0.7 n) and int(0.7 n) + int(0.15 n)."""
    first = int(SPLIT_FRACTIONS[0] * len(names))
    second = first + int(SPLIT_FRACTIONS[1] * len(names))
    return {"train": names[:first], "validation": names[first:second], "test": names[second:]}


def _config(path: Path) -> dict:
    config = load_json_bytes(read_capped(path, MAX_JSON_BYTES, "params.json", follow=False), str(path))
    if not isinstance(config, dict):
        raise InputError(f"{path}: holds a {type(config).__name__}, not a config object")
    # only the keys read, and each a number or a short text: a trial's config is held until its rows are written
    kept = {key: config[key] for key in CONFIG_KEYS if key in config}
    for key, value in kept.items():
        if not (value is None or isinstance(value, (int, float)) or (isinstance(value, str) and len(value) <= 256)):
            raise InputError(f"{path}: {key} is a {type(value).__name__}; expected a number or a short text")
    return kept


def _hparams(config: dict, path: Path) -> tuple[dict, int]:
    import typing

    from zoo.families.pooled_cnn import PooledCNNHParams

    hints = typing.get_type_hints(PooledCNNHParams)
    hparams = {}
    for ours, theirs in HPARAM_KEYS.items():
        if theirs not in config:
            if ours == "momentum":
                hparams[ours] = 0.0  # Adam zoos set none; SGD ones do
                continue
            raise InputError(f"{path}: no {theirs!r}; a Model Zoos trial config has it")
        value, kind = config[theirs], hints[ours]
        if typing.get_origin(kind) is typing.Literal:
            allowed = typing.get_args(kind)
            if value not in allowed:
                raise InputError(f"{path}: {theirs} is {value!r}; expected one of {list(allowed)}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InputError(f"{path}: {theirs} is {value!r}; expected a non-negative number")
        where = f"{path}: {theirs}"
        hparams[ours] = value if isinstance(value, str) else (as_int64(value, where) if ours == "batch_size"
                                                              else as_float(value, where))
    seed = config.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"{path}: seed is {ascii(seed)[:40]}; expected an integer")
    return hparams, as_int64(seed, f"{path}: seed")


def _results(path: Path) -> dict[int, dict]:
    """training_iteration -> its result line; a malformed line is an InputError naming its number."""
    text = read_capped(path, MAX_RESULT_BYTES, "result.json", follow=False)
    lines = {}
    for number, line in enumerate(text.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        with reading(path, f"line {number}", "JSON"):
            record = json.loads(line)
        iteration = record.get("training_iteration") if isinstance(record, dict) else None
        if isinstance(iteration, bool) or not isinstance(iteration, int):
            raise InputError(f"{path}: line {number}: no integer training_iteration")
        missing = [k for k in REQUIRED_METRICS if not isinstance(record.get(k), (int, float))]
        if missing:
            raise InputError(f"{path}: line {number}: no {missing[0]} (a number every epoch records)")
        lines[iteration] = {key: record[key] for key in RECORD_KEYS if key in record}  # what a row reads
    return lines


def _checkpoints(root: Path, trial: Path) -> dict[int, Path]:
    epochs: dict[int, Path] = {}
    for folder in (p for p in listing(root, trial) if p.name.startswith("checkpoint")):
        match = CHECKPOINT.fullmatch(folder.name)
        if match is None or not folder.is_dir():
            raise InputError(f"{folder}: not a checkpoint_<epoch> folder of this trial")
        epoch = int(match.group(1))
        if epoch in epochs:
            raise InputError(f"{folder}: epoch {epoch} also in {epochs[epoch].name}")
        epochs[epoch] = folder
    return epochs


def read_state_dict(path: Path, model_type: str, dropout: float, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    """Our tensor name -> float32 array, from the reference's `module_list.<i>` keys."""
    state = load_state_dict(path, MAX_STATE_DICT_BYTES)
    indices = module_indices(model_type, dropout)
    ours = list(dict.fromkeys(name.rpartition(".")[0] for name in shapes))
    mapping = {f"module_list.{i}.{role}": f"{layer}.{role}" for i, layer in zip(indices, ours)
               for role in ("weight", "bias")}
    return renamed_tensors(path, state, mapping, shapes, f"a {model_type} with dropout {dropout:g} has {list(mapping)}")


def _trial_rows(root: Path, trial: Path, run_id: str, hparams: dict, seed: int, model_type: str, shapes
                ) -> Iterator[tuple[dict, dict[str, np.ndarray]]]:
    results = _results(within(root, trial / "result.json"))
    for epoch, folder in sorted(_checkpoints(root, trial).items()):
        record = results.get(epoch)
        if record is None:
            raise InputError(f"{folder}: result.json has no line with training_iteration {epoch}")
        path = within(root, folder / "checkpoints")
        tensors = read_state_dict(path, model_type, hparams["dropout"], shapes)
        metrics = {ours: as_float(record[theirs], f"{trial / 'result.json'}: training_iteration {epoch}: {theirs}")
                   if isinstance(record.get(theirs), (int, float)) else math.nan for ours, theirs in METRICS.items()}
        finite = all(np.isfinite(t).all() for t in tensors.values()) and all(
            math.isfinite(metrics[m]) for m in ("train_loss", "test_loss", "test_accuracy"))
        row = {"model_id": checkpoint_id(run_id, epoch), "run_id": run_id, "epoch": epoch, "seed": seed,
               **hparams, **metrics, "trial": trial.name, "trial_id": str(record.get("trial_id", "")),
               "status": "ok" if finite else "diverged"}
        yield row, tensors


def _chunks(root: Path, trials: list[tuple[str, dict]], run_ids, split_of, model_type, shapes
            ) -> Iterator[tuple[str, list[dict], dict[str, np.ndarray]]]:
    for start in range(0, len(trials), CHUNK_TRIALS):
        by_split = BySplit(shapes)
        for name, config in trials[start:start + CHUNK_TRIALS]:
            hparams, seed = _hparams(config, root / name / "params.json")
            for row, tensors in _trial_rows(root, root / name, run_ids[name], hparams, seed, model_type, shapes):
                by_split.add(split_of[name], row, tensors)
        yield from by_split.stacked()


def _dataset_key(root: Path, dataset: str | None) -> str:
    if dataset is not None:
        known = {ours: key for key, (ours, *_rest) in DATASETS.items()}
        if dataset not in known:
            raise InputError(f"--dataset {dataset!r}: expected one of {sorted(known)}")
        return known[dataset]
    match = EXPERIMENT.match(root.resolve().name + "_")
    if match is None:
        raise InputError(f"{root}: not named tune_zoo_<data set>_...; name the data set with --dataset "
                         f"(one of {sorted(d[0] for d in DATASETS.values())})")
    return match.group(1)


def _architecture(trials: list[tuple[str, dict]], root: Path, key: str) -> tuple[str, dict]:
    kinds = sorted({(str(c.get("model::type")), repr(c.get("model::channels_in"))) for _, c in trials})
    if len(kinds) != 1:
        raise InputError(f"{root}: trials of {kinds[:4]} (model::type, model::channels_in); one architecture per zoo")
    model_type, channels_in = trials[0][1].get("model::type"), trials[0][1].get("model::channels_in")
    if model_type not in MODEL_TYPES:
        raise InputError(f"{root / trials[0][0] / 'params.json'}: model::type {model_type!r}; the importer takes "
                         f"{sorted(MODEL_TYPES)} (the CNN zoos; ResNet-18 zoos are not imported)")
    if isinstance(channels_in, bool) or not isinstance(channels_in, int) or channels_in < 1:
        raise InputError(f"{root / trials[0][0] / 'params.json'}: model::channels_in {channels_in!r}; expected a "
                         "positive integer")
    _, mean, std, crop, _ = DATASETS[key]
    kind = MODEL_TYPES[model_type]
    check_member(f"{root / trials[0][0] / 'params.json'}: the {model_type} it declares",
                 pooled_cnn_parameters(channels_in, kind), {"model::channels_in": channels_in})
    return model_type, {"in_channels": channels_in, "image_size": kind["image_size"], "channels": kind["channels"],
                        "kernel_sizes": kind["kernel_sizes"], "pooled": kind["pooled"], "hidden": kind["hidden"],
                        "num_classes": 10, "input_mean": mean, "input_std": std, "input_crop": crop}


def pooled_cnn_parameters(in_channels: int, kind: dict[str, Any], num_classes: int = 10) -> int:
    """The parameter count of a `MODEL_TYPES` CNN on `in_channels` input channels, computed from the sizes.

    Nothing is built. The CNN is valid convolutions, each optionally followed by a 2x2 max pool, then
    two linear layers.
    """
    side, channels, total = kind["image_size"], in_channels, 0
    for out, size, pooled in zip(kind["channels"], kind["kernel_sizes"], kind["pooled"]):
        total += (channels * size * size + 1) * out
        side, channels = (side - size + 1) // (2 if pooled else 1), out
    return total + (channels * side * side + 1) * kind["hidden"] + (kind["hidden"] + 1) * num_classes


@register_importer(FORMAT)
def import_zoo(source: str | Path, out: str | Path, *, config: str | None = None, dataset: str | None = None,
               max_shard_bytes: int = 64 * 2**20) -> dict:
    """Imports the Ray Tune experiment folder `source` (one Model Zoo, its CNN trials) as config `config` of `out`.

    `config` defaults to model-zoos-<experiment>. Nothing is written unless every trial reads.
    """
    from zoo.dataset.provenance import SCHUERHOLT_BIBTEX
    from zoo.families import create_family

    root = Path(source)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder (a Model Zoos experiment folder, tune_zoo_<data set>_...)")
    key = _dataset_key(root, dataset)
    order = reference_order(root)
    trials = [(name, _config(root / name / "params.json")) for name in sorted(order)
              if within(root, root / name / "params.json").exists()]
    if not trials:
        raise InputError(f"{root}: no trial folder (<trial>/params.json) in it")
    model_type, architecture = _architecture(trials, root, key)
    family = create_family("pooled_cnn")
    shapes = {t.name: tuple(t.shape) for t in family.weight_space(architecture).tensors}
    trial_names = {name for name, _ in trials}
    run_ids = {name: content_hash({"format": FORMAT, "dataset": key, "trial": name}) for name in trial_names}
    cut = reference_splits(order)
    split_of = {name: split for split, names in cut.items() for name in names if name in trial_names}
    epochs = {name: sorted(_checkpoints(root, root / name)) for name in trial_names}
    split_set = SplitSet(
        f"ModelDatasetBase's split (checkpoints_to_datasets/dataset_base.py, ds_split [0.7, 0.15, 0.15] as "
        f"load_dataset.ipynb): the experiment's folders in sorted name order (the reference lists them in "
        f"Path.iterdir order), random.seed({SPLIT_SEED}); random.shuffle, cut at int(0.7 n) (train) and int(0.15 n) "
        "(validation), the rest test; each trial's checkpoints in epoch order",
        {split: [checkpoint_id(run_ids[n], e) for n in names if n in trial_names for e in epochs[n]]
         for split, names in cut.items()})
    ours, *_rest, scored = DATASETS[key]
    name = config or f"{FORMAT}-{root.resolve().name.removeprefix('tune_zoo_').replace('_', '-').lower()}"
    conversions = [
        f"state dict keys module_list.<i>.{{weight,bias}} -> conv1..3, dense1..2 (indices by model::type and "
        f"model::dropout: {model_type} {module_indices(model_type, 0.0)} without dropout, "
        f"{module_indices(model_type, 0.5)} with); shapes checked",
        f"architecture from model::type {model_type} and model::channels_in; input normalization and crop from the "
        f"{key} zoo generators' transforms (mean {architecture['input_mean']}, std {architecture['input_std']}, "
        f"crop {architecture['input_crop']})",
        "hyperparameters from params.json: " + ", ".join(f"{o} <- {t}" for o, t in HPARAM_KEYS.items())
        + " (momentum 0 where absent)",
        "metrics from the result.json line whose training_iteration is the checkpoint's epoch: "
        + ", ".join(f"{o} <- {t}" for o, t in METRICS.items()) + " (NaN where absent)",
        "epoch <- checkpoint_<e> (0: the initialization); trial (folder name) and trial_id kept as extra columns",
        "run_id = hash of (format, data set, trial folder name); model_id = hash of (run_id, epoch); shard splits "
        "= the model-zoos split set's trials",
    ]
    spec = {"name": name, "family": "pooled_cnn", "description": (
        f"The Model Zoos of Schürholt et al. 2022: {root.resolve().name}, {len(trials):,} {model_type} trials."),
        "dataset": {"name": ours}, "architecture": architecture}
    provenance = {"format": FORMAT, "name": "Model Zoos (Schürholt et al. 2022)", "url": URL,
                  "code": URL, "license": LICENSE, "license_link": LICENSE_LINK, "citation": SCHUERHOLT_BIBTEX,
                  "files": ["<trial>/params.json", "<trial>/result.json", "<trial>/checkpoint_<epoch>/checkpoints"],
                  "conversions": conversions,
                  "verified": "the layout, the keys, the shapes and the split rule are checked against the reference "
                              "code and fixture folders, not against the released files (not reachable here)"}
    if scored:  # verify --recompute re-scores on the whole original test set, as the reference did
        provenance["evaluation"] = {"dataset": {"name": ours, "validation_size": 0}, "eval_batch_size": 2000}
    imported = ImportedConfig(name=name, family="pooled_cnn", architecture=architecture, spec=spec, source=provenance,
                              extra_columns={"trial": pa.string(), "trial_id": pa.string()},
                              split_sets={"model-zoos": split_set})
    total = sum(len(e) for e in epochs.values())
    chunks = _chunks(root, trials, run_ids, split_of, model_type, shapes)
    return write_import(out, imported, chunks, total, max_shard_bytes=max_shard_bytes)
