"""Our CNN zoos in the Small CNN Zoo's layout (Unterthiner et al. 2020): the `small-cnn-zoo` exporter.

The layout is the one `zoo.imports.small_cnn_zoo` reads; its docstring describes it. It has four files:

`weights.npy` holds a row per checkpoint: per layer the bias then the kernel, kernels in TensorFlow's
layout. `metrics.csv.gz` holds the release's flags from our hyperparameters. It adds
`val_loss`/`val_accuracy`, which the reference loaders ignore. Then come `layout.csv`, and
`nfn_split.csv` in the form the NFN loader reads: a header line "0", then a permutation.

`import(export(z))` has z's weights, hyperparameters, metrics, epochs, seeds and statuses.

Beside them, `nfnzoo_evaluation.json` says which data set and subsets the metrics were measured on: our
spec's `dataset` (`zoo.dataset.evaluation`). So the import can re-score its members.

The layout holds only the released architecture. So a zoo made with another one (padding or input range)
is refused.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import math
from pathlib import Path

import numpy as np

from zoo.imports import register_exporter
from zoo.dataset.evaluation import EVALUATION_SIDECAR, evaluation_of
from zoo.imports.small_cnn_zoo import (DATASETS, FORMAT, LAYOUT, METRICS, NFN_SPLIT, OPTIONAL_METRICS, WEIGHTS,
                                       _tf_shape, _to_tf, released_architecture)
from zoo.planning.plan import checkpoint_id
from zoo.storage import nofollow
from zoo.validation.inputs import InputError

OUR_TO_SOURCE_DATASET = {ours: theirs for theirs, ours in DATASETS.items()}


def _varnames(space) -> list[tuple[str, str]]:
    """(our tensor name, the Keras variable name) in the release's row order: per layer, bias then kernel."""
    names, conv, layers = [], 0, []
    for tensor in space.tensors:
        layer = tensor.name.rsplit(".", 1)[0]
        if layer not in layers:
            layers.append(layer)
    for layer in layers:
        if layer.startswith("conv"):
            keras = "conv2d" if conv == 0 else f"conv2d_{conv}"
            conv += 1
        else:
            keras = "dense"
        names += [(f"{layer}.bias", f"{keras}/bias:0"), (f"{layer}.weight", f"{keras}/kernel:0")]
    return names


