"""A standard suite's protocol line, in `suite.json` and `table.md`, says what the model ran each cell at:
the name of the cell's preset it has, else "its defaults" (never "budget presets" for a model without)."""

from __future__ import annotations

import json

import pytest

from benchmarks.standard import STANDARD_SUITES, cell_protocol, run_standard

V2 = {cell.name: cell for cell in STANDARD_SUITES.get("standard-v2")().cells}
V1 = {cell.name: cell for cell in STANDARD_SUITES.get("standard-v1")().cells}


@pytest.mark.parametrize("suite", STANDARD_SUITES.names())
def test_a_cell_with_model_presets_ends_its_label_with_them(suite):
    """What `cell_protocol` replaces is the label's closing "; ... presets", and only that."""
    for cell in STANDARD_SUITES.get(suite)().cells:
        if cell.model_presets:
            task_protocol, _, models = cell.label.rpartition("; ")
            assert task_protocol and models.endswith("presets"), cell.label


@pytest.mark.parametrize("cell, model, expected", [
    (V2["cnn-generalization-relu"], "ng_gnn", "10 epochs; model at preset generalization-budget"),
    (V2["cnn-generalization-relu"], "statnn", "10 epochs; model at its defaults"),
    (V2["inr-classification"], "statnn", "warm-up steps); model at preset inr-classification-budget"),
    (V2["transformer-generalization"], "scalegmn", "; model at preset transformer-generalization-budget"),
    (V2["transformer-generalization"], "ng_gnn", "; model at preset generalization-budget"),  # the second choice
    (V2["transformer-generalization"], "transformer_nfn", "; model at its defaults"),
    (V1["inr-classification"], "ng_gnn", "budget preset (5 epochs); model at its defaults"),  # the task's preset
])
def test_the_protocol_line_names_the_models_preset_or_its_defaults(cell, model, expected):
    line = cell_protocol(cell, model)
    assert line.endswith(expected), line
    assert "presets" not in line  # the label's word for every model is gone


def test_a_model_with_no_presets_runs_at_its_defaults(tmp_path):
    """examples/my_nfn's model has no PRESETS: each standard-v2 cell says "its defaults"."""
    from benchmarks.tasks.registry import TASKS
    from nfn_models.registry import MODELS
    from plugin_site import example_site, on_path

    with on_path(example_site(tmp_path / "site"), MODELS, TASKS):
        lines = [cell_protocol(cell, "tensor_moments") for cell in V2.values()]
    assert all(line.endswith("; model at its defaults") for line in lines), lines


def test_suite_json_and_table_md_carry_the_models_protocol_line(tmp_path, monkeypatch):
    """Through `run_standard`: a cell the model cannot serve is recorded with the line too."""
    import benchmarks.harness

    def cannot_serve(*args, **kwargs):
        raise ValueError("this model cannot serve the cell")

    monkeypatch.setattr(benchmarks.harness, "run_benchmark", cannot_serve)
    for model, expected in (("statnn", "model at its defaults"), ("ng_gnn", "model at preset generalization-budget")):
        out = tmp_path / model
        manifest = run_standard("standard-v2", model, out, {"cnn-mnist-suite-v2": str(tmp_path / "zoo")},
                                only=["cnn-generalization-relu"])
        (cell,) = [c for c in manifest["cells"] if c["cell"] == "cnn-generalization-relu"]
        assert cell["protocol"].endswith(expected) and "cannot serve" in cell["reason"], cell
        assert json.loads((out / "suite.json").read_text())["cells"][0]["protocol"] == cell["protocol"]
        assert f"| {cell['protocol']} |" in (out / "table.md").read_text()
