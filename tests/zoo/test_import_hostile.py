"""Hostile published zoos: `nfnzoo import` refuses each in one line naming the file, never a traceback,
a hang or an exhausted machine (issue 48, mechanisms 2 and 5).

One table: each row writes a real zoo in the release's layout with the fixtures of
`tests/zoo/*_fixture.py` and corrupts one file (a declared architecture too large to build, a gzip or zip
bomb, a sidecar of millions of rows, a FIFO or a link where a file belongs, a duplicate checkpoint, a
5,000-digit shape, an integer past 64 bits, an encrypted or method-1 zip member, a damaged `.tar.xz`, an
int where a tensor belongs, or a sparse, quantized, nested, meta or complex tensor written by torch.save:
issue 57). Every row runs the real CLI in a process forked from a warm server (`tests/forked_cli.py`)
under a timeout, so a FIFO that blocks fails its row; rows marked `MEMORY` run it in a memory cgroup of
its own (`tests/memory_limit.py`) and assert that it was not killed for memory.
Every row expects exit 1 and one stderr line `nfnzoo import: error: ...` holding the row's substrings.
The free-disk margin has its own test on a small tmpfs.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest
import torch

from dwsnets_inr_fixture import make_mnist_inrs
from memory_limit import GIB
from model_zoos_fixture import make_experiment
from nfn_siren_fixture import make_sirens
from small_cnn_fixture import make_zoo as make_cnn_zoo
from small_transformer_fixture import make_zoo as make_transformer_zoo

TIMEOUT_S = 60
MEMORY = "memory"


@dataclasses.dataclass
class Case:
    tmp: Path

    def out(self) -> str:
        return str(self.tmp / "out")


def _import(case: Case, format: str, source: Path) -> list[str]:
    return ["import", format, str(source), "--out", case.out()]


# --- the releases, written by the fixtures --------------------------------------------------------

def cnn(case: Case) -> Path:
    source = case.tmp / "mnist"
    make_cnn_zoo(source, runs=2, steps=(0, 86), split_file=False)
    return source


def sirens(case: Case) -> Path:
    source = case.tmp / "siren_mnist_wts"
    make_sirens(source, [0, 1])
    return source


def inrs(case: Case) -> Path:
    source = case.tmp / "mnist-inrs"
    make_mnist_inrs(source, {"train": [0, 1], "test": [0]})
    return source


def transformers(case: Case) -> Path:
    source = case.tmp / "mnist_transformer"
    make_transformer_zoo(source, runs=1)
    return source


def model_zoo(case: Case) -> Path:
    return make_experiment(case.tmp, trials=2, epochs=(0, 1))


def _edit_params(root: Path, **changes) -> None:
    for params in root.glob("*/params.json"):
        params.write_text(json.dumps({**json.loads(params.read_text()), **changes}))


def _edit_csv(path: Path, edit: Callable[[pd.DataFrame], pd.DataFrame], **options) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    edit(frame).to_csv(path, index=False, **options)


def _set(column: str, value: str, row: int = 0) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def edit(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[row, column] = value
        return frame
    return edit


# --- architectures declared too large to build ----------------------------------------------------

def siren_wide(case: Case) -> list[str]:
    """480 KB of state dict declaring a 60,000-unit Siren (a 60,000 x 60,000 hidden layer once built)."""
    folder = case.tmp / "siren_mnist_wts" / "randinit_smaller_0s"
    folder.mkdir(parents=True)
    torch.save({"net.0.linear.weight": torch.zeros(60000, 2), "net.0.linear.bias": torch.zeros(60000),
                "net.1.linear.weight": torch.zeros(1), "net.1.linear.bias": torch.zeros(1),
                "net.2.weight": torch.zeros(1, 1), "net.2.bias": torch.zeros(1)}, folder / "net0.pth")
    return _import(case, "nfn-sirens", folder.parent)


def inr_wide(case: Case) -> list[str]:
    folder = case.tmp / "mnist-inrs" / "mnist_png_train_3_0" / "checkpoints"
    folder.mkdir(parents=True)
    torch.save({"seq.0.weight": torch.zeros(60000, 2), "seq.0.bias": torch.zeros(60000),
                "seq.1.weight": torch.zeros(1), "seq.2.weight": torch.zeros(1, 1)}, folder / "model_final.pth")
    return _import(case, "dwsnets-inrs", case.tmp / "mnist-inrs")


def model_zoo_channels(case: Case) -> list[str]:
    root = model_zoo(case)
    _edit_params(root, **{"model::channels_in": 30000000})
    return _import(case, "model-zoos", root)


def transformer_embed(case: Case) -> list[str]:
    root = transformers(case)
    _edit_csv(root / "metadata" / "mnist.csv", _set_all("embed_dim", "40000"))
    return _import(case, "small-transformer-zoo", root)


def transformer_tokens(case: Case) -> list[str]:
    root = transformers(case)
    _edit_csv(root / "metadata" / "mnist.csv",
              lambda f: _set_all("patch_size", "1")(_set_all("image_size", "16000")(f)))
    return _import(case, "small-transformer-zoo", root)


def _set_all(column: str, value: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def edit(frame: pd.DataFrame) -> pd.DataFrame:
        frame[column] = value
        return frame
    return edit


# --- decompression and tables --------------------------------------------------------------------

def _gzip_bomb(path: Path, header: str, row: str, rows_per_member: int, members: int) -> None:
    """A gzip file of `members` identical gzip members (a valid multi-member stream): tiny on disk."""
    member = gzip.compress((row * rows_per_member).encode(), compresslevel=9)
    with open(path, "wb") as handle:
        handle.write(gzip.compress(header.encode()))
        for _ in range(members):
            handle.write(member)


def metrics_bytes_bomb(case: Case) -> list[str]:
    """~10 MB of metrics.csv.gz inflating to 4 GiB (rows of a 10,000-character modeldir)."""
    source = cnn(case)
    columns = pd.read_csv(source / "metrics.csv.gz", nrows=0).columns
    row = ",".join(["m" * 10000 if c == "modeldir" else "0" for c in columns]) + "\n"
    _gzip_bomb(source / "metrics.csv.gz", ",".join(columns) + "\n", row, 100, 4 * 2**30 // (100 * len(row)))
    return _import(case, "small-cnn-zoo", source)


def metrics_rows_bomb(case: Case) -> list[str]:
    """A metrics.csv.gz of 20 million empty rows (each a row of NaN once read)."""
    source = cnn(case)
    columns = pd.read_csv(source / "metrics.csv.gz", nrows=0).columns
    _gzip_bomb(source / "metrics.csv.gz", ",".join(columns) + "\n", "," * (len(columns) - 1) + "\n", 100000, 200)
    return _import(case, "small-cnn-zoo", source)


def sidecar_rows(case: Case) -> list[str]:
    """A 60 MB SIREN sidecar (4 million rows) beside 2 fits."""
    source = sirens(case)
    with open(source / "nfnzoo_metadata.csv", "w") as handle:
        handle.write("path,epoch,seed,learning_rate,psnr,mse,status\n")
        handle.write("".join(f"p{i},0,0,0,0,0,ok\n" for i in range(4_000_000)))
    return _import(case, "nfn-sirens", source)


def wide_header(case: Case) -> list[str]:
    root = transformers(case)
    path = root / "metadata" / "mnist.csv"
    path.write_text(",".join(f"c{i}" for i in range(200_000)) + "\n" + path.read_text())
    return _import(case, "small-transformer-zoo", root)


# --- archives --------------------------------------------------------------------------------------

def _zip_folder(folder: Path, path: Path, method: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", method) as handle:
        for file in sorted(folder.iterdir()):
            handle.write(file, f"mnist/{file.name}")
    return path


def zip_ratio_bomb(case: Case) -> list[str]:
    """A ~300 KB zip whose one member inflates to 300 MiB of zeros."""
    archive = case.tmp / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as handle:
        with handle.open("mnist/weights.npy", "w", force_zip64=True) as member:
            for _ in range(300):
                member.write(bytes(2**20))
    return _import(case, "small-cnn-zoo", archive)


def _patch_zip(archive: Path, local_offset: int, central_offset: int, value: bytes) -> None:
    """Overwrites a field of every member's local header and central directory entry."""
    data = bytearray(archive.read_bytes())
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        start = data.find(signature)
        while start >= 0:
            data[start + offset:start + offset + len(value)] = value
            start = data.find(signature, start + 4)
    archive.write_bytes(bytes(data))


