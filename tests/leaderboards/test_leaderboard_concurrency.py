"""Concurrent writers of one board serialize on its lock: no lost entry, no duplicate, no lost record."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from leaderboards.audit import audit
from leaderboards.datasets import load_datasets
from leaderboards.entries import load_entries

# the CLI's main in a real process, started once every process has imported it: the four
# submissions then race on the board's state instead of arriving one after another
RACER = """
import pathlib, sys, time
import leaderboards.commands, leaderboards.submission
from zoo.cli import main
barrier, count, argv = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
(barrier / str(len(list(barrier.iterdir())) + time.time())).touch()
while len(list(barrier.iterdir())) < count:
    time.sleep(0.005)
sys.exit(main(argv))
"""


def test_four_concurrent_submissions_into_one_fresh_board(tmp_path, write_results, local_dataset, hashes):
    """The same file twice and two distinct files, at once, each naming one unregistered local dataset: one
    entry per distinct file, the duplicate refused, datasets.json holding the dataset, audit clean."""
    board = tmp_path / "fresh-board"
    same = write_results(model="statnn", dataset_hash=hashes["local"], dataset_path=str(local_dataset))
    other = write_results(model="mlp", dataset_hash=hashes["local"], dataset_path=str(local_dataset))
    third = write_results(model="statnn", seeds=(3, 4, 5), dataset_hash=hashes["local"],
                          dataset_path=str(local_dataset))
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    processes = [subprocess.Popen([sys.executable, "-c", RACER, str(barrier), "4", "leaderboard", "submit", str(path),
                                   "--root", str(board)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=environment)
                 for path in (same, same, other, third)]
    outcomes = [(process.wait(timeout=240), *process.communicate()) for process in processes]
    for _, _, err in outcomes:
        assert "Traceback" not in err and "already registered" not in err, err
    assert sorted(code for code, _, _ in outcomes) == [0, 0, 0, 1], outcomes
    refused = next(err for code, _, err in outcomes if code == 1)
    assert "identical to the accepted entry" in refused, refused
    models = sorted((entry.results.model, entry.results.dataset.dataset_hash) for _, entry in load_entries(board))
    assert models == [("mlp", hashes["local"]), ("statnn", hashes["local"]), ("statnn", hashes["local"])]
    assert set(load_datasets(board)) == {hashes["local"]}  # registered once, by whichever came first
    registered = json.loads((board / "datasets.json").read_text())["datasets"][0]
    assert registered["source"] == "regenerated from spec cnn-mnist (tiny)"
    assert all(not report.problems for report in audit(board))
