"""`nfnzoo bench` against hostile settings and files (issue 48, round 3), through the real CLI in fresh
processes (`tests/forked_cli.py`) on the real tiny zoo:

- a link at a results file's or a sidecar's name is refused before anything is trained or written;
- a results file whose sidecar key holds a path (`"predictions": "../../x.csv"`) is one line naming
  the file and the key;
- a setting that sizes an allocation (`augment_copies`, batch sizes, a model's widths) is bounded
  (`benchmarks.tasks.limits`) and refused in one line naming the key, under a memory limit so that a
  regression fails the test and not the machine.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from benchmarks.tasks.limits import MAX_AUGMENT_COPIES, MAX_BATCH_SIZE, MAX_MODEL_PARAMETERS
from memory_limit import GIB

TIMEOUT_S = 120
VICTIM_TEXT = "the victim's own bytes\n"


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    from forked_cli import ForkedCLI

    folder = tmp_path_factory.mktemp("bench_cwd")
    forked = ForkedCLI(folder)
    forked.folder = folder
    yield forked
    forked.close()


def _environment(tmp_path) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "RAY_AUTH_MODE": "disabled",
            "HF_HOME": str(tmp_path / "hf"), "PYTHONWARNINGS": "ignore"}


def _run(cli, tmp_path, tiny_zoo, out, *more: str, limit: int | None = None):
    argv = ["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(tiny_zoo), "--seeds", "0",
            "--out", str(out), "--device", "cpu", "--set", "task.epochs=1", *more]
    if limit is None:
        return cli.run(argv, cwd=cli.folder, env=_environment(tmp_path), timeout=TIMEOUT_S)
    return cli.run_limited(argv, cwd=cli.folder, env=_environment(tmp_path), timeout=TIMEOUT_S, limit_bytes=limit)


def _error(done, command: str = "bench") -> str:
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert lines and lines[-1].startswith(f"nfnzoo {command}: error: "), done.stderr
    return lines[-1].removeprefix(f"nfnzoo {command}: error: ")


# --- links at the results' names: refused before anything is written -----------------------------

@pytest.mark.parametrize("linked", ["r.predictions.csv", "r.json", "r.examples.npz",
                                    "r.predictions.0123456789abcdef.csv"])
def test_a_link_at_a_results_name_is_refused_before_anything_is_written(cli, tmp_path, tiny_zoo, linked):
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    folder = tmp_path / "bo"
    folder.mkdir()
    (folder / linked).symlink_to(victim)
    done = _run(cli, tmp_path, tiny_zoo, folder / "r.json")
    assert done.returncode == 1, done.stderr
    assert _error(done).startswith(f"{folder / linked} is a symbolic link; nfnzoo never writes through links")
    assert sorted(p.name for p in folder.iterdir()) == [linked]  # no results, no staged sidecar, no seed records
    assert victim.read_text() == VICTIM_TEXT


def test_a_results_folder_without_links_is_written(cli, tmp_path, tiny_zoo):  # the negative control
    folder = tmp_path / "bo"
    folder.mkdir()
    done = _run(cli, tmp_path, tiny_zoo, folder / "r.json")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["r.json", "r.predictions.csv"]


# --- a sidecar key holding a path -----------------------------------------------------------------

@pytest.mark.parametrize("key, value", [("predictions", "../../outside/h.md"), ("predictions", "/etc/passwd"),
                                        ("predictions", ".."), ("examples", "sub/x.npz")])
def test_a_sidecar_key_holding_a_path_is_one_line_naming_the_file_and_key(cli, tmp_path, results_path, key, value):
    hostile = tmp_path / "deep" / "er" / "r.json"
    hostile.parent.mkdir(parents=True)
    shutil.copy(results_path.with_name(json.loads(results_path.read_text())["predictions"]), hostile.parent)
    hostile.write_text(json.dumps({**json.loads(results_path.read_text()), key: value}))
    done = cli.run(["bench", "scatter", str(hostile), "--out", str(tmp_path / "s.png")], cwd=cli.folder,
                   env=_environment(tmp_path), timeout=TIMEOUT_S)
    assert done.returncode == 1, done.stderr
    error = _error(done)
    assert error.count("\n") == 0 and str(hostile) in error and key in error and "file name beside the results" \
        in error, error
    assert not (tmp_path / "s.png").exists()


def test_a_plain_sidecar_name_still_plots(cli, tmp_path, results_path):  # the negative control
    done = cli.run(["bench", "scatter", str(results_path), "--out", str(tmp_path / "s.png")], cwd=cli.folder,
                   env=_environment(tmp_path), timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "s.png").stat().st_size > 0


# --- settings that size an allocation ---------------------------------------------------------------

@pytest.mark.parametrize("setting, key, bound", [
    ("task.augment_copies=100000000", "augment_copies", MAX_AUGMENT_COPIES),
    (f"task.augment_copies={MAX_AUGMENT_COPIES + 1}", "augment_copies", MAX_AUGMENT_COPIES),
    ("task.batch_size=10000000000", "batch_size", MAX_BATCH_SIZE),
    ("task.eval_batch_size=10000000000", "eval_batch_size", MAX_BATCH_SIZE),
])
def test_an_oversized_task_setting_is_refused_naming_the_key(cli, tmp_path, tiny_zoo, setting, key, bound):
    out = tmp_path / "r.json"
    done = _run(cli, tmp_path, tiny_zoo, out, "--set", setting, limit=2 * GIB)
    assert not done.oom_killed, done.describe()
    assert done.returncode == 1, done.describe()
    error = _error(done)
    assert key in error and f"expected at most {bound:,}" in error, error
    assert not out.exists()


def test_an_oversized_model_is_refused_before_it_is_built(cli, tmp_path, tiny_zoo):
    out = tmp_path / "r.json"
    done = _run(cli, tmp_path, tiny_zoo, out, "--set", "model.hidden_sizes=[100000,100000]", limit=2 * GIB)
    assert not done.oom_killed, done.describe()
    assert done.returncode == 1, done.describe()
    error = _error(done)
    assert "model.hidden_sizes=" in error and f"at most {MAX_MODEL_PARAMETERS:,} (MAX_MODEL_PARAMETERS)" in error \
        and "does not fit in memory" in error, error
    assert not out.exists()


def test_settings_within_the_bounds_still_run(cli, tmp_path, tiny_zoo):  # the negative control
    out = tmp_path / "r.json"
    done = _run(cli, tmp_path, tiny_zoo, out, "--set", "task.augment_copies=2", "--set", "task.eval_batch_size=4096",
                "--set", "model.hidden_sizes=[64,64]", limit=2 * GIB)
    assert not done.oom_killed and done.returncode == 0, done.describe()
    assert json.loads(out.read_text())["task_config"]["augment_copies"] == 2