def zip_method_1(case: Case) -> list[str]:
    archive = _zip_folder(cnn(case), case.tmp / "shrunk.zip")
    _patch_zip(archive, 8, 10, (1).to_bytes(2, "little"))  # compression method 1: "shrink"
    return _import(case, "small-cnn-zoo", archive)


def zip_encrypted(case: Case) -> list[str]:
    archive = _zip_folder(cnn(case), case.tmp / "locked.zip")
    _patch_zip(archive, 6, 8, (1).to_bytes(2, "little"))  # general purpose flag bit 0: encrypted
    return _import(case, "small-cnn-zoo", archive)


def tar_xz_damaged(case: Case) -> list[str]:
    source = cnn(case)
    archive = case.tmp / "mnist.tar.xz"
    with tarfile.open(archive, "w:xz") as handle:
        handle.add(source, arcname="mnist")
    data = bytearray(archive.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)
    archive.write_bytes(bytes(data))
    return _import(case, "small-cnn-zoo", archive)


def tar_gz_declared_10gib(case: Case) -> list[str]:
    """A 200-byte .tar.gz whose one member's header declares 10 GiB: refused at the header, before its data."""
    header = tarfile.TarInfo("mnist/weights.npy")
    header.size = 10 * 2**30
    archive = case.tmp / "declared.tar.gz"
    archive.write_bytes(gzip.compress(header.tobuf(format=tarfile.GNU_FORMAT) + bytes(2**16)))
    return _import(case, "small-cnn-zoo", archive)


