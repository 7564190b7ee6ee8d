"""`zoo.reader.read_zoo` is the one entry point that reads a zoo's rows for a run, and nothing above
`zoo/` reads a manifest key."""

import ast
from pathlib import Path

import numpy as np
import pytest

from zoo.loader import dataset_hash, load_split
from zoo.reader import DEFAULT_SPLITS, SPLITS, config_source, config_sources, read_zoo

REPO = Path(__file__).resolve().parents[2]


def test_read_zoo_returns_the_splits_and_the_hash_they_were_checked_against(tiny_zoo):
    read = read_zoo(tiny_zoo)
    assert set(read.splits) == set(SPLITS) and read.split_set == DEFAULT_SPLITS and read.split_set_sha256 is None
    assert read.dataset_hash == dataset_hash(tiny_zoo, read.config)
    assert read.family == "cnn" and read.repo is None and read.revision is None
    assert read.source is not None and read.source.startswith("regenerated from spec ")
    test = load_split(tiny_zoo, read.config, "test")
    assert read.splits["test"].metadata["model_id"].tolist() == test.metadata["model_id"].tolist()
    assert read.splits["test"].weights.space == test.weights.space
    for ours, theirs in zip(read.splits["test"].weights.tensors, test.weights.tensors, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_keep_narrows_each_split_before_its_weights_are_decoded(tiny_zoo):
    def first_two(split, metadata):
        return np.arange(len(metadata)) < 2

    read = read_zoo(tiny_zoo, keep=first_two)
    assert all(len(split) == 2 for split in read.splits.values())


def test_a_missing_folder_and_an_unknown_config_are_one_clear_error(tiny_zoo, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist; generate or download a zoo first"):
        read_zoo(tmp_path / "nothing-here")
    with pytest.raises(ValueError, match="has no config 'elsewhere'"):
        read_zoo(tiny_zoo, "elsewhere")


@pytest.mark.parametrize("record, repo, expected", [
    ({"spec": {"name": "cnn-mnist", "profile": "suite-v2"}}, None, "regenerated from spec cnn-mnist (suite-v2)"),
    ({"spec": {"name": "cnn-mnist"}}, None, "regenerated from spec cnn-mnist (full)"),
    ({"imported": {"url": "https://example.org/zoo"}, "spec": {"name": "x"}}, None,
     "imported from https://example.org/zoo"),
    ({"spec": {"name": "x"}}, ("org/zoo", "a" * 40), "org/zoo@" + "a" * 40),
    ({"spec": "not a record"}, None, None),
])
def test_the_source_says_how_anyone_gets_the_bytes(record, repo, expected):
    repo, revision = repo or (None, None)
    assert config_source(record, repo, revision) == expected
    assert len(config_sources(record)) == sum(key in record and isinstance(record[key], dict)
                                              for key in ("spec", "imported"))


def _manifest_reads(source: str) -> list[str]:
    """The manifest reads in a module's source: `read_manifest` imported from zoo, or a `["configs"]` key."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("zoo") and \
                any(alias.name == "read_manifest" for alias in node.names):
            found.append(f"imports read_manifest from {node.module}")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "configs":
            found.append(f"line {node.lineno}: a manifest's ['configs']")
    return found


def test_no_module_above_zoo_reads_a_manifest_key():
    problems = {str(path.relative_to(REPO)): found for package in ("benchmarks", "leaderboards")
                for path in sorted((REPO / package).rglob("*.py"))
                if (found := _manifest_reads(path.read_text(encoding="utf-8")))}
    assert problems == {}


def test_the_manifest_check_can_fail():
    assert _manifest_reads("from zoo.storage.folder import read_manifest\n") == [
        "imports read_manifest from zoo.storage.folder"]
    assert _manifest_reads("entry = manifest['configs'][config]\n") == ["line 1: a manifest's ['configs']"]
    assert _manifest_reads("from benchmarks.standard import read_manifest\n") == []  # a suite folder's own file


def _opens(folder: Path, script: str, tmp_path: Path) -> dict[str, int]:
    """How many times `script` (Python run in a child under strace) opened each file of `folder`."""
    import subprocess
    import sys

    log = tmp_path / "strace.log"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(log), sys.executable, "-c", script],
                   check=True, cwd=REPO, timeout=300)
    counts: dict[str, int] = {}
    for line in log.read_text().splitlines():
        if " = -1 " in line or str(folder) not in line:  # a failed open, or another file
            continue
        name = line.split('"')[1].removeprefix(f"{folder}/")
        counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.mark.skipif(__import__("shutil").which("strace") is None, reason="strace is not installed")
def test_a_read_parses_the_manifest_once_and_opens_each_shard_once(tiny_zoo, tmp_path):
    """Counted by the system calls themselves: Arrow's own opens included. The negative control is
    a reader that goes back to the folder per split (`load_split` three times, then the hash)."""
    once = _opens(tiny_zoo, f"from zoo.reader import read_zoo; read_zoo({str(tiny_zoo)!r})", tmp_path)
    shards = [name for name in once if name.endswith(".parquet")]
    assert once.get("manifest.json") == 1 and len(shards) >= 3, once
    assert all(once[name] == 1 for name in shards), once
    per_split = _opens(tiny_zoo, "from zoo.loader import load_split; from zoo.storage.integrity import "
                       f"verified_dataset_hash as v; [load_split({str(tiny_zoo)!r}, None, s) for s in "
                       f"('train', 'validation', 'test')]; v({str(tiny_zoo)!r})", tmp_path)
    assert per_split.get("manifest.json") == 4 and all(per_split[name] >= 2 for name in shards), per_split
