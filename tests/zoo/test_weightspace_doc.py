"""docs/weight-spaces.md is what `zoo.weightspace_doc` renders from the families now, its measured
factors agree with the architectures, and its worked example runs (with negative controls)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo import weightspace_doc
from zoo.families import create_family
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.weightspace import TensorSpec, WeightSpace

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "weight-spaces.md"


def test_the_committed_page_is_what_the_families_render_now():
    assert PAGE.read_text(encoding="utf-8") == weightspace_doc.render_page(), \
        "docs/weight-spaces.md is stale: run `python -m zoo.weightspace_doc`"


def test_check_mode_passes_on_the_page_and_fails_on_a_stale_copy(tmp_path):
    check = [sys.executable, "-m", "zoo.weightspace_doc", "--check"]
    current = subprocess.run(check, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert current.returncode == 0, current.stderr
    stale = tmp_path / "weight-spaces.md"
    stale.write_text(PAGE.read_text(encoding="utf-8").replace("(16, 16, 3, 3)", "(16, 16, 5, 5)", 1))
    refused = subprocess.run([*check, "--out", str(stale)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "is stale" in refused.stderr and str(stale) in refused.stderr


def test_the_page_lists_every_tensor_of_every_family_shown():
    page = PAGE.read_text(encoding="utf-8")
    for variant in weightspace_doc.VARIANTS:
        for spec in create_family(variant.family).weight_space(variant.architecture).tensors:
            assert f"`{spec.name}` | {tuple(spec.shape)} |" in page, (variant.title, spec.name)
    assert {variant.family for variant in weightspace_doc.VARIANTS} == {"cnn", "pooled_cnn", "inr", "transformer"}


def _labels(family: str, architecture: dict, hparams: dict) -> tuple[list, dict]:
    found = create_family(family)
    return weightspace_doc.factors(found.weight_space(architecture), found.symmetry(architecture, hparams))


def test_the_measured_factors_are_the_hidden_layers():
    """CNN: one factor per convolution, the dense layer reads the last one through global pooling;
    pooled CNN: the flatten shows as blocks of H x W; transformer: the residual stream pins the model
    dimension, so the residual member has fewer factors."""
    cnn, labels = _labels("cnn", {}, {"activation": "relu"})
    assert [f.size for f in cnn] == [16, 16, 16] and labels["dense.weight", 1] == "π3"
    assert labels["dense.weight", 0] == labels["conv1.weight", 1] == labels["conv2.weight", 2] == "fixed"
    pooled, labels = _labels("pooled_cnn", {}, {"activation": "relu"})
    architecture = create_family("pooled_cnn").Architecture()
    block = architecture.flat_features // architecture.channels[-1]
    assert labels["dense1.weight", 1] == f"π3 in blocks of {block}" and block == 9 and len(pooled) == 4
    plain, _ = _labels("transformer", {}, {})
    residual, labels = _labels("transformer", {"residual": True}, {})
    assert len(plain) == 10 and len(residual) == 6  # per block: Q/K rows, V rows, MLP units (+ P_O, P_B without)
    assert labels["encoder.1.attention.queries.weight", 1] == "fixed"
    head_dim = create_family("transformer").Architecture().head_dim
    assert [f.group_size for f in residual] == [head_dim, head_dim, 1] * 2  # a head's rows move together
    assert {f.group_size for f in cnn + pooled} == {1}


def test_a_group_that_permutes_nothing_shows_no_factor():
    """Negative control: the probe reports what the group does, not what the shapes suggest: a
    one-layer space has no hidden units, so every axis is fixed."""
    space = WeightSpace((TensorSpec("fc.weight", (3, 4), "weight", 0), TensorSpec("fc.bias", (3,), "bias", 0)))
    found, labels = weightspace_doc.factors(space, FeedforwardSymmetry(space))
    assert found == [] and set(labels.values()) == {"fixed"}
    two = WeightSpace(space.tensors + (TensorSpec("out.weight", (2, 3), "weight", 1),))
    found, labels = weightspace_doc.factors(two, FeedforwardSymmetry(two))
    assert [f.size for f in found] == [3] and labels["out.weight", 1] == "π1"


def test_a_mixing_group_is_refused_as_a_relabelling():
    """The probe needs a relabelling: a group that mixes entries (scalings left on) is an error."""
    space = create_family("cnn").weight_space({})

    @dataclasses.dataclass(frozen=True)
    class Scaling(FeedforwardSymmetry):  # mode cannot be switched off: the subgroup still scales
        def act(self, element, weights):
            return super().act(dataclasses.replace(element, scales=tuple(s * 2 for s in element.scales)), weights)

    with pytest.raises(ValueError, match="does not permute its entries"):
        weightspace_doc.factors(space, Scaling(space))


def test_the_worked_example_on_the_page_runs():
    page = PAGE.read_text(encoding="utf-8")
    code = re.search(r"<!-- weight-space-example -->\n```python\n(.*?)```", page, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(PAGE), "exec"), namespace)  # the example asserts its own shapes and invariance
    assert len(namespace["weights"]) == 4 and len(namespace["batch"]) == 2
    assert not torch.equal(namespace["moved"].tensors[0], namespace["batch"].tensors[0])  # the element moved it
