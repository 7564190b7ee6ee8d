"""`nfnzoo track run norga --profile tiny`: every method, results in the harness's format, the plot."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("timm")

from benchmarks.files import read_npz
from benchmarks.results import load_results
from benchmarks.tracks.norga.track import METHODS, letter_split
from benchmarks.tracks.registry import create_track, list_tracks
from zoo.cli import main


def test_the_registry_lists_the_track_and_refuses_unknown_names(capsys):
    assert "norga" in list_tracks()
    assert main(["track", "list"]) == 0 and "norga:" in capsys.readouterr().out
    assert main(["track", "run", "nothing", "--out", "x"]) == 1
    assert "nothing" in capsys.readouterr().err
    assert main(["track", "run", "norga", "--profile", "huge", "--out", "x"]) == 1
    assert "has no profile 'huge'" in capsys.readouterr().err


def test_the_letter_split_is_fixed_and_disjoint():
    pretraining, held = letter_split(50)
    assert len(held) == 50 and len(pretraining) == 71 and not set(pretraining) & set(held)
    assert letter_split(50) == (pretraining, held)


def test_the_tiny_profile_writes_every_methods_results_and_the_plot(tmp_path, capsys):
    # in this process (--workers 1): 20 tiny jobs, each a fresh Ray worker otherwise
    # (tests/benchmarks/test_jobs_cluster.py)
    assert main(["track", "run", "norga", "--profile", "tiny", "--seeds", "0,1", "--out", str(tmp_path),
                 "--workers", "1"]) == 0
    folder = tmp_path / "glyphs-3tasks"
    for method in METHODS:
        results = load_results(folder / f"{method}.json")  # the harness's schema
        assert results.task == "continual-learning" and results.seeds == (0, 1)
        metrics = set(results.summary)
        every_stage = {"cumulative_average_accuracy", "final_forgetting"}
        assert "final_average_accuracy" in metrics and (every_stage <= metrics) == (method != "joint")
        assert ("task_identity_accuracy" in metrics) == (method.startswith(("norga", "hide", "dualprompt")))
        matrices = read_npz(folder / results.examples)
        assert sorted(matrices) == ["accuracy_matrix_seed0", "accuracy_matrix_seed1"]
        matrix = matrices["accuracy_matrix_seed0"]
        assert matrix.shape == (3, 3) and np.isnan(matrix[2, 0]) and np.isfinite(matrix[:, 2]).all()
        assert results.summary["final_average_accuracy"].mean == pytest.approx(
            np.mean([read_npz(folder / results.examples)[f"accuracy_matrix_seed{s}"][:, 2].mean() for s in (0, 1)]))
    assert (tmp_path / "glyphs-3tasks-accuracy.png").read_bytes()[:4] == b"\x89PNG"
    table = (tmp_path / "glyphs-3tasks.md").read_text()
    assert table.count("\n| ") == len(METHODS) + 1 and "| joint | " in table and "FAA" in capsys.readouterr().err
    assert create_track("norga").DEFAULT_SEEDS == (42, 40, 44)


def test_a_pretraining_run_reports_its_steps_and_the_cache_then_loads_it(tmp_path, monkeypatch):
    import dataclasses

    from benchmarks.tracks.norga import track as norga

    monkeypatch.setenv("NFNZOO_CACHE", str(tmp_path / "cache"))
    profile = dataclasses.replace(norga.PROFILES["tiny"], pretrain=True, methods=("linear-probe",),
                                  backbone=dataclasses.replace(norga.PROFILES["tiny"].backbone, steps=3,
                                                               warmup_steps=1, batch_size=8))
    monkeypatch.setitem(norga.PROFILES, "tiny-pretrained", profile)
    messages = []
    create_track("norga").run("tiny-pretrained", [0], tmp_path / "out", messages.append)
    assert "backbone pretraining: step 3/3" in " ".join(messages)
    assert any(m.startswith("backbone pretrained in") and "cached with sha256" in m for m in messages)
    messages.clear()
    create_track("norga").run("tiny-pretrained", [1], tmp_path / "out", messages.append)
    assert not any("pretrain" in m and "step" in m for m in messages)  # loaded from the cache this time
