"""The graph metanetworks through `nfnzoo bench run` on a real packed zoo (the session's `tiny_zoo`)."""

from __future__ import annotations

import json
import math

from zoo.cli import main


def test_ng_gnn_runs_the_generalization_task_on_the_tiny_zoo(tiny_zoo, tmp_path, capsys):
    out = tmp_path / "ng_gnn.json"
    code = main(["bench", "run", "--task", "generalization", "--model", "ng_gnn", "--data", str(tiny_zoo),
                 "--seeds", "0", "--out", str(out), "--set", "epochs=1", "--set", "batch_size=4",
                 "--set", "model.hidden_dim=8", "--set", "model.fourier_features=8"])
    assert code == 0
    assert "kendall_tau: " in capsys.readouterr().out
    results = json.loads(out.read_text())
    assert results["model"] == "ng_gnn" and results["model_config"]["hidden_dim"] == 8
    assert results["num_params"] > 0
    assert math.isfinite(results["summary"]["kendall_tau"]["mean"])

