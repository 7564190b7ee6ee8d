"""The DWSNets INRs (Navon et al. 2023) in our format.

The paper "Equivariant Architectures for Learning in Deep Weight Spaces" (Navon, Shamsian, Achituve,
Fetaya, Chechik, Maron, ICML 2023, Sec. 6, classifying INRs) released one INR per image of MNIST and
Fashion-MNIST. They sit in a Dropbox folder linked from AvivNavon/DWSNets `experiments/mnist/README.md`.
Two later papers classify the same sets: "Graph Neural Networks for Learning Equivariant Representations
of Neural Networks" (Kofinas et al., ICLR 2024; mkofinas/neural-graphs) and "Scale Equivariant Graph
Metanetworks" (Kalogeropoulos et al., NeurIPS 2024; jkalogero/scalegmn).

The folders:

    mnist-inrs/mnist_png_<train|test>_<label>_<id>/checkpoints/model_final.pth
        (or mnist_png_<training|testing>_..., the released folders' spelling)
    fmnist_inrs/<train|test>/model_<id>.pth (a `label` key in each) and fmnist_inrs/splits.json

`<id>` indexes the torchvision data set's training or test images. Neural Graphs' `INRAndImageDataset`
reads the image to edit that way. Our `image_index` is the training images followed by the test images,
so a test INR's is 60,000 + `<id>`.

Each file is a `torch.save`d state dict of DWSNets' `nn/inr.py` `INR(in_dim=2, n_layers=3,
up_scale=16)`. `seq.0` and `seq.1` are sine layers sin(w0 (W h + b)) with w0 = 30. The first is one too,
since `INR` never passes `is_first`. `seq.2` is a linear output, and `forward` returns `seq(x) + 0.5`.

It is evaluated on `experiments/utils.py`'s `make_coordinates`: `np.meshgrid` of two `linspace(-1, 1,
28)`, with its default "xy" indexing. So input 0 is the pixel's column and input 1 its row, pixels
row-major. Its output is the image on [0, 1]. `INRImageDataset` saves it with `save_image`, and the
editing targets are `ToTensor()` images. Our `inr` family says the same with `coordinates: column_row`,
`intensity_range: unit`, `output_offset: 0.5`. So the weights are imported unchanged; only the keys are
renamed.

The split the papers use is a splits file: per split, a list of paths (and labels) read in order.
MNIST's is `mnist_splits.json`, from `experiments/mnist/generate_data_splits.py`. Its test split is the
test folders. Its val split is 5,000 of the train folders, drawn by sklearn's `train_test_split` with no
seed. So it cannot be regenerated; Neural Graphs commits the one it used. Fashion-MNIST's `splits.json`
is shipped in the release, with no generator published.

Both shapes are read. One is {split: {"path": [...], "label": [...]}}, as DWSNets' generator and Neural
Graphs' files write it. The other is {split: [path, ...]} (the release's `splits.json`), with the label
from the state dict, as ScaleGMN reads it.

A listed path is matched to the folder by its last parts (`mnist_png_.../checkpoints/model_final.pth`,
`<train|test>/model_<id>.pth`). Each repository wrote them relative to its own working directory. The
shards split by the source's own train/test folders, the rule that can be regenerated. The file's split
is the named split set "dwsnets".
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np
import pyarrow as pa

from zoo.dataset.provenance import NAVON_BIBTEX, SITZMANN_BIBTEX
from zoo.imports import register_importer
from zoo.imports.checkpoints import load_state_dict, tensor_shape
from zoo.imports.nfn_sirens import siren_parameters
from zoo.imports.reading import check_layers, files_below, first_repeat, is_regular, listing, within
from zoo.imports.writer import BySplit, ImportedConfig, SplitSet, renamed_tensors, write_import
from zoo.planning.plan import checkpoint_id
from zoo.planning.spec import content_hash
from zoo.storage.integrity import sha256_file
from zoo.validation.bounds import MAX_SPLITS_JSON_BYTES as MAX_SPLITS_BYTES
from zoo.validation.bounds import MAX_STATE_DICT_BYTES, check_member
from zoo.validation.inputs import InputError, load_json_bytes, read_capped

FORMAT = "dwsnets-inrs"
URL = "https://github.com/AvivNavon/DWSNets"
LICENSE, LICENSE_LINK = "mit", "https://github.com/AvivNavon/DWSNets/blob/main/LICENCE"
TRAIN_IMAGES = 60000  # MNIST's and Fashion-MNIST's training images: a test <id> is image 60,000 + <id>
IMAGE_SIZE, CLASSES = 28, 10
OMEGA_0 = 30.0  # nn/inr.py Siren's default w0, for both sine layers
OUTPUT_OFFSET = 0.5  # nn/inr.py INR.forward: self.seq(x) + 0.5
SPLITS_FILES = {"mnist": "mnist_splits.json", "fashion_mnist": "splits.json"}  # looked for in the source folder
FILE_SPLITS = {"train": "train", "val": "validation", "test": "test"}  # the splits file's keys -> ours
CHUNK_ROWS = 2048
# numbers, not 5,000 digits; the split spelled train/test (DWSNets' generator script) or training/testing (the
# released folders, as code reading the release spells them; the three reference loaders glob either)
_MNIST_FOLDER = re.compile(r"mnist_png_(train|test|training|testing)_(\d{1,15})_(\d{1,15})")
_SPLIT_SPELLINGS = {"training": "train", "testing": "test"}
_FMNIST_FILE = re.compile(r"model_(\d{1,15})\.pth")


class Member(NamedTuple):
    """One INR file of the folder."""

    relative: str  # its path in the folder
    split: str  # the folder's own split: train or test
    image_id: int  # <id>: its image among the data set's training or test images
    label: int | None  # from the folder name (MNIST); None where the state dict holds it (Fashion-MNIST)

    @property
    def image_index(self) -> int:
        return self.image_id + (TRAIN_IMAGES if self.split == "test" else 0)


def _mnist_members(source: Path) -> list[Member]:
    members = []
    for folder in (p for p in listing(source, source) if p.is_dir() and p.name.startswith("mnist_png_")):
        match = _MNIST_FOLDER.fullmatch(folder.name)
        if match is None:
            raise InputError(f"{folder}: expected mnist_png_<train|test|training|testing>_<label>_<id>")
        files = [f for f in files_below(source, folder)
                 if f.suffix == ".pth"]  # as the reference's mnist_png_*/**/*.pth
        if files and not is_regular(files[0]):
            raise InputError(f"{files[0]}: not a regular file (a link, folder, pipe or device); expected a state dict")
        if [f.relative_to(folder).as_posix() for f in files] != ["checkpoints/model_final.pth"]:
            raise InputError(f"{folder}: expected one checkpoints/model_final.pth, found "
                             f"{[f.relative_to(folder).as_posix() for f in files][:4]}")
        split, label, image_id = _SPLIT_SPELLINGS.get(match.group(1), match.group(1)), int(match.group(2)), \
            int(match.group(3))
        if label >= CLASSES:
            raise InputError(f"{folder}: label {label} is not a class 0-{CLASSES - 1}")
        members.append(Member(files[0].relative_to(source).as_posix(), split, image_id, label))
    return members


def _fmnist_members(source: Path) -> list[Member]:
    members = []
    for split in ("train", "test"):
        for path in (p for p in listing(source, source / split) if p.suffix == ".pth"):
            match = _FMNIST_FILE.fullmatch(path.name)
            if match is None:
                raise InputError(f"{path}: expected model_<id>.pth")
            if not is_regular(path):
                raise InputError(f"{path}: not a regular file (a link, folder, pipe or device); expected a state dict")
            members.append(Member(path.relative_to(source).as_posix(), split, int(match.group(1)), None))
    return members


def _dataset_name(source: Path, given: str | None) -> str:
    if given is not None:
        if given not in SPLITS_FILES:
            raise InputError(f"--dataset {given!r}: expected one of {sorted(SPLITS_FILES)}")
        return given
    if any(p.is_dir() and p.name.startswith("mnist_png_") for p in listing(source, source)):
        return "mnist"
    if within(source, source / "train").is_dir() or within(source, source / "test").is_dir():
        return "fashion_mnist"
    raise InputError(f"{source}: neither mnist_png_<split>_<label>_<id>/ folders (MNIST) nor train/ and test/ "
                     "(Fashion-MNIST); name the data set with --dataset")


def _reference_keys(num_sine_layers: int) -> list[tuple[str, str]]:
    """(DWSNets' key, ours), per layer weight then bias.

    seq.<i> is sine<i+1>, and the last, seq.<n>, is the output.
    """
    pairs = []
    for layer in range(num_sine_layers + 1):
        ours = f"sine{layer + 1}" if layer < num_sine_layers else "output"
        pairs += [(f"seq.{layer}.weight", f"{ours}.weight"), (f"seq.{layer}.bias", f"{ours}.bias")]
    return pairs


def _label_value(value: Any, where: str) -> int:
    """A class label from a splits file or a state dict: an int, a digit string or a 0-d integer tensor."""
    import torch

    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point():
        value = int(value)
    if isinstance(value, str) and value.isdigit() and len(value) <= 3:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < CLASSES:
        raise InputError(f"{where}: label {value!r} is not a class 0-{CLASSES - 1}")
    return value


def read_member(path: Path, keys: list[tuple[str, str]], shapes: dict[str, tuple[int, ...]],
                labelled: bool) -> tuple[dict[str, np.ndarray], int | None]:
    """Our tensor name -> float32 array of one INR file, and its `label` key (Fashion-MNIST's).

    A missing, extra or misshapen key is an error naming the file.
    """
    state = load_state_dict(path, MAX_STATE_DICT_BYTES)
    label = _label_value(state.pop("label"), str(path)) if labelled and "label" in state else None
    if labelled and label is None:
        raise InputError(f"{path}: no label key (the Fashion-MNIST INRs hold their class under 'label')")
    out = renamed_tensors(path, state, dict(keys), shapes, f"the DWSNets INR has {[k for k, _ in keys]}")
    return out, label


def _architecture(path: Path) -> dict[str, Any]:
    """The DWSNets INR's architecture, from the first file's shapes."""
    state = load_state_dict(path, MAX_STATE_DICT_BYTES)
    layers = sum(1 for k in state if re.fullmatch(r"seq\.\d+\.weight", k))
    if "seq.0.weight" not in state or f"seq.{layers - 1}.weight" not in state:
        raise InputError(f"{path}: missing seq.0.weight or the output layer's seq.<n>.weight; the DWSNets INR has "
                         f"{[k for k, _ in _reference_keys(2)]}")
    hidden, in_features = tensor_shape(state, "seq.0.weight", path, 2)
    out = tensor_shape(state, f"seq.{layers - 1}.weight", path, 2)[0]
    if layers < 2 or in_features != 2 or out != 1:
        raise InputError(f"{path}: {layers} layers {in_features} -> ... -> {out}; a DWSNets INR of a grayscale "
                         "image has 2 inputs, sine layers and 1 output")
    check_layers(f"{path}: the INR it declares", "sine layers", layers - 1)
    check_member(f"{path}: the INR it declares", siren_parameters(2, hidden, layers - 1, 1),
                 {"hidden_features": hidden})
    return {"in_features": 2, "hidden_features": hidden, "num_sine_layers": layers - 1, "out_features": 1,
            "image_size": IMAGE_SIZE, "first_omega_0": OMEGA_0, "hidden_omega_0": OMEGA_0,
            "coordinates": "column_row", "intensity_range": "unit", "output_offset": OUTPUT_OFFSET}


def read_splits_file(path: Path, dataset: str, by_key: dict[tuple[str, ...], Member]
                     ) -> dict[str, list[tuple[Member, int | None]]]:
    """Our split -> [(member, the file's label or None)], in the file's order.

    A path not in the folder, or a malformed entry or label, is an error naming the file and the entry.
    """
    data = load_json_bytes(read_capped(path, MAX_SPLITS_BYTES, "splits file"), str(path))
    if not isinstance(data, dict) or set(data) != set(FILE_SPLITS):
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise InputError(f"{path}: expected the keys {sorted(FILE_SPLITS)}, found {found}")
    tail = 3 if dataset == "mnist" else 2  # mnist_png_.../checkpoints/model_final.pth; <split>/model_<id>.pth
    splits = {}
    for key, ours in FILE_SPLITS.items():
        entry = data[key]
        if isinstance(entry, dict):
            paths, labels = entry.get("path"), entry.get("label")
            if not isinstance(paths, list) or not isinstance(labels, list) or len(paths) != len(labels):
                raise InputError(f"{path}: {key} needs equally long 'path' and 'label' lists")
        elif isinstance(entry, list):
            paths, labels = entry, [None] * len(entry)
        else:
            raise InputError(f"{path}: {key} is a {type(entry).__name__}; expected a list of paths or "
                             "{'path': [...], 'label': [...]}")
        rows = []
        for i, (listed, label) in enumerate(zip(paths, labels)):
            where = f"{path}: {key}[{i}]"
            if not isinstance(listed, str):
                raise InputError(f"{where}: path {listed!r} is not a string")
            member = by_key.get(tuple(Path(listed).parts[-tail:]))
            if member is None:
                raise InputError(f"{where} names {listed}, which is not in the INR folder")
            rows.append((member, None if label is None else _label_value(label, f"{where} ({listed})")))
        splits[ours] = rows
    return splits


def _chunks(source: Path, members: list[Member], keys, shapes, dataset: str, labels: dict[str, int]
            ) -> Iterator[tuple[str, list[dict], dict[str, np.ndarray]]]:
    for start in range(0, len(members), CHUNK_ROWS):
        by_split = BySplit(shapes)
        for member in members[start:start + CHUNK_ROWS]:
            tensors, label = read_member(source / member.relative, keys, shapes, member.label is None)
            label = member.label if label is None else label
            listed = labels.get(member.relative)
            if listed is not None and listed != label:
                raise InputError(f"{source / member.relative}: label {label}, but the splits file lists it as {listed}")
            finite = all(np.isfinite(t).all() for t in tensors.values())
            run_id = content_hash({"format": FORMAT, "dataset": dataset, "image_index": member.image_index})
            row = {"model_id": checkpoint_id(run_id, 0), "run_id": run_id, "epoch": 0, "seed": 0,
                   "image_index": member.image_index, "learning_rate": math.nan, "label": label, "psnr": math.nan,
                   "mse": math.nan, "source_path": member.relative, "status": "ok" if finite else "diverged"}
            by_split.add(member.split, row, tensors)
        yield from by_split.stacked()


@register_importer(FORMAT)
def import_zoo(source: str | Path, out: str | Path, *, config: str | None = None, dataset: str | None = None,
               splits: str | Path | None = None, max_shard_bytes: int = 64 * 2**20) -> dict:
    """Imports the DWSNets INR folder `source` as config `config` of the zoo folder `out`; returns the manifest.

    `source` is `mnist-inrs` or `fmnist_inrs`. `config` defaults to dwsnets-inrs-<data set>. The splits
    file `splits` becomes split set "dwsnets". It defaults to mnist_splits.json or splits.json in
    `source`, if there.
    """
    from zoo.families import create_family

    source = Path(source)
    if not source.is_dir():
        raise InputError(f"{source}: no such folder (the DWSNets INR folder holds mnist_png_<split>_<label>_<id>/ "
                         "or train/ and test/)")
    dataset = _dataset_name(source, dataset)
    members = _mnist_members(source) if dataset == "mnist" else _fmnist_members(source)
    repeat = first_repeat(m.image_index for m in members)
    if repeat is not None:
        first, second = members[repeat[0]], members[repeat[1]]
        raise InputError(f"{source / second.relative}: image {second.split} {second.image_id} is also fitted by "
                         f"{source / first.relative}; one INR per image")
    if not members:
        layout = ("mnist_png_<split>_<label>_<id>/checkpoints/model_final.pth" if dataset == "mnist"
                  else "<train|test>/model_<id>.pth")
        raise InputError(f"{source}: no {layout} files")
    architecture = _architecture(source / members[0].relative)
    space = create_family("inr").weight_space(architecture)
    shapes = {t.name: tuple(t.shape) for t in space.tensors}
    keys = _reference_keys(architecture["num_sine_layers"])
    splits_path = Path(splits) if splits is not None else within(source, source / SPLITS_FILES[dataset])
    if splits is not None and not splits_path.is_file():
        raise InputError(f"{splits_path}: no such splits file")
    tail = 3 if dataset == "mnist" else 2
    by_key = {tuple(Path(m.relative).parts[-tail:]): m for m in members}
    # a splits file that is there but not a regular file (a FIFO, a link) is refused, not skipped
    listed = read_splits_file(splits_path, dataset, by_key) if os.path.lexists(splits_path) else None
    file_labels = {m.relative: label for rows in (listed or {}).values() for m, label in rows if label is not None}
    name = config or f"{FORMAT}-{dataset.replace('_', '-')}"

    def model_id(member: Member) -> str:
        return checkpoint_id(content_hash({"format": FORMAT, "dataset": dataset, "image_index": member.image_index}), 0)

    split_sets = {}
    if listed is not None:
        digest = sha256_file(splits_path)
        origin = ("drawn by DWSNets' generate_data_splits.py (val: 5,000 of the train folders by sklearn's "
                  "train_test_split without a seed), so it cannot be regenerated; this is the given file's draw"
                  if dataset == "mnist" else
                  "shipped in the release's fmnist_inrs.zip; its generator is not published, so it cannot be "
                  "regenerated")
        split_sets["dwsnets"] = SplitSet(
            f"the splits file {splits_path.name} (sha256 {digest[:16]}): its train, val (our validation) and test "
            f"lists in the file's order, as INRDataset and ScaleGMN read them; {origin}",
            {split: [model_id(m) for m, _ in rows] for split, rows in listed.items()})
    conversions = [
        "state dict keys renamed: " + ", ".join(f"{t} -> {o}" for t, o in keys) + " (values unchanged)",
        "the INR's conventions kept as architecture fields instead of changing its weights: coordinates column_row "
        "(make_coordinates' meshgrid feeds (column, row)), intensity_range unit (it fits [0, 1] images), "
        f"output_offset {OUTPUT_OFFSET:g} (INR.forward adds it); omega_0 = {OMEGA_0:g} for both sine layers "
        "(nn/inr.py's default w0, not stored)",
        f"image_index <- <id>, plus {TRAIN_IMAGES:,} for a test INR (training images, then test images)",
        ("label <- the folder name's <label>" if dataset == "mnist" else "label <- the state dict's 'label' key")
        + "; a splits file's label that differs is refused; source_path <- the file's path in the folder",
        "shards split by the source's train/test folders; the papers' validation set is the split set 'dwsnets'",
        "run_id = hash of (format, data set, image index); model_id = hash of (run_id, 0)",
        "not in the release, so NaN or 0: learning_rate, psnr, mse (NaN), epoch and seed (0; the file is the "
        "fit's final checkpoint, model_final.pth)",
        "status `diverged` where a weight is not finite",
    ]
    layout = ("mnist_png_<train|test>_<label>_<id>/checkpoints/model_final.pth" if dataset == "mnist"
              else "<train|test>/model_<id>.pth")
    spec = {"name": name, "family": "inr", "description": (
        f"The DWSNets INRs of Navon et al. 2023 on {dataset}, imported from {layout}: {len(members):,} INRs."),
        "dataset": {"name": dataset}, "architecture": architecture,
        "splits": {"by": {"key": "image_index", "ranges": {"train": [0, TRAIN_IMAGES], "test": [TRAIN_IMAGES, None]}}}}
    provenance = {"format": FORMAT, "name": "DWSNets INRs (Navon et al. 2023)", "url": URL,
                  "license": LICENSE, "license_link": LICENSE_LINK, "citation": NAVON_BIBTEX + "\n" + SITZMANN_BIBTEX,
                  "files": [layout] + ([f"{splits_path.name} (sha256 {sha256_file(splits_path)})"] if listed else []),
                  "conversions": conversions,
                  "verified": "the layout, the key names, the INR's forward, coordinates and offset and the splits "
                              "files' shapes are checked against the reference code (AvivNavon/DWSNets, "
                              "mkofinas/neural-graphs, jkalogero/scalegmn) and fixture folders, not against the "
                              "released files (not reachable here); the licence is the code repository's (the "
                              "weights' own terms are not stated)"}
    imported = ImportedConfig(name=name, family="inr", architecture=architecture, spec=spec, source=provenance,
                              extra_columns={"source_path": pa.string()}, split_sets=split_sets)
    return write_import(out, imported, _chunks(source, members, keys, shapes, dataset, file_labels),
                        len(members), max_shard_bytes=max_shard_bytes)
