"""`nfnzoo bench run` and `nfnzoo bench scatter`, through the real console-script entry point."""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest

from benchmarks.command_arguments import parse_seeds, split_overrides
from zoo.cli import CommandError, main


def test_the_bench_command_is_an_entry_point():
    entries = {entry.name: entry.value for entry in entry_points(group="nfnzoo.commands")}
    assert entries["bench"] == "benchmarks.commands:register"


@pytest.mark.parametrize("text, seeds",
                         [("0,1,2", [0, 1, 2]), ("3", [3]), ("0-3", [0, 1, 2, 3]), ("1, 5-6", [1, 5, 6])])
def test_parse_seeds(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a,b", "1,,x"])
def test_parse_seeds_errors(text):
    with pytest.raises(CommandError, match="--seeds"):
        parse_seeds(text)


def test_an_empty_seed_range_is_called_empty():
    with pytest.raises(CommandError, match=r"--seeds: the range 5-2 is empty \(5 > 2\); write 2-5"):
        parse_seeds("5-2")
    with pytest.raises(CommandError, match="no seed in ','"):
        parse_seeds(",")


def test_set_routes_overrides_to_the_model_or_the_task():
    model, task = split_overrides(["model.hidden_sizes=[8,4]", "epochs=2", "activation=tanh", "task.lr=1e-2"],
                                  "statnn", "generalization")
    assert model == {"hidden_sizes": [8, 4], "activation": "tanh"}
    assert task == {"epochs": 2, "lr": 0.01}


@pytest.mark.parametrize("assignment, message",
                         [("epochs", "KEY=VALUE"), ("widths=3", "use model.widths or task.widths")])
def test_set_errors(assignment, message):
    with pytest.raises(CommandError, match=message):
        split_overrides([assignment], "statnn", "generalization")


def test_bench_run_and_scatter(dataset_folder, tmp_path, capsys):
    out = tmp_path / "statnn.json"
    code = main(["bench", "run", "--task", "generalization", "--model", "statnn", "--data", str(dataset_folder),
                 "--seeds", "0,1,2", "--out", str(out), "--set", "epochs=1", "--set", "model.hidden_sizes=[8]"])
    assert code == 0
    captured = capsys.readouterr()
    assert "kendall_tau: " in captured.out and "[3/3] seed2: " in captured.err
    results = json.loads(out.read_text())
    assert results["task_config"]["epochs"] == 1 and results["model_config"]["hidden_sizes"] == [8]

    plot = tmp_path / "scatter.png"
    assert main(["bench", "scatter", str(out), "--out", str(plot)]) == 0
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_user_errors_exit_1_with_a_message(dataset_folder, tmp_path, capsys):
    code = main(["bench", "run", "--task", "generalization", "--model", "resnet", "--data", str(dataset_folder),
                 "--out", str(tmp_path / "r.json")])
    assert code == 1
    # the list grows as NFN models are registered; it names every registered one
    from nfn_models import list_models

    assert f"unknown NFN model 'resnet'; valid names: {', '.join(list_models())}" in capsys.readouterr().err
    assert main(["bench", "scatter", str(tmp_path / "missing.json"), "--out", str(tmp_path / "p.png")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_bench_run_needs_at_least_one_worker(dataset_folder, tmp_path, capsys):
    """Seeds in worker processes run on a local Ray instance: tests/security/test_working_folder.py."""
    pooled = tmp_path / "pooled.json"
    assert main(["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(dataset_folder),
                 "--out", str(pooled), "--workers", "0"]) == 1
    assert "workers must be at least 1, got 0" in capsys.readouterr().err