# --- not regular files --------------------------------------------------------------------------

def _fifo_for(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def fifo_weights(case: Case) -> list[str]:
    source = cnn(case)
    _fifo_for(source / "weights.npy")
    return _import(case, "small-cnn-zoo", source)


def fifo_metrics(case: Case) -> list[str]:
    source = cnn(case)
    _fifo_for(source / "metrics.csv.gz")
    return _import(case, "small-cnn-zoo", source)


def fifo_pth(case: Case) -> list[str]:
    source = sirens(case)
    _fifo_for(source / "randinit_smaller_1s" / "net1.pth")
    return _import(case, "nfn-sirens", source)


def fifo_transformer_checkpoint(case: Case) -> list[str]:
    root = transformers(case)
    _fifo_for(sorted((root / "mnist").glob("*.pt"))[1])
    return _import(case, "small-transformer-zoo", root)


def fifo_params(case: Case) -> list[str]:
    root = model_zoo(case)
    _fifo_for(sorted(root.glob("*/result.json"))[0])
    return _import(case, "model-zoos", root)


def link_pth(case: Case) -> list[str]:
    source = sirens(case)
    target = source / "randinit_smaller_1s" / "net1.pth"
    shutil.move(target, case.tmp / "elsewhere.pth")
    target.symlink_to(case.tmp / "elsewhere.pth")
    return _import(case, "nfn-sirens", source)


# --- values a file declares that used to end in a traceback ---------------------------------------

def cnn_duplicate_rows(case: Case) -> list[str]:
    source = cnn(case)
    weights = np.load(source / "weights.npy")
    np.save(source / "weights.npy", np.concatenate([weights, weights[:1]]))
    frame = pd.read_csv(source / "metrics.csv.gz")
    pd.concat([frame, frame.iloc[:1]]).to_csv(source / "metrics.csv.gz", index=False, compression="gzip")
    return _import(case, "small-cnn-zoo", source)


def transformer_duplicate_rows(case: Case) -> list[str]:
    root = transformers(case)
    _edit_csv(root / "metadata" / "mnist.csv", lambda frame: pd.concat([frame, frame.iloc[:1]]))
    return _import(case, "small-transformer-zoo", root)


def _edit_layout(case: Case, line: int, text: str) -> list[str]:
    source = cnn(case)
    lines = (source / "layout.csv").read_text().splitlines()
    lines[line] = text
    (source / "layout.csv").write_text("\n".join(lines) + "\n")
    return _import(case, "small-cnn-zoo", source)


def cnn_metric(column: str, value: str, others: str | None = None) -> Callable[[Case], list[str]]:
    """Row 0's `column` set to `value` (and every other row's to `others`: an integer column is read as
    Python ints once one is too large for 64 bits)."""
    def build(case: Case) -> list[str]:
        source = cnn(case)
        edit = _set(column, value)
        _edit_csv(source / "metrics.csv.gz", edit if others is None else lambda f: edit(_set_all(column, others)(f)),
                  compression="gzip")
        return _import(case, "small-cnn-zoo", source)
    return build


def model_zoo_seed(case: Case) -> list[str]:
    root = model_zoo(case)
    _edit_params(root, seed=2**64 + 5)
    return _import(case, "model-zoos", root)


def model_zoo_metric(case: Case) -> list[str]:
    root = model_zoo(case)
    result = sorted(root.glob("*/result.json"))[0]
    lines = [json.loads(line) for line in result.read_text().splitlines()]
    lines[0]["test_loss"] = int("9" * 400)
    result.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return _import(case, "model-zoos", root)


def model_zoo_no_checkpoints(case: Case) -> list[str]:
    root = model_zoo(case)
    for folder in root.glob("*/checkpoint_*"):
        shutil.rmtree(folder)
    return _import(case, "model-zoos", root)


def siren_int_for_tensor(case: Case) -> list[str]:
    folder = case.tmp / "siren_mnist_wts" / "randinit_smaller_0s"
    folder.mkdir(parents=True)
    torch.save({"net.0.linear.weight": 5, "net.0.linear.bias": torch.zeros(32), "net.1.linear.weight":
                torch.zeros(32, 32), "net.1.linear.bias": torch.zeros(32), "net.2.weight": 7, "net.2.bias": 0},
               folder / "net0.pth")
    return _import(case, "nfn-sirens", folder.parent)


def siren_later_int_for_tensor(case: Case) -> list[str]:
    source = sirens(case)
    path = source / "randinit_smaller_1s" / "net1.pth"
    state = torch.load(path)
    state["net.1.linear.weight"] = 3
    torch.save(state, path)
    return _import(case, "nfn-sirens", source)


def siren_huge_index(case: Case) -> list[str]:
    source = sirens(case)
    shutil.move(source / "randinit_smaller_1s" / "net1.pth", source / "randinit_smaller_1s" / f"net{'9' * 240}.pth")
    return _import(case, "nfn-sirens", source)


# --- tensors torch.save writes that no float32 array holds as they are (sparse, quantized, nested, meta, complex)

NOT_DENSE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sparse_coo": lambda t: t.to_sparse(), "sparse_csr": lambda t: t.to_sparse_csr(),
    "sparse_csc": lambda t: t.to_sparse_csc(), "sparse_bsr": lambda t: t.to_sparse_bsr((2, 2)),
    "sparse_bsc": lambda t: t.to_sparse_bsc((2, 2)),
    "quantized": lambda t: torch.quantize_per_tensor(t, 0.1, 0, torch.qint8),
    "nested": lambda t: torch.nested.nested_tensor(list(t)),  # a list of rows, as nested_tensor takes them
    "meta": lambda t: torch.empty(t.shape, device="meta"),
    "complex": lambda t: t.to(torch.complex64)}


