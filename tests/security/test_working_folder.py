"""The working folder is untrusted (docs/security.md, "working folder"): nothing is imported from it
but the top-level module a user named, and never ahead of the standard library, the dependencies or
nfnzoo's own packages; every Python process nfnzoo starts runs with a safe path.

Each test runs the real console script in a folder planted with modules that shadow what nfnzoo
imports (`numpy.py`, `torch.py`, `yaml.py`, `benchmarks/`, `zoo/cli.py`, ...): each, if imported,
leaves a marker file and raises. The author's route (`--model pkg.mod:Class` from the folder that
holds `pkg/`, no install) must still work there, on Ray workers too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shadows import imported, plant
from zoo.named_import import NAMED_MODULES_VARIABLE, import_named

ROOT = Path(__file__).resolve().parents[2]
NFNZOO = Path(sys.executable).parent / "nfnzoo"  # the console script, as a user runs it
MODEL = "authorpkg.model:TensorMoments"


@pytest.fixture
def author_folder(tmp_path: Path) -> tuple[Path, Path]:
    """An author's project folder: their model package (not installed) beside the shadows."""
    folder, markers = tmp_path / "project", tmp_path / "markers"
    folder.mkdir()
    shutil.copytree(ROOT / "examples" / "my_nfn" / "my_nfn", folder / "authorpkg")
    plant(folder, markers)
    return folder, markers


def nfnzoo(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    env.pop(NAMED_MODULES_VARIABLE, None)
    return subprocess.run([str(NFNZOO), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_shadows_do_shadow_what_a_path_with_the_folder_imports(author_folder):
    """Negative control: with the folder first on the path (what `main` did before), the plants run."""
    folder, markers = author_folder
    done = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.'); import numpy"], cwd=folder,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and imported(markers) == ["numpy"]


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["leaderboard", "render", "--help"]])
def test_any_command_imports_nothing_from_the_working_folder(author_folder, argv):
    folder, markers = author_folder
    done = nfnzoo(argv, folder)
    assert done.returncode == 0, done.stderr[-2000:]
    assert imported(markers) == []


def test_the_authors_import_path_runs_from_a_folder_of_shadows(author_folder):
    folder, markers = author_folder
    done = nfnzoo(["bench", "check-model", MODEL], folder)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TensorMoments" in done.stdout
    assert imported(markers) == []


def test_a_named_module_that_shadows_an_installed_one_is_not_used_and_says_why(author_folder):
    folder, markers = author_folder
    done = nfnzoo(["bench", "check-model", "benchmarks.mine:Model"], folder)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "the working folder's 'benchmarks' is not used" in done.stderr
    assert imported(markers) == []


def test_verify_inside_a_received_zoo_that_holds_python_files(tiny_zoo_copy, tmp_path):
    markers = tmp_path / "markers"
    plant(tiny_zoo_copy, markers)
    for argv in (["verify", "."], ["info", "."]):
        done = nfnzoo(argv, tiny_zoo_copy)
        assert done.returncode == 0, done.stderr[-2000:]
    assert imported(markers) == []


@pytest.mark.slow
def test_ray_workers_import_the_named_module_from_the_folder_and_nothing_else(author_folder, tiny_zoo, tmp_path):
    """`--workers 2` runs the seeds as tasks of a local Ray instance, from a folder of shadows. The
    workers import the author's module and nothing else; their metrics equal an in-process run's (one
    thread each: summation order only), and no per-seed folder is left."""
    from benchmarks.harness import seeds_folder

    folder, markers = author_folder
    run = ["bench", "run", "--task", "generalization", "--model", MODEL, "--data", str(tiny_zoo),
           "--seeds", "0,1", "--set", "task.epochs=1"]
    alone, pooled = tmp_path / "alone.json", tmp_path / "pooled.json"
    done = nfnzoo([*run, "--out", str(alone)], folder, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    done = nfnzoo([*run, "--out", str(pooled), "--workers", "2"], folder, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[2/2] seed" in done.stderr and '"model": "TensorMoments"' in pooled.read_text()
    per_seed = [json.loads(path.read_text())["per_seed"] for path in (alone, pooled)]
    assert [entry["seed"] for entry in per_seed[1]] == [0, 1]
    for first, second in zip(*per_seed, strict=True):
        assert first["metrics"] == pytest.approx(second["metrics"], rel=1e-4, abs=1e-6)
    assert not seeds_folder(pooled).exists()
    assert imported(markers) == []


def test_import_named_looks_up_only_the_named_top_level_module(tmp_path, monkeypatch):
    (tmp_path / "lonepkg").mkdir()
    (tmp_path / "lonepkg" / "__init__.py").write_text("import lonehelper\nVALUE = lonehelper.VALUE\n")
    (tmp_path / "lonehelper.py").write_text("VALUE = 7\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.delenv(NAMED_MODULES_VARIABLE, raising=False)
    with pytest.raises(ModuleNotFoundError, match="lonehelper"):  # a sibling the user did not name
        import_named("lonepkg")
    assert "lonehelper" not in sys.modules
    sys.modules.pop("lonepkg", None)
    (tmp_path / "lonepkg" / "__init__.py").write_text("VALUE = 7\n")
    assert import_named("lonepkg").VALUE == 7
    sys.modules.pop("lonepkg", None)
