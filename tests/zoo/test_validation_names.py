"""The one look-alike rule for names (`zoo.validation.names`): which two names a reader could not tell apart."""

from __future__ import annotations

import pytest

from zoo.validation.names import CONFUSABLE, RULE, builtin_problem, look_alike, readings

BUILTINS = ("statnn", "mlp", "np", "ng_t", "xgboost")


@pytest.mark.parametrize("name, builtin", [
    ("StatNN", "statnn"), ("STATNN", "statnn"), ("stat_nn", "statnn"), ("stat-nn", "statnn"), ("Stat_NN", "statnn"),
    ("rnlp", "mlp"), ("RNLP", "mlp"), ("m1p", "mlp"), ("mIp", "mlp"), ("MIP", "mlp"),
    ("N-P", "np"), ("ngt", "ng_t"), ("ng-t", "ng_t"), ("xgb00st", "xgboost"),
])
def test_a_look_alike_of_a_builtin_is_refused_naming_it(name, builtin):
    problem = builtin_problem("NFN model", name, BUILTINS)
    assert problem == (f"NFN model name {name!r} looks like the built-in NFN model {builtin!r} ({RULE}); choose a "
                       "name that cannot be mistaken for it")


@pytest.mark.parametrize("name", ["statnn-wide", "5tatnn", "mip", "np_nfn", "layersets", "tensor_moments", "m"])
def test_a_genuinely_different_name_passes(name):
    assert builtin_problem("NFN model", name, BUILTINS) is None  # the negative control ("5" is not in the table)


def test_a_builtins_own_name_passes_only_for_that_builtin():
    assert builtin_problem("NFN model", "statnn", BUILTINS, own="statnn") is None
    assert "is the built-in NFN model 'mlp''s" in builtin_problem("NFN model", "mlp", BUILTINS, own="statnn")
    assert "is the built-in NFN model 'mlp''s" in builtin_problem("NFN model", "mlp", BUILTINS)
    assert "looks like the built-in NFN model 'statnn'" in builtin_problem("NFN model", "StatNN", BUILTINS,
                                                                           own="statnn")  # even the built-in's run


def test_readings():
    assert readings("MIP") == {"mip", "mlp"}  # an upper-case I reads as i or as l
    assert look_alike("MIP", "mip") and look_alike("MIP", "mlp") and not look_alike("mip", "mlp")
    assert look_alike("resnet-l8", "resnet-18") and look_alike("vvide", "wide") and look_alike("Gnn_Small", "gnnsmall")
    assert not look_alike("r-nlp", "mlp")  # a separator between r and n: not an m
    assert all(k in RULE for k in CONFUSABLE if k != "_") and "letter case, - and _ aside" in RULE
