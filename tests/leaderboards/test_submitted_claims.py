"""A results file's claims block is taken only as `benchmarks.claims` writes it: each refusal is one line at
`nfnzoo leaderboard submit` (exit 1) naming the file and the key; the block the checker writes is accepted."""

from __future__ import annotations

import copy

import pytest


def _check(group: str, test: str, claimed: bool, deviation: float | None, verdict: str,
           tolerance: float | None = 1e-5) -> dict:
    return {"space": "cnn-relu", "group": group, "test": test, "magnitude": "unit", "claimed": claimed,
            "deviation": deviation, "tolerance": tolerance, "verdict": verdict}


CLAIMS = {"groups": ["permutation"], "verdict": "holds", "spaces": ["cnn-relu"], "seeds": [0, 1, 2],
          "model_config": {}, "check_time_s": 1.5, "error": None,
          "checks": [_check("-", "output", False, None, "ok: (B, 1), finite", None),
                     _check("permutation", "invariance", True, 2e-7, "holds"),
                     _check("scale", "invariance", False, 0.3, "changes (not claimed)")]}
BROKEN = _check("-", "output", False, None, "NOT FINITE: f(w), seed 0: 4 of 4 values NaN", None)


def _set(**changes):
    def change(claims):
        claims.update(changes)
    return change


def _check_field(index: int, **changes):
    def change(claims):
        claims["checks"][index].update(changes)
    return change


def _add(check):
    return lambda claims: claims["checks"].append(check)


@pytest.mark.parametrize("change, key, reason", [
    (_set(checks=[]), "claims.checks", "'holds' needs a passing check of each claimed group; none for ['permutation']"),
    (_set(checks=[], groups=[]), "claims.checks", "'holds' needs the checks it was reached by; none is recorded"),
    (_set(groups=["permutation", "scale"]), "claims.checks",
     "'holds' needs a passing check of each claimed group; none for ['scale']"),
    (_set(verdict="fine"), "claims.verdict", "expected one of holds, false claim, unmeasured, not checked"),
    (_check_field(1, verdict="looks good"), "claims.checks[1].verdict", "expected one of holds, FALSE CLAIM"),
    (_check_field(1, verdict="ok: trust me"), "claims.checks[1].verdict", "'ok' is not a verdict of a 'invariance'"),
    (_check_field(1, verdict="FALSE CLAIM"), "claims.checks[1].verdict", "'FALSE CLAIM' disagrees with deviation"),
    (_check_field(1, deviation=None), "claims.checks[1].verdict", "'holds' needs a claimed group measured"),
    (_check_field(2, claimed=True, verdict="holds", deviation=0.0), "claims.groups",
     "expected the groups of the claimed checks, ['permutation', 'scale'], got ['permutation']"),
    (_check_field(1, test="vibes"), "claims.checks[1].test", "expected one of output, invariance, denormal"),
    (_check_field(1, space="cnn-tanh"), "claims.checks[1].space", "expected one of the checked spaces ['cnn-relu']"),
    (_add(BROKEN), "claims.verdict", "'holds', but 1 check(s) measured nothing"),
    (_set(verdict="unmeasured"), "claims.verdict", "'unmeasured', but every check measured its output"),
    (_set(verdict="not checked", error="RuntimeError: no"), "claims.checks", "a block that was not checked holds no"),
])
def test_a_claims_block_the_checker_would_not_write_is_refused_in_one_line(root, write_results, make_data, board_cli,
                                                                           change, key, reason):
    data = make_data()
    data["claims"] = copy.deepcopy(CLAIMS)
    change(data["claims"])
    path = write_results(data)
    done = board_cli("leaderboard", "submit", str(path), "--root", str(root))
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"nfnzoo leaderboard: error: {path} was rejected: {path}: {key}: "), lines[0]
    assert reason in lines[0], lines[0]
    assert not (root / "entries").exists()


