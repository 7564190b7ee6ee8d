"""`nfnzoo bench check-model`: the registry's exactness checks on a model from another package
(the example `examples/my_nfn`, found by its entry point and by import path); a false claim is
caught, one line names it, and the exit status says so."""

from __future__ import annotations

import pytest

from benchmarks.check_model import check_model, format_table
from benchmarks.tasks.registry import TASKS
from nfn_models.registry import MODELS
from plugin_site import example_site, on_path
from zoo.cli import main


@pytest.fixture
def example(tmp_path):
    with on_path(example_site(tmp_path / "site"), MODELS, TASKS):
        yield


def test_an_honest_plugin_passes_by_its_entry_point(example, capsys):
    assert main(["bench", "check-model", "tensor_moments", "--seeds", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "| cnn-relu | permutation | invariance | yes |" in out and "| cnn-relu | scale | invariance | no |" in out
    assert "FALSE CLAIM" not in out and "tensor_moments: every claim holds" in out
    assert "transformer" not in out  # it reads feedforward members only


def test_a_false_claim_is_caught(example, capsys):
    assert main(["bench", "check-model", "my_nfn.model:OverclaimingMoments", "--seeds", "0"]) == 1
    captured = capsys.readouterr()
    assert "| cnn-relu | scale | invariance | yes |" in captured.out and "FALSE CLAIM" in captured.out
    error = captured.err.strip()
    assert error.count("\n") == 0 and "false claim(s): scale on cnn-relu (invariance: deviation" in error


def test_the_checks_measure_what_they_report(example):
    checks = check_model("my_nfn.model:OverclaimingMoments", seeds=(0,))
    by_group = {(c.space, c.group, c.test): c for c in checks}
    assert by_group["siren", "permutation", "invariance"].deviation < 1e-6  # the true claim, measured
    assert by_group["siren", "scale", "invariance"].deviation > 1e-2 and by_group["siren", "scale", "invariance"].false_claim
    assert not by_group["siren", "sign", "invariance"].claimed  # a negative control, changing the output
    assert by_group["siren", "sign", "invariance"].verdict == "changes (not claimed)"
    assert format_table(checks).count("\n") == len(checks) + 2


def test_bad_input_is_one_line(capsys):
    assert main(["bench", "check-model", "no_such_pkg:Model"]) == 1
    assert "cannot import module 'no_such_pkg'" in capsys.readouterr().err
    assert main(["bench", "check-model", "statnn", "--set", "model.widths=3"]) == 1
    assert "widths" in capsys.readouterr().err
    assert main(["bench", "check-model", "statnn", "--spaces", "siren,mlp"]) == 1
    assert "--spaces: expected some of cnn-relu, cnn-tanh, siren, transformer-2x2, transformer-3x4-residual, got ['siren', 'mlp']" in (
        capsys.readouterr().err)
    assert main(["bench", "check-model", "ng_t", "--spaces", "transformer-2x2"]) == 1
    assert "reads none of the spaces ['transformer-2x2']" in capsys.readouterr().err


def test_spaces_restrict_the_checks_to_a_setting_that_reads_only_them(capsys):
    # NG-T with probe features runs its members as SIRENs: on every space it refuses the CNNs, on siren it holds
    assert main(["bench", "check-model", "ng_t", "--set", "model.probe_features=4"]) == 1
    assert "runs the members as SIRENs" in capsys.readouterr().err
    assert main(["bench", "check-model", "ng_t", "--set", "model.probe_features=4", "--spaces", "siren",
                 "--seeds", "0"]) == 0
    printed = capsys.readouterr().out
    assert "| siren | permutation | invariance | yes |" in printed and "cnn-relu" not in printed