def _rewrite(path: Path, key: str, kind: str) -> None:
    """Replaces `key` of the state dict at `path` by its `kind` form (`NOT_DENSE`), saved with the real torch.save."""
    state = torch.load(path, weights_only=True)
    with warnings.catch_warnings():  # torch's notes on making them (prototype, deprecated)
        warnings.simplefilter("ignore", UserWarning)
        state[key] = NOT_DENSE[kind](state[key].detach().clone())
    torch.save(state, path)


def not_dense(format: str, kind: str) -> Callable[[Case], list[str]]:
    """A release whose one checkpoint holds a `kind` tensor: in nfn-sirens the second file (after the first has set
    the architecture), in each other importer the checkpoint it reads first or next."""
    def build(case: Case) -> list[str]:
        if format == "nfn-sirens":
            source = sirens(case)
            _rewrite(source / "randinit_smaller_1s" / "net1.pth", "net.1.linear.weight", kind)
        elif format == "dwsnets-inrs":
            source = inrs(case)
            _rewrite(sorted(source.glob("mnist_png_*/checkpoints/model_final.pth"))[0], "seq.0.weight", kind)
        elif format == "small-transformer-zoo":
            source = transformers(case)
            _rewrite(sorted((source / "mnist").glob("*.pt"))[0], "encoder.0.fc1.weight", kind)
        else:
            source = model_zoo(case)
            _rewrite(sorted(source.glob("*/checkpoint_000001/checkpoints"))[0], "module_list.0.weight", kind)
        return _import(case, format, source)
    return build


