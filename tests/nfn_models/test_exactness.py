"""Every registered model's symmetry claims, checked over the registry, with negative controls.

The checks are `benchmarks.check_model`'s (what `nfnzoo bench check-model` runs on any model;
its docstring says which weight spaces, groups and tolerances): a claimed group must leave the
output unchanged over three seeds and on members holding denormal weights; an unclaimed group
must change it, which shows the check can fail. Models with a weight-space output are checked
for equivariance the same way. A new model is covered by registering it.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.check_model import (SPACE_GROUPS, SPACES, build_model, check_denormal, check_equivariance,
                                    check_invariance, groups, reads, space, weight_output_spaces)
from nfn_models import claimed_symmetries, create_model, models_with_output
from nfn_models.registry import MODELS, weight_space_kind

SHIPPED = MODELS.builtin_names()  # the models this package ships; a plugin is checked with check-model, not here

CASES = [(name, space_name, group) for name in SHIPPED for space_name in sorted(SPACES)
         if reads(name, space_name) for group in groups(space_name)]


@pytest.mark.parametrize("name, space_name, group", CASES)
def test_claimed_groups_leave_the_output_unchanged_and_the_others_do_not(name, space_name, group):
    check = check_invariance(name, space_name, group)
    if check.claimed:
        assert not check.false_claim, f"{name} claims {group} on {space_name}: deviation {check.deviation:.2e}"
    else:
        assert check.deviation > check.moves, f"{name} is invariant to {group} it does not claim"


@pytest.mark.parametrize("name, space_name", [(n, s) for n in SHIPPED for s in sorted(SPACES) if reads(n, s)])
def test_claims_hold_on_members_with_denormal_weights(name, space_name):
    for group in claimed_symmetries(build_model(name, space_name, 0)):
        check = check_denormal(name, space_name, group)
        assert not check.false_claim, f"{name}/{group} on denormal {space_name}: deviation {check.deviation:.2e}"


EQUIVARIANT_CASES = [(name, space_name, group) for name in models_with_output("weights")
                     for space_name in weight_output_spaces(name) for group in groups(space_name)]


@pytest.mark.parametrize("name, space_name, group", EQUIVARIANT_CASES)
def test_weight_outputs_are_equivariant_to_the_claimed_groups_only(name, space_name, group):
    check = check_equivariance(name, space_name, group)
    if check.claimed:
        assert not check.false_claim, f"{name}'s weight output is not equivariant to {group}: {check.deviation:.2e}"
    else:
        assert check.deviation > check.moves, (f"{name}'s weight output is equivariant to {group}, "
                                               "which it does not claim")


def test_a_weight_output_is_refused_where_a_model_has_none():
    assert set(models_with_output("weights")) >= {"np", "hnp", "monomial_nfn", "magep_nfn", "mlp"}
    with pytest.raises(ValueError, match="model 'statnn' has no 'weights' output; the models with one are"):
        create_model("statnn", space("siren"), output="weights")
    with pytest.raises(ValueError, match="dense description"):
        create_model("magep_nfn", space("cnn-relu"), output="weights")


def test_every_registered_model_states_its_claims():
    for name in SHIPPED:
        read = [space_name for space_name in SPACES if reads(name, space_name)]
        assert read, f"{name} reads none of the test weight spaces"
        for space_name in read:
            claims = claimed_symmetries(build_model(name, space_name, 0))
            assert set(claims) <= set(SPACE_GROUPS[weight_space_kind(space(space_name))]), (name, space_name, claims)
            if {"scale", "sign"} & set(claims):
                assert "permutation" in claims, f"{name}: a monomial claim implies the permutation one"


def test_a_model_refuses_a_weight_space_kind_it_does_not_read():
    with pytest.raises(ValueError, match="reads feedforward weight spaces; these weights are a transformer"):
        create_model("np", space("transformer-2x2"))
    with pytest.raises(ValueError, match="reads transformer weight spaces; these weights are a feedforward"):
        create_model("transformer_nfn", space("cnn-relu"))


def test_an_unknown_claim_is_refused():
    class Odd(torch.nn.Module):
        symmetries = ("rotation",)

    with pytest.raises(ValueError, match="unknown symmetries.*rotation"):
        claimed_symmetries(Odd())
