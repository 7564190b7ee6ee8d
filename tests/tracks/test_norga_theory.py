"""The prefix-MoE estimation simulation: the model, the Voronoi loss, the fit, the track."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from benchmarks.tracks.norga.theory import TheoryConfig, fit, regression, truth, voronoi_loss
from zoo.cli import main

CONFIG = TheoryConfig()


def _x(n=64, seed=0):
    return torch.rand((n, 2), generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 - 1


@pytest.mark.parametrize("gate", ["linear", "tanh", "sigmoid", "gelu"])
def test_a_true_atom_split_in_two_is_the_same_mixture_and_zero_loss(gate):
    true = truth(CONFIG)
    split = {k: torch.cat([v, v]) for k, v in true.items()}
    split["beta0"] = split["beta0"] - math.log(2)
    torch.testing.assert_close(regression(_x(), split, gate, CONFIG), regression(_x(), true, gate, CONFIG))
    assert voronoi_loss(true, true) == 0.0 and voronoi_loss(split, true) == pytest.approx(0.0, abs=1e-12)


def test_the_loss_counts_mass_and_distances_with_the_cells_power():
    true = truth(CONFIG)
    moved = {**true, "b": true["b"] + 0.1}
    assert voronoi_loss(moved, true) == pytest.approx(0.1)  # one atom: distances to the first power
    two = {k: torch.cat([v, v]) for k, v in moved.items()}
    two["beta0"] = two["beta0"] - math.log(2)
    assert voronoi_loss(two, true) == pytest.approx(0.01)  # two atoms in the cell: squared distances
    heavier = {**true, "beta0": true["beta0"] + math.log(1.5)}
    assert voronoi_loss(heavier, true) == pytest.approx(0.5)  # |1.5 - 1|


def test_the_nonlinear_gate_changes_the_mixture_and_the_linear_one_is_plain_softmax():
    true = truth(CONFIG)
    x = _x()
    assert not torch.allclose(regression(x, true, "tanh", CONFIG), regression(x, true, "linear", CONFIG))
    score = 0.5 * (x * x).sum(1)
    prefix = x @ true["beta1"][0] + true["beta0"][0]
    weight = torch.sigmoid(prefix - score)  # two experts: the softmax is a sigmoid of the score gap
    expected = (1 - weight) * (x @ torch.tensor(CONFIG.h0, dtype=x.dtype)) + weight * (x @ true["a"][0] + true["b"][0])
    torch.testing.assert_close(regression(x, true, "linear", CONFIG), expected)


def test_least_squares_recovers_the_truth_from_plentiful_clean_data():
    config = dataclasses.replace(CONFIG, restarts=1, iterations=100)
    x = _x(2000, seed=3)
    for gate in ("tanh", "linear"):
        y = regression(x, truth(config), gate, config)
        fitted = fit(x, y, 1, gate, config, torch.Generator().manual_seed(0))
        assert voronoi_loss(fitted, truth(config)) < 1e-3
    noisy = regression(x, truth(config), "linear", config) + torch.randn(2000, dtype=torch.float64) * 5
    wild = fit(x, noisy, 2, "linear", dataclasses.replace(config, bound=1.5), torch.Generator().manual_seed(1))
    assert all(float(v.abs().max()) <= 1.5 for v in wild.values())  # the compact parameter box holds
    bad = {**truth(config), "a": truth(config)["a"] + 1.0}  # negative control: a wrong atom is far
    assert voronoi_loss(bad, truth(config)) > 1.0


def test_the_tiny_theory_track_writes_the_slopes_and_the_plot_and_resumes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["track", "run", "norga-theory", "--profile", "tiny", "--workers", "1"]  # --out defaults under runs/
    assert main(args) == 0
    tmp_path = tmp_path / "runs" / "track-norga-theory-tiny"
    results = json.loads((tmp_path / "theory.json").read_text())
    assert {(r["fitted_atoms"], r["gate"]) for r in results["runs"]} == {(2, "linear"), (2, "tanh"), (1, "linear"),
                                                                         (1, "tanh")}
    assert all(isinstance(r["slope"], float) and len(r["median"]) == 3 for r in results["runs"])
    assert (tmp_path / "theory-estimation.png").read_bytes()[:4] == b"\x89PNG"
    assert "slopes of log D against log n" in capsys.readouterr().err
    assert main(args) == 0
    assert "6 of 6 job(s) already done" in capsys.readouterr().err
