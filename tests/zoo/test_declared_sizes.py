"""Sizes a spec, a shard or a staged file declares are bounded before anything is built or read (issue 48).

Each bomb runs the real CLI (forked from a warm server, `tests/forked_cli.py`) in a memory cgroup of
its own (`tests/memory_limit.py`), so a regression that
builds the declared member, lists a ten-million-run plan or decodes a declared column fails its
test instead of the machine.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from memory_limit import GIB, run_limited
from zoo.families import create_family
from zoo.planning.estimate import estimate
from zoo.planning.plan import plan_runs
from zoo.planning.plan_size import plan_size
from zoo.planning.spec import load_spec
from zoo.planning.spec_files import SPECS_DIR


def _environment(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "hf_home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home),
            "RAY_AUTH_MODE": "disabled"}


def _nfnzoo(cli, tmp_path: Path, *argv: str, limit: int = 2 * GIB, timeout: float = 120):
    working = tmp_path / "cwd"  # empty: a `zoo` folder in the working directory would shadow the package
    working.mkdir(exist_ok=True)
    return cli.run_limited(list(argv), cwd=working, env=_environment(tmp_path), timeout=timeout, limit_bytes=limit)


def _one_error_line(result, command: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nfnzoo {command}: error: "), result.describe()
    assert "Traceback" not in result.stderr
    return lines[0]


# --- specs: members and plans ------------------------------------------------------------------

SPEC_BOMBS = {  # a few lines each; before the bound, building the member exhausted memory
    "cnn-channels": ("cnn-mnist", {"architecture": {"channels": 20000}}, "channels 20000 is outside"),
    "inr-hidden": ("inr-mnist", {"architecture": {"hidden_features": 60000}}, "hidden_features 60000 is outside"),
    "cnn-parameters": ("cnn-mnist", {"architecture": {"channels": 4000, "kernel_size": 9}},
                       "declares a member of 2,592,376,010 parameters"),
    "cnn-depth": ("cnn-mnist", {"architecture": {"channels": 1, "num_conv_layers": 5000000}},
                  "declares 5,000,001 layers"),
    "transformer-tokens": ("transformer-mnist", {"architecture": {"image_size": 20000, "patch_size": 1}},
                           "tokens ((image_size / patch_size)^2) 400000000 is outside"),
}


# every case dry, and `generate` itself once (it refuses at the same check, when the spec loads)
@pytest.mark.parametrize("case,dry_run", [(case, True) for case in sorted(SPEC_BOMBS)] + [("cnn-channels", False)])
def test_a_spec_declaring_a_huge_member_is_one_line_naming_the_spec_and_field(cli, tmp_path, case, dry_run):
    base, overrides, expected = SPEC_BOMBS[case]
    spec = tmp_path / f"{case}.yaml"
    spec.write_text(yaml.safe_dump({"extends": base, **overrides}))
    result = _nfnzoo(cli, tmp_path, "generate", str(spec), *(["--dry-run"] if dry_run else []), "--out",
                     str(tmp_path / "out"))
    assert not result.oom_killed, result.describe()
    assert result.returncode == 1, result.describe()
    line = _one_error_line(result, "generate")
    assert f"{spec}: architecture: " in line and expected in line, line
    assert "zoo.validation.bounds.MAX_" in line
    assert not (tmp_path / "out").exists()


def test_the_dry_run_of_the_largest_plan_a_spec_may_declare_is_quick_and_small(cli, tmp_path):
    # ten million runs of nine checkpoints: 90 million planned (the bounds are 10 M runs and 100 M checkpoints)
    spec = tmp_path / "large.yaml"
    spec.write_text("extends: cnn-mnist\nsearch_space:\n  sampled: {count: 10000000}\n")
    start = time.monotonic()
    result = _nfnzoo(cli, tmp_path, "generate", str(spec), "--dry-run", "--out", str(tmp_path / "out"),
                     limit=GIB + GIB // 2)
    assert not result.oom_killed, result.describe()
    assert result.returncode == 0, result.describe()
    assert time.monotonic() - start < 60
    lines = result.stdout.splitlines()
    expected = "cnn-mnist (full): 10,000,000 runs, 90,000,000 checkpoints, reproducibility: native"
    assert lines[0] == expected, result.stdout
    assert "parameters per checkpoint: 4,970" in lines
    assert any(line.startswith("runs and checkpoints are upper bounds: the first 100,000 of 10,000,000")
               for line in lines)


def test_every_bundled_spec_at_every_profile_validates_and_sizes_its_member_as_built():
    for path in sorted(SPECS_DIR.glob("*.yaml")):
        profiles = [None] + sorted((yaml.safe_load(path.read_text()).get("profiles") or {}))
        for profile in profiles:
            spec = load_spec(path.stem, profile)
            family = create_family(spec.family)
            size = family.member_size(spec.architecture)
            assert size.parameters == family.weight_space(spec.architecture).num_params, (path.stem, profile)


def _counted(spec):
    """What the plan itself gives: distinct runs, checkpoints, runs per train_fraction."""
    runs = plan_runs(spec)
    fractions = collections.Counter(run.hparams.get("train_fraction") for run in runs)
    return len(runs), sum(len(run.checkpoints) for run in runs), fractions


@pytest.mark.parametrize("search_space,seeds", [
    # repeated draws (a two-value choice drawn 40 times), `1` and `1.0` for a float, a repeated seed
    ({"fixed": {"optimizer": "adam", "l2": 0.0, "init": "normal", "init_std": 0.1, "activation": "relu",
                "dropout": 0.0},
      "grid": {"learning_rate": [0.1, 0.1, 0.01]},
      "sampled": {"seed": 3, "count": 40, "axes": {"train_fraction": {"choice": [1, 1.0, 0.5]}}}}, [0, 1, 1]),
    # overlapping sub-grids: their common points are trained once
    ({"fixed": {"l2": 0.0, "init": "normal", "init_std": 0.1, "activation": "relu", "dropout": 0.0},
      "grids": [{"optimizer": ["adam"], "learning_rate": [0.1, 0.01], "train_fraction": [0.5, 1.0]},
                {"optimizer": ["adam", "sgd"], "learning_rate": [0.01], "train_fraction": [0.5, 0.25]}]}, [0]),
])
def test_the_counted_plan_matches_the_listed_plan_with_repeats(tmp_path, search_space, seeds):
    raw = yaml.safe_load((SPECS_DIR / "cnn-mnist.yaml").read_text())
    raw.update(search_space=search_space, seeds=seeds)
    raw.pop("profiles", None)
    spec_file = tmp_path / "repeats.yaml"
    spec_file.write_text(yaml.safe_dump(raw))
    spec = load_spec(spec_file)
    runs, checkpoints, fractions = _counted(spec)
    size = plan_size(spec, ("train_fraction",))
    assert (size.runs, size.checkpoints, size.inexact) == (runs, checkpoints, None)
    assert {dict(group)["train_fraction"]: n for group, n in size.groups.items()} == dict(fractions)
    family = create_family("cnn")
    listed = sum(family.run_flops(spec, run.hparams) for run in plan_runs(spec))
    assert estimate(spec).training_flops == pytest.approx(listed, rel=1e-12)


# --- Parquet shards: column sizes from the footer and the page headers -------------------------

def _bombed_zoo(folder: Path, column: str, value_bytes: int) -> tuple[Path, str]:
    """The tiny zoo with `column` of its first shard holding `value_bytes`-byte strings (zstd makes
    them a few KB on disk), the manifest resealed (size, checksums, dataset hash) so that only the
    declared size is wrong; returns the folder and the shard's split."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from zoo.storage.integrity import dataset_hash_of, file_checksums

    manifest = json.loads((folder / "manifest.json").read_text())
    config = next(iter(manifest["configs"].values()))
    entry = config["files"][0]
    shard = folder / entry["path"]
    table = pq.read_table(shard)
    index = table.schema.get_field_index(column)
    value = "r" * value_bytes
    table = table.set_column(index, table.schema.field(index), pa.array([value] * table.num_rows, pa.string()))
    shard.chmod(0o644)
    pq.write_table(table, shard, compression="zstd")
    assert shard.stat().st_size < 2**20
    entry.update(bytes=shard.stat().st_size, **file_checksums(shard))
    config["dataset_hash"] = dataset_hash_of(config["files"])
    (folder / "manifest.json").chmod(0o644)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return folder, entry["split"] if "split" in entry else entry["path"].split("/")[-1].split("-")[0]