@pytest.mark.parametrize("change", [
    None,  # the block as the checker writes it
    _set(groups=[], checks=[CLAIMS["checks"][0], CLAIMS["checks"][2]]),  # a model that claims nothing
    _set(verdict="unmeasured", checks=[*CLAIMS["checks"], BROKEN]),
    _set(verdict="not checked", groups=[], checks=[], error="RuntimeError: cannot be built small"),
    # a claimed group no check reached: the output broke the contract first (the model's claims, recorded)
    _set(verdict="unmeasured", groups=["permutation", "sign"], checks=[*CLAIMS["checks"], BROKEN]),
    _set(verdict="unmeasured", groups=["permutation"], checks=[BROKEN]),  # every output broke
])
def test_a_block_as_the_checker_writes_it_is_accepted(root, write_results, make_data, change):
    from leaderboards import submit

    data = make_data()
    data["claims"] = copy.deepcopy(CLAIMS)
    if change is not None:
        change(data["claims"])
    assert submit(write_results(data), root).path.exists()  # the negative control


def test_a_group_claimed_without_a_check_needs_an_output_that_broke():
    """The model's own claims may exceed the claimed checks' groups only where an output broke the contract."""
    from benchmarks.claims import block_problem
    from benchmarks.results import Claims
    from zoo.validation.schema import from_data

    claims = copy.deepcopy(CLAIMS)
    claims.update(verdict="false claim", groups=["permutation", "scale", "sign"],  # 'sign': never checked
                  checks=[*CLAIMS["checks"][:2], _check("scale", "invariance", True, 0.3, "FALSE CLAIM")])
    assert block_problem(from_data(Claims, claims, where="r")) == (
        "groups", "['sign'] claimed without a check, which only an output that broke the contract explains; "
                  "expected the groups of the claimed checks, ['permutation', 'scale']")
    claims["checks"].append(BROKEN)  # the output broke somewhere: the claim stands, unmeasured
    assert block_problem(from_data(Claims, claims, where="r")) is None


def test_every_claims_block_on_the_official_board_is_one_the_checker_writes():
    from benchmarks.claims import block_problem
    from leaderboards import OFFICIAL_ROOT
    from leaderboards.entries import load_entries

    blocks = [entry.results.claims for _, entry in load_entries(OFFICIAL_ROOT) if entry.results.claims is not None]
    assert blocks and [block_problem(claims) for claims in blocks] == [None] * len(blocks)


@pytest.mark.parametrize("failing, said",
                         [(1, "1 failing check: "), (2, "2 failing checks: "), (5, "5 failing checks, the worst 3: ")])
def test_a_false_claims_refusal_counts_every_failing_check(root, write_results, make_data, failing, said):
    from leaderboards import SubmissionRejected, submit

    data = make_data()
    data["claims"] = copy.deepcopy(CLAIMS)
    data["claims"].update(verdict="false claim", groups=["permutation", "scale"])
    data["claims"]["checks"] += [dict(_check("scale", "invariance", True, 0.1 * (i + 1), "FALSE CLAIM"),
                                      magnitude=f"m{i}") for i in range(failing)]
    with pytest.raises(SubmissionRejected) as refused:
        submit(write_results(data), root)
    (problem,) = refused.value.problems
    assert "makes a false symmetry claim" in problem and said in problem, problem
    assert ("and 2 more" in problem) == (failing == 5) and f"at m{failing - 1} (deviation" in problem


@pytest.mark.parametrize("change, shown", [
    (None, "permutation"),
    (_set(verdict="unmeasured", checks=[*CLAIMS["checks"], BROKEN]), "permutation (partly unmeasured)"),
    (_set(verdict="unmeasured", checks=[BROKEN]), "permutation (unmeasured)"),  # every output broke: none measured
    (_set(verdict="unmeasured", groups=[], checks=[BROKEN]), "none claimed (partly unmeasured)"),
])
def test_the_claims_cell_says_what_was_measured(make_data, change, shown):
    from benchmarks.results import Results
    from leaderboards.board import claims_text
    from zoo.validation.schema import from_data

    data = make_data()
    data["claims"] = copy.deepcopy(CLAIMS)
    if change is not None:
        change(data["claims"])
    assert claims_text(from_data(Results, data, where="r")) == shown
