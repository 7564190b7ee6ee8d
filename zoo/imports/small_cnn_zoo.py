"""The Small CNN Zoo (Unterthiner et al. 2020) in our format, and our CNN zoos in its layout.

The paper "Predicting Neural Network Accuracy from Weights" (Unterthiner, Keysers, Gelly, Bousquet,
Tolstikhin, 2020) released one folder per data set: MNIST, Fashion-MNIST, CIFAR-10-GS, SVHN-GS. Licence:
CC-BY 4.0. The layout below follows the release's README. The per-layer boundaries are those of its
colab, which reads bias (0, 16) then kernel (16, 160) for the first convolution.

`weights.npy` is a (checkpoints, 4970) float32 matrix, one row per checkpoint. Each row holds each
layer's bias, then its kernel. Kernels are in TensorFlow layout: conv HWIO, dense (in, out).

`metrics.csv.gz` has one row per checkpoint, in the same order. Its columns are config.* (the run's
flags), modeldir (the run), step, and train/test accuracy and loss. The step is the epoch: 0, 1, 2, 3,
20, 40, 60, 80, 86.

`layout.csv` says where each variable lies in a row: varname, start_idx, end_idx, shape.

Conversions on import are all recorded in the card. Kernels are transposed into our `cnn` family's
PyTorch layout: HWIO -> OIHW, (in, out) -> (out, in). The flags are mapped to our hyperparameter columns
(`HPARAM_COLUMNS`), values kept verbatim. So `init` holds the source's Keras initializer name.
`config.b_init` and `modeldir` are kept as extra columns. Run ids are hashed from `modeldir`, model ids
from (run, step). A row with a non-finite weight or metric is `diverged`.

Validation metrics are NaN, since the zoo has none. A source with `val_accuracy`/`val_loss` columns
keeps them. Our exporter writes them, so a round trip keeps them.

Split sets: the shards' split is our run-disjoint split, by run with seeded fractions 0.7/0.1/0.2. Given
the NFN split file, the papers' sets are recorded too. That file is
`experiments/predict_gen_data_splits/<data set>_split.csv` of AllanYangZhou/nfn. The sets are "nfn" and,
on the data sets those papers used, ScaleGMN's and Monomial-NFN's activation subsets
(`zoo.imports.small_cnn_zoo_splits.SPLIT_RULES`). The exporter is `zoo.imports.small_cnn_zoo_export`.

`weights.npy` is read a chunk of rows at a time from its data offset. Its header and size are checked
first (`zoo.imports.npy`). So memory stays bounded by the chunk and one shard per split, whatever the
file's size.

Every file must be a regular file (`zoo.validation.inputs.open_regular`). A FIFO named `weights.npy` is
refused, not waited on. `metrics.csv.gz` is decompressed as a counted stream, and its rows are bounded
before a frame is built (`zoo.imports.tables`). Every value becomes a 64-bit integer or a float
(`as_int64`, `as_float`). Anything else is one line naming the file, the row and the column.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from zoo.dataset.evaluation import EVALUATION_SIDECAR, read_evaluation_sidecar
from zoo.imports import register_importer
from zoo.imports.npy import NpyMatrix, open_npy
from zoo.imports.reading import as_float, as_int64, first_repeat, reading, within
from zoo.imports.small_cnn_zoo_splits import NFN_FINAL_STEP, SPLIT_RULES, read_nfn_split_file, split_positions
from zoo.imports.small_cnn_zoo_splits import nfn_split_positions  # noqa: F401  (its old home's name, kept)
from zoo.imports.tables import read_table
from zoo.imports.writer import ImportedConfig, SplitSet, write_import
from zoo.dataset.provenance import UNTERTHINER_BIBTEX
from zoo.planning.plan import assign_splits, checkpoint_id
from zoo.planning.spec import SplitSpec, content_hash
from zoo.validation.bounds import MAX_LAYOUT_BYTES
from zoo.validation.inputs import InputError, read_capped

FORMAT = "small-cnn-zoo"
WEIGHTS, METRICS, LAYOUT, NFN_SPLIT = "weights.npy", "metrics.csv.gz", "layout.csv", "nfn_split.csv"
URL = "https://github.com/google-research/google-research/tree/master/dnn_predict_accuracy"
LICENSE, LICENSE_LINK = "cc-by-4.0", "https://creativecommons.org/licenses/by/4.0/"
# our hyperparameter -> the source's column (the release README's flags)
HPARAM_COLUMNS = {"optimizer": "config.optimizer", "learning_rate": "config.learning_rate", "l2": "config.l2reg",
                  "init": "config.w_init", "init_std": "config.init_std", "activation": "config.activation",
                  "dropout": "config.dropout", "train_fraction": "config.train_fraction"}
EXTRA_COLUMNS = {"b_init": "config.b_init", "modeldir": "modeldir"}  # kept verbatim, as strings
SOURCE_METRICS = ("train_loss", "train_accuracy", "test_loss", "test_accuracy")
OPTIONAL_METRICS = ("val_loss", "val_accuracy")  # not in the release; our exporter writes them
# the source's data-set name (TFDS) <-> ours; CIFAR-10 and SVHN were trained on grayscale (the flag's default)
DATASETS = {"mnist": "mnist", "fashion_mnist": "fashion_mnist", "cifar10": "cifar10_gs", "svhn_cropped": "svhn_gs"}
# the released architecture's constants (README: 3 layers of 16 units, always "cnn")
CONSTANTS = {"config.num_layers": 3, "config.num_units": 16, "config.dnn_architecture": "cnn"}
# the released training recipe (train_network.py flags as the README states them), for the card
RECIPE = {"epochs": 86, "batch_size": 512, "checkpoint_epochs": [0, 1, 2, 3, 20, 40, 60, 80, 86]}
# architecture fields the released model sets, applied where our family has the field (Keras'
# Conv2D default padding is "valid": 28 -> 13 -> 6 -> 2 on MNIST; train_network.py scales pixels to [-1, 1])
RELEASED_ARCHITECTURE = {"in_channels": 1, "channels": 16, "num_conv_layers": 3, "kernel_size": 3, "stride": 2,
                         "num_classes": 10, "padding": "valid", "input_range": "signed"}
OUR_SPLIT = SplitSpec(seed=0, fractions={"train": 0.7, "validation": 0.1, "test": 0.2})
CHUNK_ROWS = 4096
# what the release scored test accuracy on (train_network.py: the whole test split), where our data source
# is the release's: MNIST and Fashion-MNIST (CIFAR-10-GS and SVHN-GS are averaged to gray there, luma here)
RELEASE_EVALUATION = {name: {"dataset": {"name": name, "validation_size": 0}, "eval_batch_size": 2000}
                      for name in ("mnist", "fashion_mnist")}


# --- the source files ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LayoutEntry:
    varname: str
    start: int
    end: int
    shape: tuple[int, ...]  # the TensorFlow shape

    @property
    def is_kernel(self) -> bool:
        return self.varname.endswith("kernel:0")


_SHAPE = re.compile(r"\(\s*(\d+\s*(?:,\s*\d+\s*)*)?,?\s*\)|\[\s*(\d+\s*(?:,\s*\d+\s*)*)?\]")


def parse_shape(text: str, where: str) -> tuple[int, ...]:
    """"(3, 3, 1, 16)" or "(16,)" or "[16]" -> a tuple of ints; never evaluated as code."""
    match = _SHAPE.fullmatch(text.strip())
    if match is None:
        raise InputError(f"{where}: shape {ascii(text)[:60]} is not a tuple of integers such as (3, 3, 1, 16)")
    numbers = match.group(1) or match.group(2) or ""
    return tuple(as_int64(n.strip(), f"{where}: shape") for n in numbers.split(",") if n.strip())


def read_layout(path: Path) -> list[LayoutEntry]:
    import csv

    text = read_capped(path, MAX_LAYOUT_BYTES, "layout file", follow=False).decode("utf-8", errors="replace")
    with reading(path, expected="a readable layout CSV"):
        rows = list(csv.DictReader(io.StringIO(text)))
    needed = {"varname", "start_idx", "end_idx", "shape"}
    if not rows or not needed <= set(rows[0]):
        raise InputError(f"{path}: expected the columns {sorted(needed)} and at least one row")
    entries = []
    for number, row in enumerate(rows, start=2):  # line numbers, the header being line 1
        where = f"{path}: line {number} ({ascii(row['varname'])[:60]})"
        if any(row.get(key) is None for key in needed) or None in row:
            raise InputError(f"{where}: expected the 4 fields varname, start_idx, end_idx, shape")
        start, end = as_int64(row["start_idx"], f"{where}: start_idx"), as_int64(row["end_idx"], f"{where}: end_idx")
        shape = parse_shape(row["shape"] or "", where)
        if not (row["varname"].endswith("kernel:0") or row["varname"].endswith("bias:0")):
            raise InputError(f"{where}: a variable must end in kernel:0 or bias:0")
        if end - start != math.prod(shape) or start < 0 or any(n <= 0 for n in shape):
            raise InputError(f"{where}: [{start}, {end}) holds {end - start} values, its shape {shape} "
                             f"{math.prod(shape)}")
        entries.append(LayoutEntry(row["varname"], start, end, shape))
    return entries


def read_metrics(path: Path):
    if not os.path.lexists(path):
        raise InputError(f"{path}: missing (the Small CNN Zoo folder holds {WEIGHTS}, {METRICS} and {LAYOUT})")
    frame = read_table(path, "gzipped metrics CSV")
    needed = ["modeldir", "step", *SOURCE_METRICS, *HPARAM_COLUMNS.values()]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing the columns {missing}")
    return frame


def _dataset_name(frame, path: Path, given: str | None) -> str:
    if given is not None:
        if given not in DATASETS.values():
            raise InputError(f"--dataset {given!r}: expected one of {sorted(DATASETS.values())}")
        return given
    if "config.dataset" not in frame.columns:
        raise InputError(f"{path}: no config.dataset column; name the data set with --dataset")
    names = sorted(set(map(str, frame["config.dataset"])))
    if len(names) != 1 or names[0] not in DATASETS:
        raise InputError(f"{path}: config.dataset holds {names[:4]}; expected one of {sorted(DATASETS)}")
    return DATASETS[names[0]]


def _check_constants(frame, path: Path) -> None:
    for column, value in CONSTANTS.items():
        if column in frame.columns:
            bad = frame.index[frame[column].astype(str) != str(value)]
            if len(bad):
                raise InputError(f"{path}: row {int(bad[0])} ({frame['modeldir'].iloc[int(bad[0])]}): {column} is "
                                 f"{frame[column].iloc[int(bad[0])]}, the released architecture has {value}")


# --- the layout: TensorFlow rows <-> our family's tensors ----------------------------------------

def _tf_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Our PyTorch shape -> the TensorFlow one (OIHW -> HWIO, (out, in) -> (in, out))."""
    if len(shape) == 4:
        out_c, in_c, height, width = shape
        return (height, width, in_c, out_c)
    if len(shape) == 2:
        return (shape[1], shape[0])
    return shape


