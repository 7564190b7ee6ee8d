"""The NFN SIRENs (Zhou et al. 2023) in our format, and our INR zoos in their layout.

The paper "Permutation Equivariant Neural Functionals" (Zhou, Yang, Burns, Jiang, Sokota, Kolter, Finn,
2023, Sec. 5.1) released one SIREN per image of MNIST, Fashion-MNIST and CIFAR-10. `SirenDataset` in
AllanYangZhou/nfn `experiments/data_utils.py` reads them. Its configs name the folders
`siren_mnist_wts`, `siren_fashion_wts` and `siren_cifar_wts`. Each data set's folder holds:

    <prefix>_<label>s/net<idx>.pth          the base fits, prefix "randinit_smaller"
    <prefix>_aug<i>_<label>s/net<idx>.pth   extra fits of the same images (CIFAR-10's "augmented" set)

`<label>` is the class. `<idx>` indexes the data set's training images followed by its test images
(`SirenAndOriginalDataset`'s ConcatDataset).

Each file is a `torch.save`d state dict of `experiments/siren_utils.py`'s `Siren`. The Siren is 2 -> 32
-> 32 -> out, with one hidden sine layer after the first, `outermost_linear` and omega_0 = 30. Its keys
are `net.0.linear.{weight,bias}`, `net.1.linear.{weight,bias}` and `net.2.{weight,bias}`, read
positionally as (weight, bias) pairs.

The reference's base glob `<prefix>_*/*.pth` also matches the aug folders. So its "base" set takes, per
index, whichever fit the glob lists last; its own TODO says so. ScaleGMN (jkalogero/scalegmn
`src/data/cifar_inr_dataset.py`) globs `<prefix>_[0-9]s/*.pth`. We read the base set as ScaleGMN does.
We import the aug fits only when asked (`augmentations=N`). Each row's `fit` column says which fit it is
("base", "aug0", ...).

Our `inr` family is the same function with the same pixel order. Coordinates come from `linspace(-1, 1)`
per axis in (row, column) order, row-major, channels last. Targets are Normalize(0.5, 0.5). So the only
conversion is the names: `net.<i>.linear.*` -> `sine<i+1>.*`, and the last `net.<n>.*` -> `output.*`.

Split sets: the shards' split is the papers' own rule, by image index. Train is [0, 45000), validation
[45000, 50000) and test from 50000 (`split_points: [45000, 50000]` in every data set's config). That is
also our `inr-*` specs' rule, so every fit of an image lands in its image's split.

Split set "nfn" lists the base fits per split in index order, as `SirenDataset(split=...)` reads them.
With augmentations, "nfn-aug" has the base validation and test sets. Its train set is that of
`classify_siren.py --extra_aug N`: the base train fits, then aug0's fits below the validation point,
then aug1's, and so on.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from zoo.imports import register_exporter, register_importer
from zoo.imports.checkpoints import load_state_dict, tensor_shape
from zoo.imports.reading import as_float, as_int64, check_layers, is_regular, listing, within
from zoo.imports.tables import read_rows
from zoo.imports.writer import BySplit, ImportedConfig, SplitSet, built_folder, renamed_tensors, write_import
from zoo.dataset.provenance import SITZMANN_BIBTEX, ZHOU_BIBTEX
from zoo.planning.plan import checkpoint_id
from zoo.planning.spec import content_hash
from zoo.validation.bounds import MAX_AUGMENTATIONS, MAX_STATE_DICT_BYTES, check_member
from zoo.validation.inputs import InputError, check_name, name_problem

FORMAT = "nfn-sirens"
PREFIX = "randinit_smaller"  # every data set's config (classify_siren_configs/dset/*.yaml)
SPLIT_POINTS = (45000, 50000)  # (validation point, test point), the same three configs
URL = "https://github.com/AllanYangZhou/nfn"
LICENSE, LICENSE_LINK = "mit", "https://github.com/AllanYangZhou/nfn/blob/main/LICENSE"
METADATA = "nfnzoo_metadata.csv"  # our exporter's sidecar (the reference globs *.pth in label folders only)
# the reference folder's data-set part -> ours; and (channels, image size) per data set
FOLDER_DATASETS = {"mnist": "mnist", "fashion": "fashion_mnist", "cifar": "cifar10"}
IMAGES = {"mnist": (1, 28), "fashion_mnist": (1, 28), "cifar10": (3, 32)}
OMEGA_0 = 30.0  # siren_utils.SIREN_kwargs: first_omega_0 and hidden_omega_0
CHUNK_ROWS = 2048
_FILE = re.compile(r"net(\d{1,15})\.pth")  # an index, not a 5,000-digit number
SIDECAR_COLUMNS = ("path", "epoch", "seed", "learning_rate", "psnr", "mse", "status")


def reference_keys(num_sine_layers: int) -> list[tuple[str, str]]:
    """(the reference Siren's key, ours) in the reference's order: per layer weight then bias."""
    pairs = []
    for layer in range(num_sine_layers + 1):
        theirs = f"net.{layer}.linear" if layer < num_sine_layers else f"net.{layer}"
        ours = f"sine{layer + 1}" if layer < num_sine_layers else "output"
        pairs += [(f"{theirs}.weight", f"{ours}.weight"), (f"{theirs}.bias", f"{ours}.bias")]
    return pairs


def fit_folders(source: Path, prefix: str, fit: str) -> dict[int, Path]:
    """label -> folder of one fit ("base" or "aug<i>"): `<prefix>[_aug<i>]_<digit>s`, as ScaleGMN globs."""
    stem = prefix if fit == "base" else f"{prefix}_{fit}"
    pattern = re.compile(re.escape(stem) + r"_(\d)s")
    return {int(m.group(1)): p for p in listing(source, source) if p.is_dir() and (m := pattern.fullmatch(p.name))}


def list_fit(source: Path, prefix: str, fit: str) -> list[tuple[int, int, Path]]:
    """(index, label, path) of one fit's files, by index; an index in two label folders is an error."""
    found: dict[int, tuple[int, Path]] = {}
    for label, folder in sorted(fit_folders(source, prefix, fit).items()):
        for path in (p for p in listing(source, folder) if p.suffix == ".pth"):
            if not is_regular(path):
                raise InputError(f"{path}: not a regular file (a link, folder, pipe or device); expected a state dict")
            match = _FILE.fullmatch(path.name)
            if match is None:
                raise InputError(f"{path}: expected net<index>.pth")
            index = int(match.group(1))
            if index in found:
                raise InputError(f"{path}: image {index} is also in {found[index][1]}")
            found[index] = (label, path)
    return [(index, label, path) for index, (label, path) in sorted(found.items())]


def _dataset_name(source: Path, given: str | None) -> str:
    if given is not None:
        if given not in IMAGES:
            raise InputError(f"--dataset {given!r}: expected one of {sorted(IMAGES)}")
        return given
    match = re.fullmatch(r"siren_(\w+?)_wts", source.resolve().name)
    if match is None or match.group(1) not in FOLDER_DATASETS:
        raise InputError(f"{source}: not named siren_<mnist|fashion|cifar>_wts; name the data set with --dataset")
    return FOLDER_DATASETS[match.group(1)]


def read_state_dict(path: Path, keys: list[tuple[str, str]],
                    shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Our tensor name -> float32 array of the state dict at `path`, loaded as tensors only.

    No code is unpickled. A missing, extra or misshapen key is an error naming the file.
    """
    state = load_state_dict(path, MAX_STATE_DICT_BYTES)
    return renamed_tensors(path, state, dict(keys), shapes, f"the reference Siren has {[k for k, _ in keys]}")


def _architecture(path: Path, dataset: str) -> dict[str, Any]:
    """The reference Siren's architecture, from the first file's shapes and the data set's images."""
    state = load_state_dict(path, MAX_STATE_DICT_BYTES)
    sine_layers = sum(1 for k in state if re.fullmatch(r"net\.\d+\.linear\.weight", k))
    if "net.0.linear.weight" not in state or f"net.{sine_layers}.weight" not in state:
        raise InputError(f"{path}: missing net.0.linear.weight or the output layer's net.<n>.weight; the reference "
                         f"Siren has {[k for k, _ in reference_keys(2)]}")
    hidden, in_features = tensor_shape(state, "net.0.linear.weight", path, 2)
    outputs = tensor_shape(state, f"net.{sine_layers}.weight", path, 2)[0]
    channels, size = IMAGES[dataset]
    if outputs != channels:
        raise InputError(f"{path}: {outputs} outputs; {dataset} images have {channels} channels")
    check_layers(f"{path}: the Siren it declares", "sine layers", sine_layers)
    check_member(f"{path}: the Siren it declares", siren_parameters(in_features, hidden, sine_layers, channels),
                 {"in_features": in_features, "hidden_features": hidden})
    return {"in_features": in_features, "hidden_features": hidden, "num_sine_layers": sine_layers,
            "out_features": channels, "image_size": size, "first_omega_0": OMEGA_0, "hidden_omega_0": OMEGA_0}


def siren_parameters(in_features: int, hidden: int, sine_layers: int, out_features: int) -> int:
    """A SIREN's parameter count, computed from its declared sizes; nothing is built.

    It counts the first sine layer, the hidden ones and the linear output, each with its bias.
    """
    return (in_features + 1) * hidden + (sine_layers - 1) * (hidden + 1) * hidden + (hidden + 1) * out_features


def read_sidecar(source: Path, files: int) -> dict[str, dict]:
    """Our exporter's per-file metadata, by relative path; the release has none.

    Each row's values are parsed: epoch and seed as 64-bit integers, status as a plain word, the rest as
    floats. At most one row per listed file is read. So a sidecar of millions of rows is refused before
    it is held.
    """
    path = within(source, source / METADATA)
    if not os.path.lexists(path):
        return {}
    parsed = {}
    for number, row in enumerate(read_rows(path, "metadata file", max_rows=files), start=2):
        if number == 2 and not set(SIDECAR_COLUMNS) <= set(row):
            raise InputError(f"{path}: expected the columns {list(SIDECAR_COLUMNS)}")
        where = f"{path}: line {number} ({ascii(row.get('path'))[:80]})"
        if any(row.get(column) is None for column in SIDECAR_COLUMNS):
            raise InputError(f"{where}: expected the columns {list(SIDECAR_COLUMNS)}")
        problem = name_problem(row["status"])
        if problem is not None:
            raise InputError(f"{where}: status: {problem}")
        if row["path"] in parsed:
            raise InputError(f"{where}: {ascii(row['path'])[:80]} is listed twice")
        parsed[row["path"]] = {"epoch": as_int64(row["epoch"], f"{where}: epoch"),
                               "seed": as_int64(row["seed"], f"{where}: seed"),
                               **{k: as_float(row[k], f"{where}: {k}") for k in ("learning_rate", "psnr", "mse")},
                               "status": row["status"]}
    return parsed


def split_of_index(index: int, split_points: tuple[int, int]) -> str:
    validation, test = split_points
    return "train" if index < validation else "validation" if index < test else "test"


def _chunks(files, dataset, keys, shapes, sidecar, split_points, source: Path
            ) -> Iterator[tuple[str, list[dict], dict[str, np.ndarray]]]:
    for start in range(0, len(files), CHUNK_ROWS):
        by_split = BySplit(shapes)
        for fit, index, label, path in files[start:start + CHUNK_ROWS]:
            tensors = read_state_dict(path, keys, shapes)
            relative = path.relative_to(source).as_posix()
            extra = sidecar.get(relative)
            epoch, seed = (extra["epoch"], extra["seed"]) if extra else (0, 0)
            learning_rate, psnr, mse = ((extra["learning_rate"], extra["psnr"], extra["mse"]) if extra
                                        else (math.nan, math.nan, math.nan))
            finite = all(np.isfinite(t).all() for t in tensors.values())
            status = (extra["status"] if extra else "ok") if finite else "diverged"
            run_id = content_hash({"format": FORMAT, "dataset": dataset, "fit": fit, "image_index": index})
            row = {"model_id": checkpoint_id(run_id, epoch), "run_id": run_id, "epoch": epoch, "seed": seed,
                   "image_index": index, "learning_rate": learning_rate, "label": label, "psnr": psnr, "mse": mse,
                   "fit": fit, "source_path": relative, "status": status}
            by_split.add(split_of_index(index, split_points), row, tensors)
        yield from by_split.stacked()


@register_importer(FORMAT)
def import_zoo(source: str | Path, out: str | Path, *, config: str | None = None, dataset: str | None = None,
               prefix: str = PREFIX, augmentations: int = 0, split_points: tuple[int, int] = SPLIT_POINTS,
               max_shard_bytes: int = 64 * 2**20) -> dict:
    """Imports the NFN SIREN folder `source` as config `config` of the zoo folder `out`; returns the manifest.

    It reads the base fits, and aug0..aug<augmentations-1>. `config` defaults to nfn-sirens-<data set>.
    """
    from zoo.families import create_family

    source = Path(source)
    check_name(prefix, "prefix")
    if not source.is_dir():
        raise InputError(f"{source}: no such folder (the NFN SIREN folder holds {prefix}_<label>s/net<index>.pth)")
    dataset = _dataset_name(source, dataset)
    validation_point, test_point = split_points
    if not 0 < validation_point <= test_point:
        raise InputError(f"split points {split_points}: expected 0 < validation point <= test point")
    if not 0 <= augmentations <= MAX_AUGMENTATIONS:
        raise InputError(f"--augmentations {augmentations}: expected 0..{MAX_AUGMENTATIONS:,} (zoo.validation.bounds)")
    fits = ["base"] + [f"aug{i}" for i in range(augmentations)]
    listed = {fit: list_fit(source, prefix, fit) for fit in fits}
    for fit, files in listed.items():
        if not files:
            stem = prefix if fit == "base" else f"{prefix}_{fit}"
            raise InputError(f"{source}: no {stem}_<label>s/net<index>.pth files")
    architecture = _architecture(listed["base"][0][2], dataset)
    space = create_family("inr").weight_space(architecture)
    shapes = {t.name: tuple(t.shape) for t in space.tensors}
    keys = reference_keys(architecture["num_sine_layers"])
    files = [(fit, index, label, path) for fit in fits for index, label, path in listed[fit]]
    sidecar = read_sidecar(source, len(files))
    name = config or f"{FORMAT}-{dataset.replace('_', '-')}"

    def ids(fit: str, split: str) -> list[str]:
        return [checkpoint_id(content_hash({"format": FORMAT, "dataset": dataset, "fit": fit, "image_index": index}),
                              sidecar[path.relative_to(source).as_posix()]["epoch"]
                              if path.relative_to(source).as_posix() in sidecar else 0)
                for index, _, path in listed[fit] if split_of_index(index, split_points) == split]

    base = {split: ids("base", split) for split in ("train", "validation", "test")}
    rule = (f"index ranges over the base fits ({prefix}_<label>s, as ScaleGMN globs): train [0, {validation_point}), "
            f"validation [{validation_point}, {test_point}), test from {test_point}, each in index order "
            "(SirenDataset's split_points)")
    split_sets = {"nfn": SplitSet(rule, base)}
    if augmentations:
        augmented = base["train"] + [m for fit in fits[1:] for m in ids(fit, "train")]
        split_sets["nfn-aug"] = SplitSet(
            f"classify_siren.py with extra_aug={augmentations}: the base train fits, then "
            f"aug0..aug{augmentations - 1}'s "
            f"fits below {validation_point} in index order (ConcatDataset order); validation and test as nfn",
            {"train": augmented, "validation": base["validation"], "test": base["test"]})
    conversions = [
        "state dict keys renamed: " + ", ".join(f"{t} -> {o}" for t, o in keys) + " (values unchanged: same layout, "
        "same pixel order and target scaling)",
        f"architecture from the first file's shapes; omega_0 = {OMEGA_0:g} (siren_utils.SIREN_kwargs, not stored)",
        "image_index <- <index> of net<index>.pth; label <- the <label>s folder; fit <- base or aug<i>; "
        "source_path <- the file's path in the folder",
        "run_id = hash of (format, data set, fit, image index); model_id = hash of (run_id, epoch)",
        "not in the release, so NaN or 0 unless our exporter's nfnzoo_metadata.csv is there: learning_rate, psnr, "
        "mse (NaN), epoch and seed (0)",
        "status `diverged` where a weight is not finite",
        f"fits imported: {', '.join(fits)} (the aug fits only on request; the reference's base glob would mix them in)",
    ]
    spec = {"name": name, "family": "inr", "description": (
        f"The NFN SIRENs of Zhou et al. 2023 on {dataset}, imported from {prefix}_<label>s/net<index>.pth: "
        f"{len(files):,} fits of {len(listed['base']):,} images."),
        "dataset": {"name": dataset}, "architecture": architecture,
        "splits": {"by": {"key": "image_index", "ranges": {"train": [0, validation_point],
                                                            "validation": [validation_point, test_point],
                                                            "test": [test_point, None]}}}}
    provenance = {"format": FORMAT, "name": "NFN SIRENs (Zhou et al. 2023)", "url": URL,
                  "license": LICENSE, "license_link": LICENSE_LINK, "citation": ZHOU_BIBTEX + "\n" + SITZMANN_BIBTEX,
                  "files": [f"{prefix}{'' if f == 'base' else '_' + f}_<label>s/net<index>.pth" for f in fits],
                  "conversions": conversions,
                  "verified": "the layout, the key names, the architecture and the split rules are checked against "
                              "the reference code and fixture folders, not against the released files (not reachable "
                              "here); the licence is the code repository's (the weights' own terms are not stated)"}
    imported = ImportedConfig(name=name, family="inr", architecture=architecture, spec=spec, source=provenance,
                              extra_columns={"fit": pa.string(), "source_path": pa.string()}, split_sets=split_sets)
    return write_import(out, imported, _chunks(files, dataset, keys, shapes, sidecar, split_points, source),
                        len(files), max_shard_bytes=max_shard_bytes)


# --- export ---------------------------------------------------------------------------------------

@register_exporter(FORMAT)
def export_zoo(folder: str | Path, out: str | Path, *, config: str | None = None, prefix: str = PREFIX) -> Path:
    """Writes config `config` of our INR zoo `folder` in the NFN SIREN layout into `out`, a new or empty folder.

    Each image's last checkpoint becomes `<prefix>_<label>s/net<image_index>.pth`, with the reference
    Siren's keys in its order. `nfnzoo_metadata.csv` holds what the layout cannot: epoch, seed, learning
    rate, PSNR, MSE, status. The reference loader never reads it.

    An image fitted by more than one run is refused, since the layout has one base fit per image. The
    zoo is written into a scratch folder and renamed into place at the end.
    """
    import torch

    from zoo.loader import _read_metadata, read_weights
    from zoo.storage.folder import read_manifest, resolve_config
    from zoo.storage.integrity import check_shards, entry_paths

    folder, out = Path(folder), Path(out)
    check_name(prefix, "prefix")  # it becomes a folder name under `out`
    manifest = read_manifest(folder)
    config = resolve_config(manifest, config, folder)
    entry = manifest["configs"][config]
    if entry["family"] != "inr":
        raise InputError(f"{folder}: config {config} is a {entry['family']} zoo; the NFN SIREN layout holds inr zoos")
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: not empty; export into a new folder")
    check_shards(folder, entry["files"])
    with built_folder(out) as scratch:
        chosen: dict[int, tuple] = {}  # image index -> (epoch, run, row metadata, state dict)
        (architecture,) = [a["architecture"] for a in entry["architectures"].values()]
        keys = reference_keys(int(architecture["num_sine_layers"]))
        for path in entry_paths(folder, entry["files"]):
            batch, metadata = read_weights([path]), _read_metadata([path])
            for i, row in enumerate(metadata.itertuples(index=False)):
                if row.model_id == checkpoint_id(row.run_id, "best"):
                    continue
                index = int(row.image_index)
                held = chosen.get(index)
                if held is not None and held[1] != row.run_id:
                    raise InputError(f"{folder}: image {index} is fitted by runs {held[1]} and {row.run_id}; the NFN "
                                     "SIREN layout holds one fit per image")
                if held is None or int(row.epoch) > held[0]:
                    chosen[index] = (int(row.epoch), row.run_id, row, batch.state_dict(i))
        lines = [",".join(SIDECAR_COLUMNS)]
        for index, (epoch, _, row, state) in sorted(chosen.items()):
            relative = f"{prefix}_{int(row.label)}s/net{index}.pth"
            (scratch / relative).parent.mkdir(exist_ok=True)
            torch.save({theirs: state[ours].clone() for theirs, ours in keys}, scratch / relative)
            lines.append(",".join([relative, str(epoch), str(int(row.seed)), repr(float(row.learning_rate)),
                                   repr(float(row.psnr)), repr(float(row.mse)), str(row.status)]))
        (scratch / METADATA).write_text("\n".join(lines) + "\n")
    return out
