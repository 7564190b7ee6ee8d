"""One link rule for every importer: a symbolic link inside an import source is refused in one line naming it
(issue 57, point 4; the rule is `zoo.imports.reading`'s docstring).

One table: each row writes a release with the importer's fixture (`tests/zoo/*_fixture.py`), moves one thing the
importer reads (a file, a folder it lists, a folder on the way to a file) into a folder outside the source and
leaves a link to it in its place, then runs the real CLI (`cli`, forked from a warm server). Expected: exit 1,
one stderr line naming the link as a symbolic link, nothing written to --out, and the outside folder neither
changed nor read: its files' access times are set in the past first and must stay there (asserted where the file
system records reads, which a probe file checks; every row's outside folder holds a file the importer would
read). The negative controls: every release imports when the source folder itself is a link (the user named it),
so what each link led to was importable and the refusal is the link's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dwsnets_inr_fixture import make_fmnist_inrs, make_mnist_inrs, write_splits
from model_zoos_fixture import make_experiment
from nfn_siren_fixture import make_sirens
from small_cnn_fixture import make_zoo as make_cnn_zoo
from small_transformer_fixture import make_zoo as make_transformer_zoo

TIMEOUT_S = 60
PAST_NS = 10**9  # an access time of 1 s after the epoch: older than any write, so a read moves it (relatime too)


# --- the releases, written by the fixtures: (format, source) ------------------------------------------

def cnn(parent: Path) -> tuple[str, Path]:
    source = parent / "mnist"
    make_cnn_zoo(source, runs=2, steps=(0, 86))  # with nfn_split.csv
    (source / "nfnzoo_evaluation.json").write_text(json.dumps({"dataset": {"name": "mnist", "validation_size": 0}}))
    return "small-cnn-zoo", source


def sirens(parent: Path) -> tuple[str, Path]:
    source = parent / "siren_mnist_wts"
    make_sirens(source, [0, 1])
    (source / "nfnzoo_metadata.csv").write_text("path,epoch,seed,learning_rate,psnr,mse,status\n"
                                                "randinit_smaller_0s/net0.pth,5,1,0.001,30.0,0.001,ok\n"
                                                "randinit_smaller_1s/net1.pth,5,2,0.001,31.0,0.001,ok\n")
    return "nfn-sirens", source


def mnist_inrs(parent: Path) -> tuple[str, Path]:
    source = parent / "mnist-inrs"
    written = make_mnist_inrs(source, {"train": [0, 1, 2], "test": [0]})
    train = sorted(p for p in written if "_train_" in p)
    write_splits(source / "mnist_splits.json", {"train": train[:2], "val": train[2:],
                                                "test": sorted(p for p in written if "_test_" in p)},
                 {p: label for p, (label, _) in written.items()}, "")
    return "dwsnets-inrs", source


def fmnist_inrs(parent: Path) -> tuple[str, Path]:
    source = parent / "fmnist_inrs"
    make_fmnist_inrs(source, {"train": [0, 1], "test": [0]})
    return "dwsnets-inrs", source


def transformers(parent: Path) -> tuple[str, Path]:
    source = parent / "mnist_transformer"
    make_transformer_zoo(source, runs=1)
    return "small-transformer-zoo", source


def model_zoos(parent: Path) -> tuple[str, Path]:
    return "model-zoos", make_experiment(parent, trials=2, epochs=(0, 1))


RELEASES = {"cnn": cnn, "sirens": sirens, "mnist-inrs": mnist_inrs, "fmnist-inrs": fmnist_inrs,
            "transformers": transformers, "model-zoos": model_zoos}

# (release, what is moved outside and linked to: a glob below the source, its first match), at each place the
# importer lists or opens
ROWS = [
    ("cnn", "weights.npy"), ("cnn", "metrics.csv.gz"), ("cnn", "layout.csv"), ("cnn", "nfn_split.csv"),
    ("cnn", "nfnzoo_evaluation.json"),
    ("sirens", "randinit_smaller_1s"), ("sirens", "randinit_smaller_1s/net1.pth"), ("sirens", "nfnzoo_metadata.csv"),
    ("mnist-inrs", "mnist_png_train_7_1"),  # the folder DWSNets' importer followed (issue 57)
    ("mnist-inrs", "mnist_png_train_7_1/checkpoints"),
    ("mnist-inrs", "mnist_png_train_7_1/checkpoints/model_final.pth"),
    ("mnist-inrs", "mnist_splits.json"),
    ("fmnist-inrs", "train"), ("fmnist-inrs", "train/model_1.pth"),
    ("transformers", "metadata"), ("transformers", "metadata/mnist.csv"), ("transformers", "mnist"),
    ("transformers", "mnist/*_75_*.pt"),
    ("model-zoos", "NN_tune_*_00001_*"), ("model-zoos", "NN_tune_*_00001_*/params.json"),
    ("model-zoos", "NN_tune_*_00001_*/result.json"), ("model-zoos", "NN_tune_*_00001_*/checkpoint_000001"),
    ("model-zoos", "NN_tune_*_00001_*/checkpoint_000001/checkpoints"),
]


# --- running the CLI, and what it leaves --------------------------------------------------------------

def _run(cli, tmp_path: Path, format: str, source: Path, out: Path) -> tuple[int, str]:
    working = tmp_path / "cwd"  # empty: a `zoo` folder in the working directory would shadow the package
    working.mkdir(exist_ok=True)
    home = tmp_path / "hf_home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home),
           "HF_HUB_CACHE": str(home / "hub"), "RAY_AUTH_MODE": "disabled", "PYTHONWARNINGS": "ignore"}
    try:
        done = cli.run(["import", format, str(source), "--out", str(out)], cwd=working, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nfnzoo import {format} did not answer within {TIMEOUT_S} s")
    return done.returncode, done.stderr


def _contents(folder: Path) -> dict[str, tuple]:
    """Every path below `folder` -> (kind, size, mtime, sha256 of a file's bytes)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        status = os.lstat(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        found[path.relative_to(folder).as_posix()] = (path.is_dir(), status.st_size, status.st_mtime_ns, digest)
    return found


def _age(paths: list[Path]) -> None:
    """Sets each path's access time in the past (listing a folder is a read: list first, then call this)."""
    for path in paths:
        os.utime(path, ns=(PAST_NS, os.lstat(path).st_mtime_ns), follow_symlinks=False)


def _records_reads(tmp_path: Path) -> bool:
    """Whether this file system moves an old access time on a read (relatime or strictatime; not noatime)."""
    probe = tmp_path / "atime-probe"
    probe.write_bytes(b"probe")
    _age([probe])
    probe.read_bytes()
    return os.stat(probe).st_atime_ns != PAST_NS


def _plant_link(source: Path, pattern: str, away: Path) -> Path:
    """Moves the first match of `pattern` below `source` to `away` and leaves a link to it in its place."""
    planted = sorted(source.glob(pattern))[0]
    away.mkdir(parents=True)
    target = away / planted.name
    shutil.move(planted, target)
    planted.symlink_to(target, target_is_directory=target.is_dir())
    return planted


def _refused(code: int, stderr: str, planted: Path, out: Path) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfnzoo import: error: "), stderr[-3000:]
    assert str(planted) in lines[0] and "symbolic link" in lines[0], lines[0]
    assert code == 1, (code, lines[0])
    assert not (out / "manifest.json").exists() and not list(out.rglob("*.parquet")), sorted(out.rglob("*"))
    return lines[0]


# --- the rule ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("release", "pattern"), ROWS, ids=[f"{r}:{p}" for r, p in ROWS])
def test_a_link_inside_the_source_is_one_line_naming_it(release, pattern, tmp_path, cli):
    format, source = RELEASES[release](tmp_path / "release")
    outside = tmp_path / "outside"
    planted = _plant_link(source, pattern, outside / "elsewhere")
    before = _contents(outside)
    reads_seen = _records_reads(tmp_path)
    paths = [outside, *outside.rglob("*")]
    _age(paths)
    out = tmp_path / "out"
    code, stderr = _run(cli, tmp_path, format, source, out)
    if reads_seen:  # no file outside was read through the link (its folders' times are left out: anything
        # walking the temporary folder, this session's or another's, lists them)
        read = [p.relative_to(outside).as_posix() for p in paths
                if p.is_file() and os.lstat(p).st_atime_ns != PAST_NS]
        assert not read, f"read through the link: {read}"
    _refused(code, stderr, planted, out)
    assert _contents(outside) == before  # nothing outside was written, renamed or removed


def test_a_link_that_stays_inside_the_source_is_refused_too(tmp_path, cli):
    """The rule does not resolve a link to tell inside from outside (zoo.imports.reading): one to a file in the
    source itself is refused the same way."""
    format, source = sirens(tmp_path / "release")
    planted = _plant_link(source, "randinit_smaller_1s/net1.pth", source / "spare")
    out = tmp_path / "out"
    _refused(*_run(cli, tmp_path, format, source, out), planted, out)


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_a_source_that_is_itself_a_link_imports(release, tmp_path, cli):
    """The negative control: the root is the user's to name, a link or not, and each release imports whole (so what
    the table's links led to was importable)."""
    format, source = RELEASES[release](tmp_path / "release")
    named = tmp_path / "named" / source.name  # the same name: nfn-sirens and model-zoos read the data set from it
    named.parent.mkdir()
    named.symlink_to(source, target_is_directory=True)
    out = tmp_path / "out"
    code, stderr = _run(cli, tmp_path, format, named, out)
    assert code == 0, stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    (entry,) = manifest["configs"].values()
    assert entry["packed_checkpoints"] >= 2 and list(out.rglob("*.parquet"))