def _to_torch(values: np.ndarray) -> np.ndarray:
    """(N, *tf_shape) -> (N, *torch_shape)."""
    if values.ndim == 5:
        return values.transpose(0, 4, 3, 1, 2)
    if values.ndim == 3:
        return values.transpose(0, 2, 1)
    return values


def _to_tf(values: np.ndarray) -> np.ndarray:
    if values.ndim == 5:  # (N, O, I, H, W) -> (N, H, W, I, O)
        return values.transpose(0, 3, 4, 2, 1)
    if values.ndim == 3:
        return values.transpose(0, 2, 1)
    return values


def match_layout(layout: list[LayoutEntry], space, path: Path) -> dict[str, LayoutEntry]:
    """Our tensor name -> its layout entry, of the TensorFlow shape of ours.

    The k-th kernel is our k-th weight and the k-th bias our k-th bias, both in order.
    """
    kernels = [e for e in layout if e.is_kernel]
    biases = [e for e in layout if not e.is_kernel]
    ours_w = [t for t in space.tensors if t.name.endswith("weight")]
    ours_b = [t for t in space.tensors if t.name.endswith("bias")]
    if len(kernels) != len(ours_w) or len(biases) != len(ours_b):
        raise InputError(f"{path}: {len(kernels)} kernels and {len(biases)} biases; the released architecture has "
                         f"{len(ours_w)} and {len(ours_b)}")
    mapping = {}
    for entry, tensor in [*zip(kernels, ours_w), *zip(biases, ours_b)]:
        expected = _tf_shape(tuple(tensor.shape))
        if entry.shape != expected:
            raise InputError(f"{path}: {entry.varname} has shape {entry.shape}; {tensor.name} needs {expected}")
        mapping[tensor.name] = entry
    return mapping