def transformer_epoch(case: Case) -> list[str]:
    root = transformers(case)
    _edit_csv(root / "metadata" / "mnist.csv", _set("ckpt_epoch", "seventy-five", 2))
    return _import(case, "small-transformer-zoo", root)


def transformer_seed(case: Case) -> list[str]:
    root = transformers(case)
    _edit_csv(root / "metadata" / "mnist.csv", _set("seed", str(2**64 + 5), 1))
    return _import(case, "small-transformer-zoo", root)


ROWS: list[tuple[str, Callable[[Case], list[str]], list[str], str | None]] = [
    # (id, builder, what the one line holds, MEMORY where the row runs under a memory limit)
    ("siren-60000-units", siren_wide, ["net0.pth", "hidden_features 60000 is outside"], MEMORY),
    ("dwsnets-60000-units", inr_wide, ["model_final.pth", "hidden_features 60000 is outside"], MEMORY),
    ("model-zoos-30M-channels", model_zoo_channels, ["params.json", "model::channels_in 30000000 is outside"], MEMORY),
    ("transformer-embed-40000", transformer_embed, ["mnist.csv", "embed_dim 40000 is outside"], MEMORY),
    ("transformer-256M-tokens", transformer_tokens, ["mnist.csv", "tokens"], MEMORY),
    ("metrics-gzip-4GiB", metrics_bytes_bomb, ["metrics.csv.gz", "bytes of text (decompressed)"], MEMORY),
    ("metrics-gzip-20M-rows", metrics_rows_bomb, ["metrics.csv.gz", "rows"], MEMORY),
    ("siren-1e9-augmentations", lambda case: [*_import(case, "nfn-sirens", sirens(case)), "--augmentations",
                                              "1000000000"], ["--augmentations 1000000000", "expected 0..1,000"],
     MEMORY),
    ("siren-sidecar-4M-rows", sidecar_rows, ["nfnzoo_metadata.csv", "more than 2 rows"], MEMORY),
    ("csv-200000-columns", wide_header, ["mnist.csv", "header line longer"], None),
    ("zip-bomb-ratio", zip_ratio_bomb, ["bomb.zip", "mnist/weights.npy", "compression bomb"], MEMORY),
    ("zip-method-1", zip_method_1, ["shrunk.zip", "mnist/", "method 1"], None),
    ("zip-encrypted", zip_encrypted, ["locked.zip", "mnist/", "encrypted"], None),
    ("tar-gz-declares-10GiB", tar_gz_declared_10gib, ["declared.tar.gz", "mnist/weights.npy", "compression bomb"],
     None),
    ("tar-xz-damaged", tar_xz_damaged, ["mnist.tar.xz", "not a readable archive"], None),
    ("fifo-weights-npy", fifo_weights, ["weights.npy", "not a regular file"], None),
    ("fifo-metrics", fifo_metrics, ["metrics.csv.gz", "not a regular file"], None),
    ("fifo-pth", fifo_pth, ["net1.pth", "not a regular file"], None),
    ("fifo-transformer-pt", fifo_transformer_checkpoint, [".pt", "not a regular file"], None),
    ("fifo-result-json", fifo_params, ["result.json", "not a regular file"], None),
    ("link-pth", link_pth, ["net1.pth", "is a symbolic link inside the import source"], None),
    ("cnn-duplicate-modeldir-step", cnn_duplicate_rows, ["metrics.csv.gz", "rows 0 and 4", "appears once"], None),
    ("transformer-duplicate-rows", transformer_duplicate_rows, ["mnist.csv", "rows 0 and 5", "appears once"], None),
    ("layout-5000-digit-shape", lambda case: _edit_layout(case, 1, f'sequential/conv2d/bias:0,0,16,"({"9" * 5000},)"'),
     ["layout.csv", "line 2", "shape", "beyond 64 bits"], None),
    ("layout-short-row", lambda case: _edit_layout(case, 1, "sequential/conv2d/bias:0"), ["layout.csv", "line 2"],
     None),
    ("layout-huge-index", lambda case: _edit_layout(case, 1, f'sequential/conv2d/bias:0,0,{10**19},"(16,)"'),
     ["layout.csv", "line 2", "beyond 64 bits"], None),
    ("cnn-step-1e19", cnn_metric("step", str(10**19)), ["metrics.csv.gz", "step", "beyond 64 bits"], None),
    ("cnn-seed-2^64+5", cnn_metric("config.random_seed", str(2**64 + 5)), ["metrics.csv.gz", "beyond 64 bits"], None),
    ("cnn-400-digit-metric", cnn_metric("test_loss", "9" * 400, "1"), ["weights.npy", "test_loss", "not a number"],
     None),
    ("model-zoos-seed-2^64+5", model_zoo_seed, ["params.json", "seed", "beyond 64 bits"], None),
    ("model-zoos-400-digit-metric", model_zoo_metric, ["result.json", "test_loss", "not a number"], None),
    ("model-zoos-no-checkpoints", model_zoo_no_checkpoints, ["tune_zoo_mnist", "no checkpoints"], None),
    ("siren-int-for-tensor", siren_int_for_tensor, ["net0.pth", "net.0.linear.weight is a int"], None),
    ("siren-int-for-tensor-later", siren_later_int_for_tensor, ["net1.pth", "net.1.linear.weight"], None),
    ("siren-240-digit-index", siren_huge_index, [".pth", "expected net<index>.pth"], None),
    ("transformer-bad-epoch", transformer_epoch, ["mnist.csv", "row 2", "seventy-five"], None),
    ("transformer-seed-2^64+5", transformer_seed, ["mnist.csv", "row 1", "seed", "beyond 64 bits"], None),
    *[(f"{format}-{kind}-tensor", not_dense(format, kind), [key, f"is a {kind} tensor", "expected a dense tensor"],
       None)
      for format, kind, key in [
          ("nfn-sirens", "sparse_coo", "net.1.linear.weight"), ("nfn-sirens", "sparse_csr", "net.1.linear.weight"),
          ("nfn-sirens", "sparse_csc", "net.1.linear.weight"), ("nfn-sirens", "sparse_bsr", "net.1.linear.weight"),
          ("nfn-sirens", "sparse_bsc", "net.1.linear.weight"), ("nfn-sirens", "quantized", "net.1.linear.weight"),
          ("nfn-sirens", "nested", "net.1.linear.weight"), ("nfn-sirens", "meta", "net.1.linear.weight"),
          ("nfn-sirens", "complex", "net.1.linear.weight"),
          ("dwsnets-inrs", "sparse_coo", "seq.0.weight"), ("dwsnets-inrs", "quantized", "seq.0.weight"),
          ("small-transformer-zoo", "sparse_csr", "encoder.0.fc1.weight"),
          ("small-transformer-zoo", "meta", "encoder.0.fc1.weight"),
          ("model-zoos", "nested", "module_list.0.weight"), ("model-zoos", "sparse_coo", "module_list.0.weight")]],
]