@pytest.mark.parametrize("column,value_bytes,verb", [
    ("run_id", 2 * 2**20, "declares"),  # its dictionary page alone (2 MiB) is over 12 rows x 64 KB
    ("model_id", 2 * 2**20, "declares"),
    # a 500 KB value: its page is within 12 rows x 64 KB, the 12 rows it decodes to are not
    ("run_id", 500_000, "expands through its dictionary to 6,000,000"),
])
def test_a_shard_whose_column_declares_gigabytes_is_refused_by_verify_info_and_the_loader(cli, tiny_zoo_copy, tmp_path,
                                                                                           column, value_bytes, verb):
    folder, split = _bombed_zoo(tiny_zoo_copy, column, value_bytes)
    expected = f"column '{column}' of row group 0"
    result = _nfnzoo(cli, tmp_path, "verify", str(folder))
    assert not result.oom_killed, result.describe()
    assert result.returncode == 1, result.describe()
    output = result.stdout + result.stderr
    assert expected in output and f" {verb}" in output and "bytes uncompressed; at most 65,536 a row" in output, output
    assert "MAX_PARQUET_METADATA_ROW_BYTES" in output

    result = _nfnzoo(cli, tmp_path, "info", str(folder))
    assert not result.oom_killed, result.describe()
    assert result.returncode == 1, result.describe()
    line = _one_error_line(result, "info")
    assert ".parquet: " + expected in line and "refused before it is read" in line, line

    load = (f"from zoo.loader import load_split, read_metadata\n"
            f"read_metadata({str(folder)!r}, split={split!r})\n")
    result = run_limited([sys.executable, "-c", load], limit_bytes=2 * GIB, env=_environment(tmp_path))
    assert not result.oom_killed, result.describe()
    assert result.returncode == 1 and "CorruptShardError" in result.stderr and expected in result.stderr, \
        result.describe()


