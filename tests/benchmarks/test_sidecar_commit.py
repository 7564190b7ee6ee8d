"""A results file and its predictions commit together: a run SIGKILLed at any file rename leaves
the old results with the old predictions or the new results with the new ones, never a mix.

One real process trains and writes a first results file, then, for every N, forks a child that
re-runs the benchmark over other seeds into a copy of that folder with `os.replace` wrapped to
SIGKILL the child at its N-th call (the seed records, the staged sidecar, each results write:
every rename the harness makes). Afterwards the results in each folder are loaded and the
predictions file they name is re-scored: its seeds are the results' seeds and each seed's rows
give exactly that seed's recorded metrics.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas

from benchmarks.results import load_results
from benchmarks.tasks.generalization import GeneralizationTask

SCRIPT = r"""
import os, shutil, signal, sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # no thread pool: the forked children train safely
from benchmarks.harness import run_on_splits
from benchmarks.run_options import RunOptions
from benchmarks.synthetic import small_cnn_space, synthetic_splits

base = Path(sys.argv[1])
splits = synthetic_splits((60, 20, 20), seed=0, diverged_fraction=0.0, space=small_cnn_space(channels=4))
dataset = {"path": "synthetic", "config": "synthetic", "dataset_hash": "ab" * 32, "family": "cnn"}
task = {"epochs": 1, "batch_size": 32}


def run(seeds, out):
    options = RunOptions(seeds, model_overrides={"hidden_sizes": [4]}, task_overrides=task, progress=False)
    run_on_splits("generalization", "mlp", splits, dataset, options, out)


run([0], base / "old" / "r.json")
for n in range(1, 50):
    folder = base / f"kill{n}"
    shutil.copytree(base / "old", folder)
    pid = os.fork()
    if pid == 0:
        real, calls = os.replace, [0]

        def replace(*args, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        os.replace = replace
        run([1, 2], folder / "r.json")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print(n, "killed" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}", flush=True)
    if not os.WIFSIGNALED(status):
        break
"""


def _check_pair(results_path: Path) -> tuple[int, ...]:
    """The results' seeds, after checking that the predictions file they name re-scores to their metrics."""
    results = load_results(results_path)
    table = pandas.read_csv(results_path.with_name(results.predictions))
    assert sorted(table["seed"].unique()) == sorted(results.seeds), (results_path, results.predictions)
    for entry in results.per_seed:
        rows = table[table["seed"] == entry.seed]
        rescored = GeneralizationTask.score(rows["target"].to_numpy(), rows["prediction"].to_numpy())
        for name, value in entry.metrics.items():
            np.testing.assert_allclose(rescored[name], value, rtol=1e-9, atol=1e-12, err_msg=f"{results_path} {name}")
    return tuple(results.seeds)


def test_a_kill_at_any_rename_leaves_results_and_predictions_that_agree(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    last = max(outcomes, key=int)
    assert outcomes[last] == "exit 0" and all(v == "killed" for k, v in outcomes.items() if k != last), outcomes
    seen = {}
    for number in outcomes:
        folder = tmp_path / f"kill{number}"
        seen[number] = _check_pair(folder / "r.json")
    assert set(seen.values()) == {(0,), (1, 2)}  # kills before the commit keep the old run, after it the new
    assert seen[last] == (1, 2)
    # the finished run leaves the usual names only: no hashed copies, no temporaries, no seed records
    assert sorted(p.name for p in (tmp_path / f"kill{last}").iterdir()) == ["r.json", "r.predictions.csv"]