def _environment(tmp: Path) -> dict[str, str]:
    home = tmp / "hf_home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home),
            "HF_HUB_CACHE": str(home / "hub"), "RAY_AUTH_MODE": "disabled", "PYTHONWARNINGS": "ignore"}


def _run(argv: list[str], tmp_path: Path, memory: bool, cli) -> tuple[int | None, str]:
    working = tmp_path / "cwd"  # empty: a `zoo` folder in the working directory would shadow the package
    working.mkdir()
    if memory:
        result = cli.run_limited(argv, cwd=working, env=_environment(tmp_path), timeout=180, limit_bytes=2 * GIB)
        assert not result.oom_killed, result.describe()
        assert result.returncode is not None, f"no answer within the timeout: {result.describe()}"
        return result.returncode, result.stderr
    try:
        done = cli.run(argv, cwd=working, env=_environment(tmp_path), timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nfnzoo {' '.join(a[:80] for a in argv)} did not answer within {TIMEOUT_S} s (blocked?)")
    return done.returncode, done.stderr


@pytest.mark.parametrize(("builder", "expected", "kind"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_a_hostile_release_is_one_line_naming_the_file(builder, expected, kind, tmp_path, cli):
    case = Case(tmp_path / "case")
    case.tmp.mkdir()
    argv = builder(case)
    code, stderr = _run(argv, tmp_path, kind == MEMORY, cli)
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfnzoo import: error: "), stderr[-3000:]
    assert len(lines[0]) <= 2000, lines[0][:300]
    for text in expected:
        assert text in lines[0], f"{text!r} not in: {lines[0][:1000]}"
    assert code == 1, (code, lines[0][:500])
    out = Path(case.out())
    assert not (out / "manifest.json").exists() and not list(out.rglob("*.parquet"))  # nothing was imported
    assert not [p for p in case.tmp.iterdir() if ".unpack-" in p.name]  # the scratch folder went


def test_a_dense_copy_of_a_refused_tensor_imports(tmp_path, cli):
    """The negative control of the not-dense rows: the same file rewritten by the same torch.save with the tensor
    made dense again imports, so what is refused is the layout, not a rewritten checkpoint."""
    case = Case(tmp_path / "case")
    case.tmp.mkdir()
    argv = not_dense("nfn-sirens", "sparse_coo")(case)
    path = case.tmp / "siren_mnist_wts" / "randinit_smaller_1s" / "net1.pth"
    with warnings.catch_warnings():  # torch's note that it validates the sparse tensor
        warnings.simplefilter("ignore", UserWarning)
        state = torch.load(path, weights_only=True)
    assert state["net.1.linear.weight"].layout == torch.sparse_coo
    state["net.1.linear.weight"] = state["net.1.linear.weight"].to_dense()
    torch.save(state, path)
    code, stderr = _run(argv, tmp_path, False, cli)
    assert code == 0, stderr[-3000:]
    assert (Path(case.out()) / "manifest.json").exists()


def test_a_sparse_tensor_is_one_line_with_warnings_shown(tmp_path):
    """The rows above run with Python's warnings off; a user's are on, and torch warns as it loads a sparse tensor
    (it validates its invariants): the refusal is still the only line (a fresh `python -m zoo.cli`)."""
    case = Case(tmp_path / "case")
    case.tmp.mkdir()
    argv = not_dense("nfn-sirens", "sparse_coo")(case)
    env = {key: value for key, value in _environment(tmp_path).items() if key != "PYTHONWARNINGS"}
    done = subprocess.run([sys.executable, "-P", "-m", "zoo.cli", *argv], capture_output=True, text=True, env=env,
                          cwd=case.tmp, timeout=TIMEOUT_S)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("nfnzoo import: error: ") and "is a sparse_coo tensor" in lines[0], lines[0]


def test_the_arithmetic_parameter_counts_are_the_families_own():
    """The counts the importers check before building (nothing built) equal the built weight spaces'."""
    from zoo.families import create_family
    from zoo.imports.model_zoos import MODEL_TYPES, _architecture, pooled_cnn_parameters
    from zoo.imports.nfn_sirens import siren_parameters
    from zoo.imports.small_transformer_zoo import _architecture as transformer_architecture
    from zoo.imports.small_transformer_zoo import transformer_parameters

    for model_type in MODEL_TYPES:
        for channels in (1, 3):
            _, architecture = _architecture([("t", {"model::type": model_type, "model::channels_in": channels})],
                                            Path("root"), "mnist")
            assert (pooled_cnn_parameters(channels, MODEL_TYPES[model_type])
                    == create_family("pooled_cnn").weight_space(architecture).num_params)
    for flags in ({"n_channels": 1, "image_size": 28, "patch_size": 4, "embed_dim": 32, "n_attention_heads": 2,
                   "forward_mul": 2, "n_layers": 2, "n_classes": 10},
                  {"n_channels": 3, "image_size": 32, "patch_size": 8, "embed_dim": 48, "n_attention_heads": 4,
                   "forward_mul": 3, "n_layers": 3, "n_classes": 7}):
        architecture = transformer_architecture(pd.DataFrame([flags]), Path("flags.csv"))
        assert transformer_parameters(flags) == create_family("transformer").weight_space(architecture).num_params
    for hidden, layers, out in ((32, 2, 1), (16, 3, 3)):
        architecture = {"in_features": 2, "hidden_features": hidden, "num_sine_layers": layers, "out_features": out,
                        "image_size": 28, "first_omega_0": 30.0, "hidden_omega_0": 30.0}
        assert siren_parameters(2, hidden, layers, out) == create_family("inr").weight_space(architecture).num_params


@pytest.fixture
def small_disk(tmp_path):
    """A 128 MiB tmpfs (mounted here, unmounted after), so that the free disk is known and small."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()[:200]}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def _stored_zip(path: Path, size: int) -> Path:
    """A stored (uncompressed) zip of one member of `size` zero bytes: its ratio is 1."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as handle:
        with handle.open("mnist/weights.npy", "w", force_zip64=True) as member:
            for start in range(0, size, 2**22):
                member.write(bytes(min(2**22, size - start)))
    return path


def test_an_archive_that_leaves_too_little_disk_is_refused_before_unpacking(small_disk, tmp_path, capsys):
    """Unpacking to exactly the free disk, or to just under it, was accepted (only `total > free` was refused);
    the import also needs room for the shards it writes and a margin (`zoo.validation.bounds`)."""
    from zoo.cli import main

    out = small_disk / "out"
    free = shutil.disk_usage(small_disk).free
    for size in (free, free - 2**20):
        archive = _stored_zip(tmp_path / f"zoo-{size}.zip", size)
        assert main(["import", "small-cnn-zoo", str(archive), "--out", str(out)]) == 1
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and archive.name in error and "bytes free" in error, error
        assert not any(small_disk.iterdir()), sorted(small_disk.iterdir())  # nothing unpacked, no scratch left
        archive.unlink()
    archive = _stored_zip(tmp_path / "fits.zip", 4 * 2**20)  # fits: unpacked, then refused for its content
    assert main(["import", "small-cnn-zoo", str(archive), "--out", str(out)]) == 1
    error = capsys.readouterr().err.strip()
    assert "bytes free" not in error and "weights.npy" in error, error
    assert not [p for p in small_disk.iterdir() if ".unpack-" in p.name]


def test_a_member_is_counted_as_it_is_written(tmp_path):
    """The copy that unpacks a member stops at its declared size, whatever the stream holds."""
    from zoo.imports.archive import _copy
    from zoo.validation.inputs import InputError

    with pytest.raises(InputError, match=r"lying.zip: member 'mnist/x' holds more than the 10 bytes"):
        _copy(io.BytesIO(bytes(11)), tmp_path / "x", 10, Path("lying.zip"), "mnist/x")
    assert _copy(io.BytesIO(bytes(10)), tmp_path / "y", 10, Path("fine.zip"), "mnist/y") == 10