def test_a_shard_within_the_bounds_still_loads(tiny_zoo_copy):  # the negative control
    from zoo.loader import read_metadata
    from zoo.storage.integrity import declared_size_problem

    folder, split = _bombed_zoo(tiny_zoo_copy, "run_id", 1000)
    assert declared_size_problem(next(folder.rglob("*.parquet"))) is None
    assert len(read_metadata(folder, split=split)) > 0


# --- staged checkpoints: a file's size against what its header implies -------------------------

def _sparse_staged_file(folder: Path) -> Path:
    from zoo.storage.folder import STAGING_FOLDER
    from zoo.storage.staging import Staging

    staging = Staging(folder / STAGING_FOLDER)
    path = staging.path(sorted(staging.model_ids())[3])
    path.chmod(0o644)
    os.truncate(path, 4 * GIB)  # a sparse 4 GiB: its header still says a few kilobytes
    return path


def test_a_staged_file_longer_than_its_header_implies_is_refused_before_its_body_is_read(tiny_zoo_copy):
    from zoo.storage.safetensors_io import decode, read_safetensors_file
    from zoo.validation.inputs import InputError

    path = _sparse_staged_file(tiny_zoo_copy)
    with pytest.raises(InputError, match=r"4,294,967,296 bytes on disk, but its safetensors header implies [\d,]+ "):
        read_safetensors_file(path, "staged checkpoint")
    other = next(p for p in path.parent.parent.rglob(f"*{path.suffix}") if p != path)
    tensors, metadata = decode(read_safetensors_file(other))  # the negative control: a whole file reads
    assert tensors and metadata


def test_a_header_declaring_more_than_a_member_is_refused(tmp_path):
    import json
    import struct

    from zoo.storage.safetensors_io import read_safetensors_file
    from zoo.validation.inputs import InputError

    header = json.dumps({"w": {"dtype": "F32", "shape": [30000, 30000],
                               "data_offsets": [0, 30000 * 30000 * 4]}}).encode()
    path = tmp_path / "huge.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    os.truncate(path, 8 + len(header) + 30000 * 30000 * 4)  # sparse: exactly the size the header implies
    with pytest.raises(InputError, match="declare 900,000,000 elements; a member has at most 20,000,000"):
        read_safetensors_file(path)


def test_pack_refuses_a_sparse_staged_file_without_reading_it(cli, tiny_zoo_copy, tmp_path):
    path = _sparse_staged_file(tiny_zoo_copy)
    result = _nfnzoo(cli, tmp_path, "pack", str(tiny_zoo_copy), limit=GIB + GIB // 2)
    assert not result.oom_killed, result.describe()
    assert result.returncode == 1, result.describe()
    assert f"staged checkpoint {path} is not trusted" in result.stderr, result.describe()
    assert "4,294,967,296 bytes on disk, but its safetensors header implies" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_page_headers_declare_what_the_footer_totals(tiny_zoo_copy):
    """Arrow allocates a page by its header's size, so the check reads the page headers as well as
    the footer: here they agree, the bodies a little under the footer's totals (which count headers)."""
    import mmap

    from parquet_chunks import declared_chunks
    from zoo.storage.parquet_pages import declared_page_bytes

    folder, _ = _bombed_zoo(tiny_zoo_copy, "run_id", 2**20)
    shard = next(p for p in folder.rglob("*.parquet") if p.stat().st_mode & 0o200)  # the one rewritten
    chunks = declared_chunks(shard)
    assert any(chunk.path_in_schema == "run_id" for _, chunk, _, _ in chunks)
    for group, chunk, paged, values in chunks:
        assert 0.9 * chunk.total_uncompressed_size - 4096 <= paged <= chunk.total_uncompressed_size
        assert values == chunk.num_values == group.num_rows
        if chunk.path_in_schema == "run_id":  # one dictionary value: its page holds it once
            assert 2**20 <= paged < 2 * 2**20
    with open(shard, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        with pytest.raises(ValueError, match="outside the"):
            declared_page_bytes(mapped, len(mapped) - 4, 100)
