"""The Small Transformer Zoo (Tran et al. 2025) in our format: its MNIST members, into our `transformer` family.

The paper "Equivariant Neural Functional Networks for Transformers" (Tran, Vo, The, Tran Huu,
Nguyen-Nhat, Tran, Pham, Nguyen; ICLR 2025; github.com/Fsoft-AIC/Transformer-NFN) released one folder
per data set.

`<name>/<run>_<epoch>_<acc>.pt` is a `VisionTransformer` state dict (vision_task/model.py).
vision_task/solver.py saves one after epochs 1, 50, 75 and 100; <acc> is the test accuracy x 10,000.
`<run>_best1_<acc>.pt` is the best on the test set.

`metadata/<name>.csv` has one row per checkpoint (vision_task/generate_metadata.py). It holds the run's
wandb config (vision_task/main.py's flags), `ckpt_epoch` ("1", ..., "best1") and `ckpt_file`
("<name>/<file>"). It also holds the test accuracy: `test_top1_accuracy` for MNIST, `test_accuracy` for
AG News.

`SmallTransformerZooDataset` (nfn_transformer/common/data_utils.py) reads them. The README downloads
`MNIST-Transformers.zip` from the Hugging Face data set. It unpacks it as `data/mnist_transformer`, the
folder this importer takes.

The state dict's keys are our family's, with the same (out, in) shapes. They are `embedding.conv1.*`,
`encoder.<i>.attention.{queries,keys,values,out_projection}.weight`, `encoder.<i>.fc{1,2}.*` and
`classifier.fc{1,2}.*`. One more key is `embedding.pos_embedding`: the fixed sinusoidal encoding, a
parameter without gradient. Our member computes it instead, so it is checked against ours and dropped.

AG News members read word2vec vectors reduced to 32 dimensions (text_classification/model.py). Our
family does not hold those; it reads MiniLM's (`zoo.data.text`). So they are refused, not converted.

Split sets: the shards' split is ours, runs by seeded fractions 0.7/0.1/0.2. "transformer-nfn" is the
one `nfn_transformer/main.py` reads. It keeps rows with `ckpt_epoch == "75"`, in the CSV's order. With a
positive `cut_off`, it also keeps only an accuracy of at least `cut_off`. The README's commands pass 0,
no filter; main.py's default is 0.1. The rows are shuffled by Python's `random` after `set_seed(3)`,
i.e. `random.Random(3).shuffle`. They are cut at int(0.7 n) and int(0.15 n).
"""

from __future__ import annotations

import math
import random
import re
import types
import typing
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from zoo.imports import register_exporter, register_importer
from zoo.imports.checkpoints import load_state_dict
from zoo.imports.reading import (as_float, as_int64, check_layers, first_repeat, is_source_file, listing, reading,
                                 source_path, within)
from zoo.imports.tables import read_table
from zoo.imports.writer import BySplit, ImportedConfig, SplitSet, built_folder, write_import
from zoo.planning.plan import assign_splits, checkpoint_id
from zoo.planning.spec import SplitSpec, content_hash
from zoo.validation.bounds import MAX_STATE_DICT_BYTES, check_member
from zoo.validation.inputs import InputError

FORMAT = "small-transformer-zoo"
URL = "https://huggingface.co/datasets/anonymized-acamedia/Small-Transformer-Zoo"
CODE_URL = "https://github.com/Fsoft-AIC/Transformer-NFN"
LICENSE, LICENSE_LINK = "mit", CODE_URL + "/blob/main/LICENSE"  # the code's; the zoo states none
TRAN_BIBTEX = """@inproceedings{tran2025equivariant,
  title={Equivariant Neural Functional Networks for Transformers},
  author={Tran, Viet-Hoang and Vo, Thieu N. and The, An Nguyen and Tran Huu, Tho and Nguyen-Nhat, Minh-Khoi and
          Tran, Thanh and Pham, Duy-Tung and Nguyen, Tan Minh},
  booktitle={International Conference on Learning Representations},
  year={2025}
}"""
ACCURACY_COLUMNS = {"mnist": "test_top1_accuracy", "ag_news": "test_accuracy"}  # data_utils.load_from_csv
# data_utils' ckpt_epoch filter; main.py's --seed; the README's commands pass --cut_off 0 (main.py's default is 0.1)
NFN_EPOCH, NFN_SEED, NFN_CUT_OFF = "75", 3, 0.0
# our hyperparameter -> the source's flag (vision_task/main.py)
HPARAM_COLUMNS = {"optimizer": "optimizer", "learning_rate": "lr", "init_std": "w_init_std", "l2": "l2_regularize",
                  "dropout": "dropout", "train_fraction": "train_fraction", "warmup_epochs": "warmup_epochs"}