# --- import ---------------------------------------------------------------------------------------

def released_architecture() -> dict[str, Any]:
    """The released model's fields that our `cnn` family's Architecture has."""
    from zoo.families import create_family

    fields = {f.name for f in dataclasses.fields(create_family("cnn").Architecture)}
    return {key: value for key, value in RELEASED_ARCHITECTURE.items() if key in fields}


def _cast(kind: Any, value: Any, where: str = "a value") -> Any:
    """A source's value as our hyperparameter's type: text, a 64-bit integer or a float."""
    origin = typing.get_origin(kind)
    if origin is typing.Literal or kind is str:
        return str(value)
    return as_int64(value, where) if kind is int else as_float(value, where)


def _identities(frame, path: Path, run_ids: list[str]) -> tuple[list[int], list[int]]:
    """Each row's step and seed as 64-bit integers; a (modeldir, step) twice is one line naming both rows."""
    modeldirs = frame["modeldir"].astype(str).tolist()
    steps = [as_int64(value, f"{path}: row {row} ({modeldirs[row]}): step") for row, value in enumerate(frame["step"])]
    seeds = ([as_int64(value, f"{path}: row {row} ({modeldirs[row]}): config.random_seed")
              for row, value in enumerate(frame["config.random_seed"])]
             if "config.random_seed" in frame.columns else [0] * len(frame))
    repeat = first_repeat(zip(run_ids, steps))
    if repeat is not None:
        first, second = repeat
        raise InputError(f"{path}: rows {first} and {second} are both modeldir {modeldirs[first]}, step "
                         f"{steps[first]}; "
                         "a checkpoint appears once")
    return steps, seeds


