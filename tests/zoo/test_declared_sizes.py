"""Sizes a spec, a shard or a staged file declares are bounded before anything is built or read (issue 48).

Each bomb runs the real CLI under a memory limit (`tests/memory_limit.py`), so a regression that
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
from zoo.planning.spec import SPECS_DIR, load_spec


def _environment(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "hf_home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home),
            "RAY_AUTH_MODE": "disabled"}


def _nfnzoo(tmp_path: Path, *argv: str, limit: int = 2 * GIB, timeout: float = 120):
    return run_limited([sys.executable, "-m", "zoo.cli", *argv], limit_bytes=limit, timeout=timeout,
                       env=_environment(tmp_path))


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
def test_a_spec_declaring_a_huge_member_is_one_line_naming_the_spec_and_field(tmp_path, case, dry_run):
    base, overrides, expected = SPEC_BOMBS[case]
    spec = tmp_path / f"{case}.yaml"
    spec.write_text(yaml.safe_dump({"extends": base, **overrides}))
    result = _nfnzoo(tmp_path, "generate", str(spec), *(["--dry-run"] if dry_run else []), "--out", str(tmp_path / "out"))
    assert not result.oom_killed, result.describe()
    assert result.returncode == 1, result.describe()
    line = _one_error_line(result, "generate")
    assert f"{spec}: architecture: " in line and expected in line, line
    assert "zoo.validation.bounds.MAX_" in line
    assert not (tmp_path / "out").exists()


def test_the_dry_run_of_the_largest_plan_a_spec_may_declare_is_quick_and_small(tmp_path):
    # ten million runs of nine checkpoints: 90 million planned (the bounds are 10 M runs and 100 M checkpoints)
    spec = tmp_path / "large.yaml"
    spec.write_text("extends: cnn-mnist\nsearch_space:\n  sampled: {count: 10000000}\n")
    start = time.monotonic()
    result = _nfnzoo(tmp_path, "generate", str(spec), "--dry-run", "--out", str(tmp_path / "out"), limit=GIB + GIB // 2)
    assert not result.oom_killed, result.describe()
    assert result.returncode == 0, result.describe()
    assert time.monotonic() - start < 60
    lines = result.stdout.splitlines()
    assert lines[0] == "cnn-mnist (full): 10,000,000 runs, 90,000,000 checkpoints", result.stdout
    assert "parameters per checkpoint: 4,970" in lines
    assert any(line.startswith("runs and checkpoints are upper bounds: the first 100,000 of 10,000,000") for line in lines)


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
