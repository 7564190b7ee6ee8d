"""A model is resolved once a run (`benchmarks.model_identity.resolve_model`): the registry's lookup, the
board name's rules and the source, before any data is read; the harness and the suites read the record."""

from __future__ import annotations

import pytest

from benchmarks.harness import run_benchmark
from benchmarks.model_identity import ModelNameError, resolve_model
from nfn_models.registry import MODELS
from benchmarks.run_options import Placement, RunOptions


def test_a_built_in_resolves_to_its_name_class_and_source():
    resolved = resolve_model("statnn")
    assert (resolved.registered, resolved.name, resolved.cls) == ("statnn", "statnn", MODELS.get("statnn"))
    assert resolved.source["kind"] == "built-in" and resolved.source["distribution"] == "nfnzoo"
    assert resolve_model(resolved) is resolved  # a resolved model is not resolved again
    assert resolve_model(resolved, "statnn-wide").name == "statnn-wide"


def test_the_name_rules_run_before_any_data_is_read(tmp_path):
    """The data path does not exist: the name's refusal comes first (a look-alike of the built-in)."""
    with pytest.raises(ModelNameError, match="looks like the built-in NFN model 'statnn'"):
        run_benchmark("generalization", resolve_model("statnn", "StatNN"), tmp_path / "no-zoo", None,
                      RunOptions([0]))
    with pytest.raises(FileNotFoundError):  # the negative control: a good name reaches the data
        run_benchmark("generalization", resolve_model("statnn", "statnn-wide"), tmp_path / "no-zoo", None,
                      RunOptions([0]))


def test_a_run_records_the_resolved_models_name_and_source(tiny_zoo):
    resolved = resolve_model("mlp", "mlp-small")
    results = run_benchmark("generalization", resolved, tiny_zoo, None,
                            RunOptions([0], model_overrides={"hidden_sizes": [8]}, task_overrides={"epochs": 1},
                                       placement=Placement(device="cpu"), progress=False))
    assert results["model"] == "mlp-small" and results["model_source"] == resolved.source