def _runs(frame, dataset: str) -> list[str]:
    return [content_hash({"format": FORMAT, "dataset": dataset, "modeldir": str(m)}) for m in frame["modeldir"]]


def _chunks(matrix: NpyMatrix, frame, mapping, run_ids, split_of, hparam_types, path: Path, steps: list[int],
            seeds: list[int]) -> Iterator[tuple[str, list[dict], dict[str, np.ndarray]]]:
    metric_values = {m: frame[m].tolist() if m in frame.columns else None for m in (*SOURCE_METRICS, *OPTIONAL_METRICS)}
    hparam_values = {name: frame[column].tolist() for name, column in HPARAM_COLUMNS.items()}
    extra_values = {name: (frame[column].astype(str).tolist() if column in frame.columns else [""] * len(frame))
                    for name, column in EXTRA_COLUMNS.items()}
    for start in range(0, matrix.rows, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, matrix.rows)
        block = matrix.read(start, stop)  # (N, 4970)
        tensors = {name: _to_torch(block[:, e.start:e.end].reshape(stop - start, *e.shape))
                   for name, e in mapping.items()}
        finite = np.isfinite(block).all(axis=1)
        by_split: dict[str, list[int]] = {}
        rows_of: dict[int, dict] = {}
        for index in range(start, stop):
            where = f"{path}: row {index} ({extra_values['modeldir'][index]}, step {steps[index]})"
            step, seed = steps[index], seeds[index]
            hparams = {name: _cast(hparam_types[name], hparam_values[name][index], f"{where}: {column}")
                       for name, column in HPARAM_COLUMNS.items()}
            metrics = {m: (as_float(v[index], f"{where}: {m}") if v is not None else math.nan)
                       for m, v in metric_values.items()}
            ok = finite[index - start] and all(math.isfinite(metrics[m]) for m in SOURCE_METRICS)
            run_id = run_ids[index]
            rows_of[index] = {"model_id": checkpoint_id(run_id, step), "run_id": run_id, "epoch": step, "seed": seed,
                              **hparams, **metrics, **{k: v[index] for k, v in extra_values.items()},
                              "status": "ok" if ok else "diverged"}
            by_split.setdefault(split_of[run_id], []).append(index)
        for split, indices in by_split.items():
            local = np.array(indices) - start
            yield split, [rows_of[i] for i in indices], {name: t[local] for name, t in tensors.items()}