@register_exporter(FORMAT)
def export_zoo(folder: str | Path, out: str | Path, *, config: str | None = None, seed: int = 0) -> Path:
    """Writes config `config` of our CNN zoo `folder` in the Small CNN Zoo's layout into `out`; returns `out`.

    It writes weights.npy, metrics.csv.gz, layout.csv and nfn_split.csv. The split file is a permutation
    drawn from numpy's default_rng(`seed`), in the form the NFN loader reads.

    Rows go in our shards' order: train, validation, test. A run's "best" checkpoint (a second row at
    its epoch) has no place in the layout and is left out. The folder is written as temporaries and
    renamed into place at the end.
    """
    import pandas as pd

    from zoo.loader import read_weights, _read_metadata
    from zoo.storage.folder import read_manifest, resolve_config
    from zoo.storage.integrity import check_shards, entry_paths
    from zoo.storage.manifest import SPLITS

    folder, out = Path(folder), Path(out)
    manifest = read_manifest(folder)
    config = resolve_config(manifest, config, folder)
    entry = manifest["configs"][config]
    if entry["family"] != "cnn":
        raise InputError(f"{folder}: config {config} is a {entry['family']} zoo; the Small CNN Zoo "
                         "layout holds cnn zoos")
    dataset = entry["spec"]["dataset"]["name"]
    if dataset not in OUR_TO_SOURCE_DATASET:
        raise InputError(f"{folder}: config {config} was trained on {dataset}; the Small CNN Zoo layout names "
                         f"{sorted(OUR_TO_SOURCE_DATASET)}")
    _check_released(folder, config, entry)
    entries = [f for split in SPLITS for f in entry["files"] if f["split"] == split]
    check_shards(folder, entries)
    out.mkdir(parents=True, exist_ok=True)
    frames, written, space, order = [], 0, None, None
    total = sum(f["rows"] for f in entries)
    temporary = {name: out / f".{name}.tmp" for name in (WEIGHTS, METRICS, LAYOUT, NFN_SPLIT, EVALUATION_SIDECAR)}
    for path in (*temporary.values(), *(out / name for name in temporary)):
        nofollow.check(out, path)  # a link planted at a temporary or final name is refused before anything is written
    for path in temporary.values():
        nofollow.unlink(out, path)  # a temporary left by an interrupted export
    try:
        # every file is created exclusively ("x": O_CREAT | O_EXCL, which never follows a link)
        with open(temporary[WEIGHTS], "xb") as handle:
            header_at = None
            for path in entry_paths(folder, entries):
                batch, metadata = read_weights([path]), _read_metadata([path])
                keep = np.array([m != checkpoint_id(r, "best")
                                 for m, r in zip(metadata["model_id"], metadata["run_id"])],
                                dtype=bool)
                if space is None:
                    space = batch.space
                    order = _varnames(space)
                    columns = space.num_params
                    header_at = handle.tell()
                    np.lib.format.write_array_header_1_0(handle, {"descr": "<f4", "fortran_order": False,
                                                                  "shape": (total, columns)})
                by_name = dict(zip((t.name for t in space.tensors), batch.tensors))
                parts = [_to_tf(by_name[ours].numpy()[keep]).reshape(int(keep.sum()), -1) for ours, _ in order]
                handle.write(np.ascontiguousarray(np.concatenate(parts, axis=1), dtype="<f4").tobytes())
                written += int(keep.sum())
                frames.append(metadata[keep])
            if written != total:  # "best" rows left out: the header's row count is rewritten
                handle.seek(header_at)
                np.lib.format.write_array_header_1_0(handle, {"descr": "<f4", "fortran_order": False,
                                                              "shape": (written, columns)})
        metadata = pd.concat(frames, ignore_index=True)
        _write_metrics(metadata, temporary[METRICS], dataset, entry)
        position, lines = 0, ["varname,start_idx,end_idx,shape"]
        shapes = {t.name: tuple(t.shape) for t in space.tensors}
        for ours, keras in order:
            shape = _tf_shape(shapes[ours])
            size = math.prod(shape)
            lines.append(f'{keras},{position},{position + size},"{tuple(shape)}"')
            position += size
        _write_new(temporary[LAYOUT], "\n".join(lines) + "\n")
        permutation = np.random.default_rng(seed).permutation(written)
        _write_new(temporary[EVALUATION_SIDECAR], json.dumps(evaluation_of(entry), indent=1) + "\n")
        _write_new(temporary[NFN_SPLIT], "0\n" + "\n".join(map(str, permutation.tolist())) + "\n")
        for name, path in temporary.items():
            nofollow.replace(out, path, out / name)
    except BaseException:
        for path in temporary.values():
            path.unlink(missing_ok=True)
        raise
    return out


def _write_new(path: Path, data: str | bytes) -> None:
    with open(path, "xb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)


def _check_released(folder: Path, config: str, entry: dict) -> None:
    """The layout's rows are the released model's; a config whose members compute another function is refused."""
    from zoo.families.cnn import CNNArchitecture

    released = released_architecture()
    for architecture in (a["architecture"] for a in entry["architectures"].values()):
        ours = dataclasses.asdict(CNNArchitecture(**architecture))
        differs = {k: ours[k] for k in released if ours.get(k) != released[k]}
        if differs:
            raise InputError(f"{folder}: config {config} has {differs}; the Small CNN Zoo layout holds the released "
                             f"model ({ {k: released[k] for k in differs} }), so its rows would compute "
                             "another function")


def _write_metrics(metadata, path: Path, dataset: str, entry: dict) -> None:
    import pandas as pd

    spec = entry["spec"]
    training = spec.get("training", {})
    frame = pd.DataFrame({
        "config.activation": metadata["activation"],
        "config.b_init": metadata["b_init"] if "b_init" in metadata else "zeros",
        "config.dataset": OUR_TO_SOURCE_DATASET[dataset],
        "config.dnn_architecture": "cnn",
        "config.dropout": metadata["dropout"],
        "config.epochs": training.get("epochs", int(metadata["epoch"].max())),
        "config.epochs_between_checkpoints": 20,
        "config.init_std": metadata["init_std"],
        "config.l2reg": metadata["l2"],
        "config.learning_rate": metadata["learning_rate"],
        "config.num_layers": 3,
        "config.num_units": 16,
        "config.optimizer": metadata["optimizer"],
        "config.random_seed": metadata["seed"],
        "config.train_fraction": metadata["train_fraction"],
        "config.w_init": metadata["init"],
        "modeldir": metadata["modeldir"] if "modeldir" in metadata else metadata["run_id"],
        "step": metadata["epoch"],
        **{m: metadata[m] for m in ("test_accuracy", "test_loss", "train_accuracy", "train_loss")},
        **{m: metadata[m] for m in OPTIONAL_METRICS if m in metadata},
    })
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:  # mtime 0: the same zoo, the same bytes
        handle.write(frame.to_csv(index=False, float_format="%.17g").encode())
    _write_new(path, buffer.getvalue())
