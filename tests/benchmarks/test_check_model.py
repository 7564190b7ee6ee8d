"""`nfnzoo bench check-model`: the registry's exactness checks on a model from another package
(the example `examples/my_nfn`, found by its entry point and by import path); a false claim is
caught, one line names it, and the exit status says so. The output is held to the contract
((B, out_features), finite) at every weight magnitude, and a claim must hold at each: a model whose
symmetry breaks only beyond |w| = 20, a (B,) output and an output NaN on one weight space are caught,
each for what it is, while an honest model passes at every magnitude."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from benchmarks.check_model import MAGNITUDES, random_weights, space
from benchmarks.check_steps import check_model
from benchmarks.check_report import format_table
from benchmarks.tasks.registry import TASKS
from nfn_models.registry import MODELS
from plugin_site import example_site, on_path
from zoo.cli import main


# outside models built on the example's TensorMoments, each breaking the contract or a claim in one way
BROKEN_MODELS = textwrap.dedent('''
    import torch

    from my_nfn.model import TensorMoments


    class BeyondTwenty(TensorMoments):
        """Claims permutations; entries beyond 20 are weighted by their position, which breaks it there."""

        def forward(self, weights):
            moments = []
            for tensor in weights.tensors:
                flat = tensor.reshape(tensor.shape[0], -1)
                flat = torch.where(flat.abs() > 20, flat * torch.linspace(1, 2, flat.shape[1]), flat)
                moments += [flat.mean(1), flat.square().mean(1).sqrt(), flat.abs().mean(1)]
            return self.head(torch.stack(moments, dim=1))


    class Flat(TensorMoments):
        """(B,) where the contract says (B, out_features) = (B, 1)."""

        def forward(self, weights):
            return super().forward(weights).squeeze(-1)


    class SmallBreak(TensorMoments):
        """Claims permutations; when every weight is below 0.05 (a fresh zoo's epoch-0 members) the first entry
        of the first tensor is added: the claim breaks only at small magnitudes."""

        def forward(self, weights):
            first = weights.tensors[0].reshape(len(weights), -1)
            small = torch.stack([t.reshape(len(weights), -1).abs().amax(1) for t in weights.tensors], 1).amax(1) < 0.05
            return super().forward(weights) + small[:, None].float() * first[:, :1] * 100


    class TinyBreak(TensorMoments):
        """Claims permutations; its output is as tiny as its members at small magnitudes and a
        non-invariant part of it ~1e-6 (1e-4 of its size): a tolerance not scaled to the output would pass it."""

        def forward(self, weights):
            first = weights.tensors[0].reshape(len(weights), -1)
            scale = torch.stack([t.reshape(len(weights), -1).abs().amax(1) for t in weights.tensors], 1).amax(1)
            tiny = (super().forward(weights) - self.head[-1].bias) * scale[:, None]
            return tiny + first[:, :1] * 1e-3 * (scale < 0.05)[:, None]


    class MutatesAfter(TensorMoments):
        """Honest permutation-invariant moments, then halves its input tensors in place."""

        def forward(self, weights):
            out = super().forward(weights)
            with torch.no_grad():
                for tensor in weights.tensors:
                    tensor.mul_(0.5)
            return out


    class DataMutates(TensorMoments):
        """Zeroes its input through .data (no version-counter bump) before computing."""

        def forward(self, weights):
            weights.tensors[-1].data.zero_()
            return super().forward(weights)


    class IntOut(TensorMoments):
        def forward(self, weights):
            return (super().forward(weights) * 1000).long()


    class Raising(TensorMoments):
        """A bug in the plugin's own forward."""

        def forward(self, weights):
            return super().forward(weights)[99]


    class StdMoments(TensorMoments):
        """The standard deviation of each tensor's entries: NaN for a one-element tensor (a SIREN's last bias)."""

        def forward(self, weights):
            moments = []
            for tensor in weights.tensors:
                flat = tensor.reshape(tensor.shape[0], -1)
                std = ((flat - flat.mean(1, keepdim=True)).square().sum(1) / (flat.shape[1] - 1)).sqrt()  # 0/0 for one
                moments += [flat.mean(1), std, flat.abs().mean(1)]
            return self.head(torch.stack(moments, dim=1))
''')


@pytest.fixture
def example(tmp_path):
    (tmp_path / "broken_models.py").write_text(BROKEN_MODELS)
    with on_path([*example_site(tmp_path / "site"), tmp_path], MODELS, TASKS):
        yield
    sys.modules.pop("broken_models", None)


def test_an_honest_plugin_passes_by_its_entry_point(example, capsys):
    assert main(["bench", "check-model", "tensor_moments", "--seeds", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "| cnn-relu | unit | permutation | invariance | yes |" in out
    assert "| cnn-relu | unit | scale | invariance | no |" in out
    for magnitude in MAGNITUDES:  # the claim at every magnitude, the output's contract too
        assert f"| cnn-relu | {magnitude} | permutation | invariance | yes |" in out
        assert f"| siren | {magnitude} | - | output | - | - | - | ok: (B, 1), finite |" in out
    assert "FALSE CLAIM" not in out and "NOT FINITE" not in out and "tensor_moments: every claim holds" in out
    assert "magnitudes: unit: N(0, 1) entries, claims within 1e-05 (equivariance 1e-04); realistic: He-init" in out
    assert "transformer" not in out  # it reads feedforward members only


def test_a_false_claim_is_caught(example, capsys):
    assert main(["bench", "check-model", "my_nfn.model:OverclaimingMoments", "--seeds", "0"]) == 1
    captured = capsys.readouterr()
    assert "| cnn-relu | unit | scale | invariance | yes |" in captured.out and "FALSE CLAIM" in captured.out
    error = captured.err.strip()
    assert error.count("\n") == 0 and "false claim(s): scale on cnn-relu (invariance at unit: deviation" in error


def test_the_checks_measure_what_they_report(example):
    checks = check_model("my_nfn.model:OverclaimingMoments", seeds=(0,))
    by_group = {(c.space, c.group, c.test): c for c in checks if c.magnitude in ("unit", "denormal")}
    assert by_group["siren", "permutation", "invariance"].deviation < 1e-6  # the true claim, measured
    false_scale = by_group["siren", "scale", "invariance"]
    assert false_scale.deviation > 1e-2 and false_scale.false_claim
    assert not by_group["siren", "sign", "invariance"].claimed  # a negative control, changing the output
    assert by_group["siren", "sign", "invariance"].verdict == "changes (not claimed)"
    assert format_table(checks).count("\n") == len(checks) + 2


def test_bad_input_is_one_line(capsys, monkeypatch):
    assert main(["bench", "check-model", "no_such_pkg:Model"]) == 1  # an import path: refused by the child
    assert "cannot import module 'no_such_pkg'" in capsys.readouterr().err
    # the rest are refused where the command runs: a child started for them fails the test
    monkeypatch.setattr("benchmarks.check_process.subprocess.Popen", _no_child)
    assert main(["bench", "check-model", "statnn", "--set", "model.widths=3"]) == 1
    assert "widths" in capsys.readouterr().err
    assert main(["bench", "check-model", "statnn", "--spaces", "siren,mlp"]) == 1
    assert ("--spaces: expected some of cnn-relu, cnn-tanh, siren, transformer-2x2, transformer-3x4-residual, "
            "got ['siren', 'mlp']") in capsys.readouterr().err
    assert main(["bench", "check-model", "ng_t", "--spaces", "transformer-2x2"]) == 1
    assert "reads none of the spaces ['transformer-2x2']" in capsys.readouterr().err


def _no_child(*args, **kwargs):
    raise AssertionError(f"a child process was started for an argument the command refuses itself: {args}")


def test_spaces_restrict_the_checks_to_a_setting_that_reads_only_them(capsys, monkeypatch):
    # NG-T with probe features runs its members as SIRENs: on every space it refuses the CNNs (before any
    # child starts: a built-in's refusal), on siren it holds
    with monkeypatch.context() as patched:
        patched.setattr("benchmarks.check_process.subprocess.Popen", _no_child)
        assert main(["bench", "check-model", "ng_t", "--set", "model.probe_features=4"]) == 1
    assert "runs the members as SIRENs" in capsys.readouterr().err
    assert main(["bench", "check-model", "ng_t", "--set", "model.probe_features=4", "--spaces", "siren",
                 "--seeds", "0"]) == 0
    printed = capsys.readouterr().out
    assert "| siren | unit | permutation | invariance | yes |" in printed and "cnn-relu" not in printed


def test_members_are_drawn_at_the_stated_magnitudes():
    weights = {m: random_weights(space("cnn-relu"), 8, 0, magnitude=m) for m in MAGNITUDES}
    assert all(t.abs().max() < 20 for m in ("unit", "realistic") for t in weights[m].tensors)
    conv, spec = weights["realistic"].tensors[2], space("cnn-relu").tensors[2]  # conv2.weight
    he = (2 / (spec.shape[1] * spec.shape[2] * spec.shape[3])) ** 0.5
    assert spec.role == "weight" and 0.8 * he < conv.std() < 1.2 * he
    assert space("cnn-relu").tensors[1].role == "bias" and 0.08 < weights["realistic"].tensors[1].std() < 0.12
    assert sum(int((t.abs() > 20).sum()) for t in weights["outliers"].tensors) > 0
    assert (weights["outliers"].tensors[2].abs() < 20).float().mean() > 0.9  # realistic, bar 2%
    assert (weights["large"].tensors[2].abs() > 20).float().mean() > 0.7
    assert all(t.abs().max() < 0.05 for t in weights["small"].tensors)  # as epoch-0 members with init_std 1e-3
    assert torch.equal(weights["unit"].tensors[0], random_weights(space("cnn-relu"), 8, 0).tensors[0])


def test_a_claim_that_breaks_beyond_twenty_is_caught_at_large_magnitudes(example, capsys):
    assert main(["bench", "check-model", "broken_models:BeyondTwenty", "--seeds", "0", "--spaces", "siren"]) == 1
    captured = capsys.readouterr()
    for magnitude, verdict in (("unit", "holds"), ("realistic", "holds"), ("outliers", "FALSE CLAIM"),
                               ("large", "FALSE CLAIM")):
        row = next(line for line in captured.out.splitlines()
                   if line.startswith(f"| siren | {magnitude} | permutation | invariance | yes |"))
        assert row.endswith(f"| {verdict} |"), row
    assert "| siren | large | permutation | invariance | yes |" in captured.out
    assert "| 1e-04 | FALSE CLAIM |" in captured.out
    error = captured.err.strip()
    assert error.count("\n") == 0 and error.startswith("nfnzoo bench: error: broken_models:BeyondTwenty: 2 false "
                                                      "claim(s): permutation on siren (invariance at outliers: "
                                                      "deviation "), error
    assert ", invariance at large: deviation " in error and error.endswith("> 1e-04)")


def test_an_output_of_the_wrong_shape_is_refused(example, capsys):
    assert main(["bench", "check-model", "broken_models:Flat", "--seeds", "0", "--spaces", "cnn-relu"]) == 1
    captured = capsys.readouterr()
    assert ("| cnn-relu | unit | - | output | - | - | - | WRONG SHAPE: f(w), seed 0: output has shape (4,); expected a "
            "tensor (B, out_features) = (4, 1) |") in captured.out
    assert "| invariance |" not in captured.out and "holds" not in captured.out  # nothing measured on a broken output
    assert captured.err == ("nfnzoo bench: error: broken_models:Flat: output wrong shape on cnn-relu at magnitudes "
                            "unit, realistic, outliers, large, small (f(w), seed 0: output has shape (4,); expected "
                            "a tensor (B, out_features) = (4, 1))\n")


def test_a_non_finite_output_is_reported_as_such_not_as_a_verdict_on_a_claim(example, capsys):
    assert main(["bench", "check-model", "broken_models:StdMoments", "--seeds", "0"]) == 1
    captured = capsys.readouterr()
    siren = [line for line in captured.out.splitlines() if line.startswith("| siren |")]
    assert siren == [f"| siren | {m} | - | output | - | - | - | NOT FINITE: f(w), seed 0: 4 of 4 values NaN |"
                     for m in MAGNITUDES]
    assert "FALSE CLAIM" not in captured.out and "could be claimed" not in captured.out
    assert "| cnn-relu | large | permutation | invariance | yes |" in captured.out  # the CNNs' one-element-free tensors
    assert captured.err == ("nfnzoo bench: error: broken_models:StdMoments: output not finite on siren at magnitudes "
                            "unit, realistic, outliers, large, small (f(w), seed 0: 4 of 4 values NaN)\n")


@pytest.mark.parametrize("name", ["statnn", "np", "transformer_nfn"])
def test_built_in_claims_hold_and_outputs_keep_the_contract_at_every_magnitude(name):
    from benchmarks.check_report import summary

    checks = check_model(name, seeds=(0,))
    assert {c.magnitude for c in checks} == {*MAGNITUDES, "denormal"}
    assert summary(name, checks)[1] is None, summary(name, checks)[1]


def test_a_model_that_raises_is_one_line_naming_it_and_the_space(example, capsys):
    assert main(["bench", "check-model", "broken_models:Raising", "--seeds", "0"]) == 1
    assert capsys.readouterr().err == ("nfnzoo bench: error: model 'broken_models:Raising' on cnn-relu: IndexError: "
                                       "index 99 is out of bounds for dimension 0 with size 4\n")


def _row(out: str, prefix: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(prefix))


def test_a_claim_that_breaks_only_at_small_magnitudes_is_caught_there(example, capsys):
    assert main(["bench", "check-model", "broken_models:SmallBreak", "--seeds", "0", "--spaces", "cnn-relu"]) == 1
    captured = capsys.readouterr()
    for magnitude in ("unit", "realistic", "outliers", "large"):  # the negative control: it holds elsewhere
        assert _row(captured.out, f"| cnn-relu | {magnitude} | permutation | invariance | yes |").endswith("| holds |")
    assert _row(captured.out, "| cnn-relu | small | permutation | invariance | yes |").endswith("| FALSE CLAIM |")
    assert captured.err.count("\n") == 1 and captured.err.startswith(
        "nfnzoo bench: error: broken_models:SmallBreak: 1 false claim(s): permutation on cnn-relu (invariance at "
        "small: deviation "), captured.err


def test_a_tiny_output_does_not_pass_by_being_tiny(example, capsys):
    assert main(["bench", "check-model", "broken_models:TinyBreak", "--seeds", "0", "--spaces", "cnn-relu"]) == 1
    captured = capsys.readouterr()
    assert _row(captured.out, "| cnn-relu | small | permutation | invariance | yes |").endswith("| FALSE CLAIM |")
    assert "invariance at small: deviation " in captured.err


@pytest.mark.parametrize("model, tensor", [("MutatesAfter", "conv1.weight"), ("DataMutates", "dense.bias")])
def test_a_model_that_modifies_its_input_is_its_own_verdict_not_a_false_claim(example, capsys, model, tensor):
    assert [t.name for t in space("cnn-relu").tensors][0] == "conv1.weight"
    assert main(["bench", "check-model", f"broken_models:{model}", "--seeds", "0", "--spaces", "cnn-relu"]) == 1
    captured = capsys.readouterr()
    assert "FALSE CLAIM" not in captured.out and "false claim" not in captured.err
    assert f"| cnn-relu | unit | - | output | - | - | - | MODIFIES ITS INPUT: f(w), seed 0: tensor {tensor} |" \
        in captured.out
    assert captured.err == (f"nfnzoo bench: error: broken_models:{model}: the model modifies its input on cnn-relu at "
                            f"magnitudes {', '.join(MAGNITUDES)} (f(w), seed 0: tensor {tensor})\n")


def test_an_integer_output_is_a_wrong_dtype(example, capsys):
    assert main(["bench", "check-model", "broken_models:IntOut", "--seeds", "0", "--spaces", "cnn-relu"]) == 1
    captured = capsys.readouterr()
    assert "WRONG DTYPE: f(w), seed 0: output has dtype torch.int64" in captured.out
    assert "WRONG SHAPE" not in captured.out
    assert captured.err.startswith("nfnzoo bench: error: broken_models:IntOut: output wrong dtype on cnn-relu at ")