@register_importer(FORMAT)
def import_zoo(source: str | Path, out: str | Path, *, config: str | None = None, dataset: str | None = None,
               nfn_split: str | Path | None = None, nfn_final_step: int = NFN_FINAL_STEP,
               max_shard_bytes: int = 64 * 2**20) -> dict:
    """Imports the Small CNN Zoo folder `source` as config `config` of the zoo folder `out`; returns the manifest.

    `config` defaults to small-cnn-zoo-<data set>. With `nfn_split`, or an `nfn_split.csv` in `source`,
    the papers' split sets are recorded too (module docstring).
    """
    from zoo.families import create_family

    source = Path(source)
    if not source.is_dir():
        raise InputError(f"{source}: no such folder (the Small CNN Zoo folder holds {WEIGHTS}, {METRICS}, {LAYOUT})")
    matrix = open_npy(within(source, source / WEIGHTS))
    frame = read_metrics(within(source, source / METRICS))
    if len(frame) != matrix.rows:
        first = min(len(frame), matrix.rows)
        detail = (f"row {first} ({frame['modeldir'].iloc[first]}, step {frame['step'].iloc[first]}) has no weights"
                  if len(frame) > matrix.rows else f"weights row {first} has no metrics")
        raise InputError(f"{source / METRICS}: {len(frame):,} rows, {source / WEIGHTS} {matrix.rows:,}: {detail}")
    _check_constants(frame, source / METRICS)
    dataset = _dataset_name(frame, source / METRICS, dataset)
    family = create_family("cnn")
    architecture = released_architecture()
    space = family.weight_space(architecture)
    layout = read_layout(within(source, source / LAYOUT))
    if sum(e.end - e.start for e in layout) != matrix.columns or space.num_params != matrix.columns:
        raise InputError(f"{source / LAYOUT}: covers {sum(e.end - e.start for e in layout):,} values; a row of "
                         f"{source / WEIGHTS} has {matrix.columns:,} and the released architecture "
                         f"{space.num_params:,}")
    mapping = match_layout(layout, space, source / LAYOUT)
    run_ids = _runs(frame, dataset)
    steps, seeds = _identities(frame, source / METRICS, run_ids)
    unique_runs = list(dict.fromkeys(run_ids))
    split_of = assign_splits(unique_runs, types.SimpleNamespace(splits=OUR_SPLIT, name=FORMAT))
    name = config or f"{FORMAT}-{dataset.replace('_', '-')}"

    split_sets = {}
    # a FIFO there is refused, not skipped; a link in the source is refused (a --nfn-split the user names may be one)
    split_file = (Path(nfn_split) if nfn_split is not None
                  else source / NFN_SPLIT if os.path.lexists(within(source, source / NFN_SPLIT)) else None)
    if split_file is not None:
        order = read_nfn_split_file(split_file, matrix.rows)
        activations = frame[HPARAM_COLUMNS["activation"]].astype(str).tolist()
        for set_name, positions in split_positions(order, steps, activations, dataset, nfn_final_step).items():
            ids = {split: [checkpoint_id(run_ids[row], int(steps[row])) for row in rows]
                   for split, rows in positions.items()}
            split_sets[set_name] = SplitSet(SPLIT_RULES[set_name].description.format(step=nfn_final_step), ids)

    hints = typing.get_type_hints(family.HParams)
    extras = {k: v for k, v in EXTRA_COLUMNS.items() if v in frame.columns}
    conversions = [
        "kernels transposed from TensorFlow's layout to PyTorch's: convolutions HWIO -> OIHW, the dense layer "
        "(in, out) -> (out, in); each layer's bias, stored before its kernel in a row, goes to <layer>.bias",
        "hyperparameter columns from the source's flags: " + ", ".join(f"{o} <- {s}" for o, s in HPARAM_COLUMNS.items())
        + " (values verbatim: `init` holds the Keras initializer's name)",
        "extra columns kept verbatim: " + (", ".join(f"{o} <- {s}" for o, s in extras.items()) or "none"),
        "epoch <- step; seed <- config.random_seed; run_id = hash of (format, data set, modeldir); model_id = "
        "hash of (run_id, step)",
        "status `diverged` where a weight or a train/test metric is not finite (the rows are kept)",
        "val_loss and val_accuracy are NaN: the zoo measured none (a source with those columns keeps them)",
        f"architecture: the released model's fields {sorted(architecture)}",
    ]
    spec = {"name": name, "family": "cnn", "description": (
        f"The Small CNN Zoo of Unterthiner et al. 2020 on {dataset}, imported from its released "
        f"weights.npy / metrics.csv.gz / layout.csv: {matrix.rows:,} checkpoints of {len(unique_runs):,} runs."),
        "dataset": {"name": dataset}, "architecture": architecture, "training": RECIPE,
        "seeds": sorted(set(seeds)),
        "splits": {"seed": OUR_SPLIT.seed, "fractions": dict(OUR_SPLIT.fractions)}}
    evaluation = (read_evaluation_sidecar(within(source, source / EVALUATION_SIDECAR), dataset)
                  or RELEASE_EVALUATION.get(dataset))
    conversions.append("re-scoring (`nfnzoo verify --recompute`): " + (
        f"on {evaluation['dataset']}" if evaluation else "none: our grayscale images (luma) are not the release's "
        "(channel average), so a recomputed accuracy would differ"))
    provenance = {"format": FORMAT, "name": "Small CNN Zoo (Unterthiner et al. 2020)", "url": URL,
                  "license": LICENSE, "license_link": LICENSE_LINK, "citation": UNTERTHINER_BIBTEX,
                  "split_set_citations": {n: SPLIT_RULES[n].citation for n in split_sets},
                  "files": [WEIGHTS, METRICS, LAYOUT] + ([split_file.name] if split_file else []),
                  "conversions": conversions,
                  "verified": "the layout, the conversions and the split-set rules are checked against fixture folders "
                              "made in the release's layout, not against the released files (not reachable here)",
                  **({"evaluation": evaluation} if evaluation else {})}
    imported = ImportedConfig(name=name, family="cnn", architecture=architecture, spec=spec, source=provenance,
                              extra_columns={k: pa.string() for k in extras}, split_sets=split_sets)
    chunks = _chunks(matrix, frame, mapping, run_ids, split_of, hints, source / WEIGHTS, steps, seeds)
    return write_import(out, imported, chunks, matrix.rows, max_shard_bytes=max_shard_bytes)