# not flags: RandomCrop(28, padding=2) in data_loader.py, CosineAnnealingLR's eta_min in solver.py
FIXED_HPARAMS = {"crop_padding": 2, "final_learning_rate": 1e-5}
ARCHITECTURE_COLUMNS = ("n_channels", "image_size", "patch_size", "embed_dim", "n_attention_heads", "forward_mul",
                        "n_layers", "n_classes")
POSITIONAL = "embedding.pos_embedding"
# columns only our exporter writes (the reference loader never reads them): kept on a round trip
OPTIONAL_METRICS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss")
EPOCH_COLUMN = "nfnzoo_epoch"  # the best checkpoint's real epoch
OUR_SPLIT = SplitSpec(seed=0, fractions={"train": 0.7, "validation": 0.1, "test": 0.2})
CHUNK_ROWS = 1024


def _architecture(frame, path: Path) -> dict[str, Any]:
    missing = [c for c in ARCHITECTURE_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing the columns {missing}")
    values = {}
    for column in ARCHITECTURE_COLUMNS:
        distinct = sorted(set(map(str, frame[column].tolist())))
        if len(distinct) != 1:
            shown = [ascii(value)[:40] for value in distinct[:4]]
            raise InputError(f"{path}: {column} takes {shown}; one architecture per data set is expected")
        values[column] = as_int64(frame[column].iloc[0], f"{path}: {column}")
    heads, width = values["n_attention_heads"], values["embed_dim"]
    widths = {column: values[column] for column in ARCHITECTURE_COLUMNS if column != "n_layers"}
    check_layers(f"{path}: the VisionTransformer its flags declare", "n_layers", values["n_layers"])
    check_member(f"{path}: the VisionTransformer its flags declare", 0, widths)  # each size positive and bounded
    if values["image_size"] % values["patch_size"] or width % heads:
        raise InputError(f"{path}: image_size {values['image_size']} is not a multiple of patch_size "
                         f"{values['patch_size']}, or embed_dim {width} of n_attention_heads {heads}")
    tokens = (values["image_size"] // values["patch_size"]) ** 2
    check_member(f"{path}: the VisionTransformer its flags declare", transformer_parameters(values) + tokens * width,
                 {"tokens (image_size / patch_size)^2": tokens, "mlp width (embed_dim x forward_mul)":
                  width * values["forward_mul"]})
    return {"input": "image_patches", "in_channels": values["n_channels"], "image_size": values["image_size"],
            "patch_size": values["patch_size"], "pixel_mean": 0.5, "pixel_std": 0.5, "d_model": width,
            "num_blocks": values["n_layers"], "num_heads": heads, "head_dim": width // heads,
            "mlp_dim": width * values["forward_mul"], "num_classes": values["n_classes"], "residual": False}


def transformer_parameters(flags: dict[str, int]) -> int:
    """The released VisionTransformer's parameter count from its flags; nothing is built.

    It counts the patch embedding (a convolution with bias), and per block Q, K, V, O without bias and a
    two-layer MLP with biases. Then comes the two-layer classifier. LayerNorms hold no parameters
    (elementwise_affine off).
    """
    width, mlp = flags["embed_dim"], flags["embed_dim"] * flags["forward_mul"]
    embedding = (flags["n_channels"] * flags["patch_size"] ** 2 + 1) * width
    block = 4 * width * width + (width + 1) * mlp + (mlp + 1) * width
    return embedding + flags["n_layers"] * block + (width + 1) * width + (width + 1) * flags["n_classes"]


def read_state_dict(path: Path, shapes: dict[str, tuple[int, ...]], positional) -> dict[str, np.ndarray]:
    """Our tensor name -> float32 array; the positional encoding checked and dropped (module docstring)."""
    import torch

    state = load_state_dict(path, MAX_STATE_DICT_BYTES)
    wanted = [*shapes, POSITIONAL]
    missing = [k for k in wanted if k not in state]
    extra = sorted(set(state) - set(wanted))
    if missing or extra:
        detail = f"missing {missing}" if missing else f"unexpected {extra[:4]}"
        raise InputError(f"{path}: {detail}; the released VisionTransformer has {wanted}")
    for name, shape in [*shapes.items(), (POSITIONAL, tuple(positional.shape))]:
        value = state[name]
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise InputError(f"{path}: {name} has shape {got}; the architecture needs {shape}")
    if not torch.allclose(state[POSITIONAL].float(), positional, atol=1e-5):
        raise InputError(f"{path}: {POSITIONAL} is not the fixed sinusoidal encoding our member computes")
    return {name: state[name].detach().to(torch.float32).numpy() for name in shapes}


def nfn_split_positions(frame, accuracy: str, cut_off: float = NFN_CUT_OFF,
                        seed: int = NFN_SEED) -> dict[str, list[int]]:
    """Row positions of `frame` per split, as `SmallTransformerZooDataset.load_from_csv` orders them."""
    keep = np.array(frame["ckpt_epoch"].astype(str) == NFN_EPOCH, dtype=bool)
    if cut_off > 0:
        keep &= (frame[accuracy].to_numpy(dtype=np.float64) >= cut_off)
    positions = [int(p) for p in np.flatnonzero(keep)]
    train, validation = int(float(len(positions) * 0.7)), int(float(len(positions) * 0.15))
    random.Random(seed).shuffle(positions)  # random.seed(seed); random.shuffle(...)
    return {"train": positions[:train], "validation": positions[train:train + validation],
            "test": positions[train + validation:]}


def _epoch(value: str, where: str = "ckpt_epoch") -> tuple[int | str, int]:
    """ckpt_epoch -> (the model id's epoch key, the row's epoch).

    "75" -> (75, 75), "best1" -> ("best", -1).
    """
    if value.isdigit():
        epoch = as_int64(value, f"{where}: ckpt_epoch")
        return epoch, epoch
    if value.startswith("best"):
        return "best", -1
    raise InputError(f"{where}: ckpt_epoch {ascii(value)[:40]} is neither an epoch nor best")


def _best_rows(frame, root: Path, dataset: str, csv_path: Path):
    """The release's best-checkpoint rows, as the reference reads them.

    The reference never opens one: it keeps ckpt_epoch "75". vision_task/generate_metadata.py records a
    best row's ckpt_file as the training run's path, `<name>/<model_dir>/<name>/<run>_best1_<acc>.pt`.
    The released folder does not hold that path. Such a row is read from `<name>/<file>` where that file
    exists, else skipped.

    Returns the frame, how many rows were moved, and the skip notes (one line, for the warning and the
    card).
    """
    moved, missing = 0, []
    frame = frame.copy()
    for position in range(len(frame)):
        epoch, relative = str(frame.iloc[position]["ckpt_epoch"]), str(frame.iloc[position]["ckpt_file"])
        if not epoch.startswith("best") or is_source_file(root, relative):
            continue
        beside = f"{dataset}/{Path(relative).name}"
        if Path(relative).name and is_source_file(root, beside):
            frame.iloc[position, frame.columns.get_loc("ckpt_file")] = beside
            moved += 1
        else:
            missing.append(position)
    if not missing:
        return frame, moved, []
    example = ascii(str(frame.iloc[missing[0]]["ckpt_file"]))[1:-1][:160]
    note = (f"skipped {len(missing)} best-checkpoint row(s) of {csv_path.name} whose file is not in the "
            "folder (e.g. row "
            f"{missing[0]}: {example}); the reference loader never opens best rows (it keeps ckpt_epoch 75)")
    return frame.drop(frame.index[missing]).reset_index(drop=True), moved, [note]


def _chunks(frame, root: Path, name: str, shapes, positional, run_ids, split_of, accuracy, hint_types
            ) -> Iterator[tuple[str, list[dict], dict[str, np.ndarray]]]:
    from zoo.imports.small_cnn_zoo import _cast  # a source value as our hyperparameter's type, range-checked

    for start in range(0, len(frame), CHUNK_ROWS):
        by_split = BySplit(shapes)
        for position in range(start, min(start + CHUNK_ROWS, len(frame))):
            record = frame.iloc[position]
            shown = ascii(str(record["ckpt_file"]))[1:-1][:120]
            where = f"{root / 'metadata' / (name + '.csv')}: row {position} ({shown})"
            path = source_path(root, str(record["ckpt_file"]), where)
            key, epoch = _epoch(str(record["ckpt_epoch"]), where)
            if EPOCH_COLUMN in frame.columns:
                epoch = as_int64(record[EPOCH_COLUMN], f"{where}: {EPOCH_COLUMN}")
            fixed = {k: _cast(hint_types[k], record[k], f"{where}: {k}") if k in frame.columns else v
                     for k, v in FIXED_HPARAMS.items()}
            metrics = {m: as_float(record[m], f"{where}: {m}") if m in frame.columns else math.nan
                       for m in OPTIONAL_METRICS}
            hparams = {ours: _cast(hint_types[ours], record[theirs], f"{where}: {theirs}")
                       for ours, theirs in HPARAM_COLUMNS.items()}
            seed = as_int64(record["seed"], f"{where}: seed") if "seed" in frame.columns else 0
            test_accuracy = as_float(record[accuracy], f"{where}: {accuracy}")
            tensors = read_state_dict(path, shapes, positional)
            finite = all(np.isfinite(t).all() for t in tensors.values()) and math.isfinite(test_accuracy)
            run_id = run_ids[position]
            row = {"model_id": checkpoint_id(run_id, key), "run_id": run_id, "epoch": epoch, "seed": seed,
                   **hparams, **fixed, **metrics, "test_accuracy": test_accuracy,
                   "is_best": key == "best", "ckpt_epoch": str(record["ckpt_epoch"]),
                   "ckpt_file": str(record["ckpt_file"]), "wandb_run": str(record["wandb_run"]),
                   "status": "ok" if finite else "diverged"}
            by_split.add(split_of[run_id], row, tensors)
        yield from by_split.stacked()


@register_importer(FORMAT)
def import_zoo(source: str | Path, out: str | Path, *, config: str | None = None, dataset: str | None = None,
               cut_off: float = NFN_CUT_OFF, max_shard_bytes: int = 64 * 2**20) -> dict:
    """Imports data set `dataset` of the Small Transformer Zoo folder `source` as config `config` of `out`.

    `dataset` defaults to the only `metadata/<name>.csv`. `config` defaults to
    small-transformer-zoo-<name>.
    """

    from zoo.families import create_family
    from zoo.families.transformer_model import sinusoidal_encoding

    root = Path(source)
    if not within(root, root / "metadata").is_dir():
        raise InputError(f"{root}: no metadata/ folder (the Small Transformer Zoo holds "
                         "metadata/<name>.csv and <name>/)")
    names = sorted(p.stem for p in listing(root, root / "metadata") if p.suffix == ".csv")
    if dataset is None:
        if len(names) != 1:
            raise InputError(f"{root / 'metadata'}: holds {names}; name the data set with --dataset")
        dataset = names[0]
    if dataset not in ACCURACY_COLUMNS or dataset == "ag_news":
        raise InputError(f"--dataset {dataset!r}: only mnist imports; AG News members read word2vec vectors our "
                         "transformer family does not hold")
    if dataset not in names:
        raise InputError(f"{root / 'metadata'}: no {dataset}.csv (found {names})")
    csv_path = root / "metadata" / f"{dataset}.csv"
    frame = read_table(csv_path, "metadata file", dtype={"ckpt_epoch": str, "ckpt_file": str})
    accuracy = ACCURACY_COLUMNS[dataset]
    needed = ["ckpt_epoch", "ckpt_file", accuracy, *HPARAM_COLUMNS.values()]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(f"{csv_path}: missing the columns {missing}")
    family = create_family("transformer")
    architecture = _architecture(frame, csv_path)
    space = family.weight_space(architecture)
    shapes = {t.name: tuple(t.shape) for t in space.tensors}
    with reading(csv_path, expected="the released VisionTransformer's flags"):
        arch = family.Architecture(**architecture)
    positional = sinusoidal_encoding(arch.num_tokens, arch.d_model)
    frame, moved, skipped = _best_rows(frame, root, dataset, csv_path)
    wandb_runs = [re.split(r"_", Path(str(f)).name, maxsplit=1)[0] for f in frame["ckpt_file"]]
    frame = frame.assign(wandb_run=wandb_runs)
    run_ids = [content_hash({"format": FORMAT, "dataset": dataset, "run": r}) for r in wandb_runs]
    split_of = assign_splits(list(dict.fromkeys(run_ids)), types.SimpleNamespace(splits=OUR_SPLIT, name=FORMAT))
    keys = [_epoch(str(e), f"{csv_path}: row {row}")[0] for row, e in enumerate(frame["ckpt_epoch"])]
    ids = [checkpoint_id(r, k) for r, k in zip(run_ids, keys)]
    repeat = first_repeat(ids)
    if repeat is not None:
        first, second = repeat
        raise InputError(f"{csv_path}: rows {first} and {second} are the same checkpoint (wandb run "
                         f"{ascii(wandb_runs[first])[1:-1][:60]}, ckpt_epoch {ascii(str(keys[first]))[1:-1][:20]}); "
                         "a checkpoint appears once")
    with reading(csv_path, accuracy, "a column of numbers"):
        positions = nfn_split_positions(frame, accuracy, cut_off)
    name = config or f"{FORMAT}-{dataset.replace('_', '-')}"
    split_sets = {"transformer-nfn": SplitSet(
        f"nfn_transformer/main.py's split (--cut_off {cut_off:g}): rows with ckpt_epoch == \"{NFN_EPOCH}\""
        + (f" and {accuracy} >= {cut_off:g}" if cut_off > 0 else "")
        + f" in metadata/{dataset}.csv order, shuffled by random.seed({NFN_SEED}); random.shuffle, cut at int(0.7 n) "
        "(train) and int(0.15 n) (validation), the rest test",
        {split: [ids[p] for p in rows] for split, rows in positions.items()})}
    conversions = [
        f"state dict keys kept (ours are the release's); {POSITIONAL} checked equal to our sinusoidal encoding "
        "(atol 1e-5) and dropped",
        "architecture from the flags: " + ", ".join(ARCHITECTURE_COLUMNS) + " (head_dim = embed_dim / heads, "
        "mlp_dim = embed_dim x forward_mul); pixels Normalize(0.5, 0.5); no residuals (commented out in the release)",
        "hyperparameters from the flags: " + ", ".join(f"{o} <- {s}" for o, s in HPARAM_COLUMNS.items())
        + f"; fixed: {FIXED_HPARAMS} (RandomCrop padding, CosineAnnealingLR eta_min)",
        f"test_accuracy <- {accuracy}; the other metrics NaN (the release has none)",
        "epoch <- ckpt_epoch; the best-on-test checkpoint (best1) has is_best true and epoch -1 (its epoch is not "
        "recorded); ckpt_epoch, ckpt_file and wandb_run kept as extra columns",
        "run_id = hash of (format, data set, the file name's wandb run); model_id = hash of (run_id, epoch or best)",
        *([f"{moved} best-checkpoint row(s) read from {dataset}/<file>: their ckpt_file is the training run's path "
           f"(generate_metadata.py writes {dataset}/<model_dir>/{dataset}/<run>_best1_<acc>.pt), and ckpt_file "
           "records where the file was read"] if moved else []),
        *skipped,
    ]
    spec = {"name": name, "family": "transformer", "description": (
        f"The Small Transformer Zoo of Tran et al. 2025 on {dataset}: {len(frame):,} checkpoints of "
        f"{len(set(run_ids)):,} runs."), "dataset": {"name": dataset}, "architecture": architecture,
        "splits": {"seed": OUR_SPLIT.seed, "fractions": dict(OUR_SPLIT.fractions)}}
    provenance = {"format": FORMAT, "name": "Small Transformer Zoo (Tran et al. 2025)", "url": URL, "code": CODE_URL,
                  "license": LICENSE, "license_link": LICENSE_LINK, "citation": TRAN_BIBTEX,
                  "files": [f"metadata/{dataset}.csv", f"{dataset}/<run>_<epoch>_<acc>.pt"],
                  "conversions": conversions, "skipped": skipped,
                  "verified": "the layout, the keys, the shapes and the split rule are checked against the reference "
                              "code and fixture folders, not against the released files (not reachable here); the "
                              "licence is the code repository's (MIT): the zoo's own terms are not stated"}
    hints = typing.get_type_hints(family.HParams)
    imported = ImportedConfig(name=name, family="transformer", architecture=architecture, spec=spec, source=provenance,
                              extra_columns={"ckpt_epoch": pa.string(), "ckpt_file": pa.string(),
                                             "wandb_run": pa.string()}, split_sets=split_sets)
    chunks = _chunks(frame, root, dataset, shapes, positional, run_ids, split_of, accuracy, hints)
    return write_import(out, imported, chunks, len(frame), max_shard_bytes=max_shard_bytes)


# --- export ---------------------------------------------------------------------------------------

def _flags(architecture: dict) -> dict[str, int]:
    return {"n_channels": architecture["in_channels"], "image_size": architecture["image_size"],
            "patch_size": architecture["patch_size"], "embed_dim": architecture["d_model"],
            "n_attention_heads": architecture["num_heads"],
            "forward_mul": architecture["mlp_dim"] // architecture["d_model"],
            "n_layers": architecture["num_blocks"], "n_classes": architecture["num_classes"]}


@register_exporter(FORMAT)
def export_zoo(folder: str | Path, out: str | Path, *, config: str | None = None) -> Path:
    """Writes config `config` of our MNIST transformer zoo `folder` in the Small Transformer Zoo's layout.

    `out` is a new or empty folder. Checkpoints go to `mnist/<run>_<epoch>_<acc>.pt`, the best one as
    `<run>_best1_<acc>.pt`. State dicts are in the released `VisionTransformer`'s key order, with its
    fixed `embedding.pos_embedding`.

    `metadata/mnist.csv` holds the flags, ckpt_epoch, ckpt_file and test_top1_accuracy. It adds our
    other metrics, crop_padding, final_learning_rate and the best checkpoint's epoch, which the
    reference loader ignores. The zoo is built in a scratch folder and renamed at the end.
    """

    import pandas as pd
    import torch

    from zoo.families import create_family
    from zoo.families.transformer_model import sinusoidal_encoding
    from zoo.loader import _read_metadata, read_weights
    from zoo.storage.folder import read_manifest, resolve_config
    from zoo.storage.integrity import check_shards, entry_paths

    folder, out = Path(folder), Path(out)
    manifest = read_manifest(folder)
    config = resolve_config(manifest, config, folder)
    entry = manifest["configs"][config]
    (architecture,) = [a["architecture"] for a in entry["architectures"].values()]
    if entry["family"] != "transformer" or architecture.get("input") != "image_patches" or architecture.get("residual"):
        raise InputError(f"{folder}: config {config} is not an image transformer zoo without residuals; the Small "
                         "Transformer Zoo layout holds the released VisionTransformer")
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: not empty; export into a new folder")
    arch = create_family("transformer").Architecture(**architecture)
    positional = sinusoidal_encoding(arch.num_tokens, arch.d_model)
    check_shards(folder, entry["files"])
    rows = []
    with built_folder(out) as scratch:
        (scratch / "mnist").mkdir()
        (scratch / "metadata").mkdir()
        for path in entry_paths(folder, entry["files"]):
            batch, metadata = read_weights([path]), _read_metadata([path])
            for i, row in enumerate(metadata.itertuples(index=False)):
                # the released state dict's order: a module's own parameters (the encoding) before its
                # children's, then ours, which is the released one
                state = batch.state_dict(i)
                best = row.model_id == checkpoint_id(row.run_id, "best")
                epoch = "best1" if best else str(int(row.epoch))
                accuracy = int(row.test_accuracy * 10000) if math.isfinite(row.test_accuracy) else 0
                file = f"{row.run_id}_{epoch}_{accuracy}.pt"
                tensors = {POSITIONAL: positional.clone(), **{k: v.clone() for k, v in state.items()}}
                torch.save(tensors, scratch / "mnist" / file)
                rows.append({"seed": int(row.seed),
                             **{theirs: getattr(row, ours) for ours, theirs in HPARAM_COLUMNS.items()},
                             **{k: getattr(row, k) for k in FIXED_HPARAMS}, **_flags(architecture), "dataset": "mnist",
                             "ckpt_epoch": epoch, "ckpt_file": f"mnist/{file}", "test_top1_accuracy": row.test_accuracy,
                             **{m: getattr(row, m) for m in OPTIONAL_METRICS}, EPOCH_COLUMN: int(row.epoch)})
        pd.DataFrame(rows).to_csv(scratch / "metadata" / "mnist.csv", index=False, float_format="%.17g")
    return out
