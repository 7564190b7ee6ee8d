"""What a run says of a model's claims (`benchmarks.claims`): the groups are the model's own, also where
every output breaks the contract, and a false claim's line counts every failing check."""

from __future__ import annotations

import sys
import textwrap

import pytest

from benchmarks.claims import MAX_LISTED, block_problem, check_claims, describe
from benchmarks.results import Claims
from benchmarks.tasks.registry import TASKS
from nfn_models.registry import MODELS
from plugin_site import example_site, on_path
from zoo.validation.schema import from_data

MODELS_SOURCE = textwrap.dedent('''
    import torch

    from my_nfn.model import TensorMoments


    class AllNaN(TensorMoments):
        """Claims permutations; every output is NaN, so no group is ever checked."""

        def forward(self, weights):
            return super().forward(weights) * float("nan")


    class AllNaNNoClaim(AllNaN):
        symmetries = ()


    class Overclaims(TensorMoments):
        """Claims every feed-forward group; the moments change under scalings and sign flips."""

        symmetries = ("permutation", "scale", "sign")
''')


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    folder = tmp_path_factory.mktemp("claims_plugins")
    (folder / "claim_models.py").write_text(MODELS_SOURCE)
    with on_path([*example_site(folder / "site"), folder], MODELS, TASKS):
        yield
    sys.modules.pop("claim_models", None)


@pytest.mark.parametrize("model, groups, verdict, line", [
    ("claim_models:AllNaN", ["permutation"], "unmeasured", "claims permutation: none measured, the output broke"),
    ("claim_models:AllNaNNoClaim", [], "unmeasured", "claims no group: hold where measured"),
    ("my_nfn.model:TensorMoments", ["permutation"], "holds", "claims permutation: hold"),  # the negative control
])
def test_the_groups_are_the_models_claims_even_where_every_output_breaks(plugins, model, groups, verdict, line):
    claims = check_claims(model, {}, "cnn")
    assert (claims["groups"], claims["verdict"]) == (groups, verdict)
    assert describe(claims).startswith(line), describe(claims)
    assert block_problem(from_data(Claims, claims, where="claims")) is None  # a block submit takes


def test_a_false_claims_line_counts_every_failing_check(plugins):
    claims = check_claims("claim_models:Overclaims", {}, "cnn")
    failing = [c for c in claims["checks"] if c["verdict"] == "FALSE CLAIM"]
    assert claims["verdict"] == "false claim" and len(failing) > MAX_LISTED
    said = describe(claims)
    assert f"; {len(failing)} failing checks, the worst {MAX_LISTED}: " in said
    assert f"; and {len(failing) - MAX_LISTED} more (" in said
    worst = max(failing, key=lambda c: c["deviation"] / c["tolerance"])
    first = said.split(f"the worst {MAX_LISTED}: ")[1].split(";")[0]
    assert first.startswith(f"{worst['group']} {worst['test']} on {worst['space']} at {worst['magnitude']} ")


def _failing(count: int) -> dict:
    checks = [{"space": "cnn-relu", "group": "scale", "test": "invariance", "magnitude": f"m{i}", "claimed": True,
               "deviation": 1.0 + i, "tolerance": 1e-5, "verdict": "FALSE CLAIM"} for i in range(count)]
    return {"groups": ["scale"], "verdict": "false claim", "spaces": ["cnn-relu"], "checks": checks,
            "check_time_s": 1.0, "error": None}


@pytest.mark.parametrize("count, listed, rest",
                         [(1, 1, 0), (MAX_LISTED, MAX_LISTED, 0), (MAX_LISTED + 1, MAX_LISTED, 1),
                                                 (12, MAX_LISTED, 12 - MAX_LISTED)])
def test_every_failing_check_is_listed_or_counted(count, listed, rest):
    said = describe(_failing(count))
    assert f"; {count} failing check{'s' if count > 1 else ''}" in said and said.count(" (deviation ") == listed
    assert (f"and {rest} more" in said) == bool(rest)
    assert f"at m{count - 1} (deviation {count:.3g}" in said  # the worst is always named
