"""A model's symmetry claims on the record: checked before a benchmark trains, kept in its results.

Every benchmark run first runs the registry's exactness checks. That covers `nfnzoo bench run`,
`benchmarks.evaluate` and the suites. The checks are `benchmarks.check_model`'s, what
`nfnzoo bench check-model` runs. They build the model small and draw random members at every
magnitude. They use the families' own random group elements, and negative controls.

They run on the weight spaces of the zoo's family. For a CNN these are the ReLU and tanh members,
for an INR SIRENs, and for a transformer both transformer spaces. They use the run's own model
hyperparameters, with three exceptions the check sets itself. These are its sizes
(`benchmarks.check_model.SMALL`), the members' architecture, and the output kind. The check runs
once per model, family and configuration in a process. Its cost is on docs/bring-your-own-nfn.md.

The results' `claims` block (`benchmarks.results.Claims`) records the groups the model claims and
one verdict. It also records the seeds and the hyperparameters checked, and every check with its
deviation and tolerance. The verdict is one of four.

`holds`: every claimed group left the output unchanged within its tolerance, at every magnitude.

`false claim`: a claimed group moved the output past its tolerance. The run still trains, since its
numbers are real, and says so on stderr. `nfnzoo leaderboard submit` refuses the results.

`unmeasured`: no claim failed, but some checks measured nothing. There the output broke the
contract, e.g. not finite at a magnitude. MAGEP-NFN at 100x weights in float32 is an example.

`not checked`: the check itself raised, e.g. for a plugin that cannot be built small. The error is
kept.

Each check's verdict is one of `CHECK_VERDICTS`, as `benchmarks.check_model.Check.verdict` writes
it. `groups` are the groups the model claims (`declared_groups`: its `symmetries` on the checked
spaces). They include groups no check measured. Where every output breaks the contract, no group is
checked. The line then says what is claimed, and that none of it was measured. A false claim's line
counts every failing check, and names the worst (`listed`).

A results file's block is taken only as this module writes it (`block_problem`, at submit). Every
verdict must come from its set, and agree with its check's numbers. The groups must be those of the
claimed checks. Others the model claims may appear only beside a check that measured nothing.
`holds` needs a passing check of each claimed group, and nothing unmeasured. `unmeasured` needs a
check that measured nothing. `not checked` needs no check."""

from __future__ import annotations

import functools
import json
import math
import time
from typing import Any, Mapping, Sequence

from benchmarks.check_model import SEEDS, SMALL, SPACES, Check, reads
from benchmarks.check_steps import check_model
from benchmarks.results import ClaimCheck, Claims
from nfn_models.registry import MODELS

MAX_TEXT = 200  # characters of a check's verdict or of an error kept in the record
# a check's verdict (`Check.verdict`): a claimed group's, an unclaimed group's, the output contract met
# ("ok: <what>"), or what broke it ("NOT FINITE: <where>", ...: nothing measured)
CLAIMED_VERDICTS = ("holds", "FALSE CLAIM")
UNCLAIMED_VERDICTS = ("changes (not claimed)", "unchanged: could be claimed")
BROKEN_VERDICTS = ("NOT FINITE", "WRONG SHAPE", "WRONG DTYPE", "MODIFIES ITS INPUT")
CHECK_VERDICTS = (*CLAIMED_VERDICTS, *UNCLAIMED_VERDICTS, "ok", *BROKEN_VERDICTS)
CHECK_TESTS = ("output", "invariance", "denormal", "equivariance")


def family_spaces(family: str) -> tuple[str, ...]:
    """The checker's weight spaces of a zoo family (none for a family it has no members of)."""
    return tuple(name for name, (space_family, *_) in sorted(SPACES.items()) if space_family == family)


def checked_overrides(model: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The run's model hyperparameters the check keeps.

    It keeps all but three. The sizes are shrunk. Each checked space has its own members'
    architecture. Each output kind is checked."""
    dropped = set(SMALL) | set(getattr(MODELS.get(model), "ARCHITECTURE_FIELDS", ())) | {"output"}
    return {key: value for key, value in overrides.items() if key not in dropped}


def check_claims(model: str, overrides: Mapping[str, Any], family: str) -> dict[str, Any] | None:
    """The `claims` block for model `model` run with `overrides` on a zoo of `family`.

    None where no checked space is of that family, or the model reads none of them."""
    model = MODELS.resolve(model)
    kept = checked_overrides(model, overrides)
    return _checked(MODELS.get(model), model, json.dumps(kept, sort_keys=True, default=str), family)


@functools.lru_cache(maxsize=64)  # the class keys the cache: a name may be registered again
def _checked(cls: type, model: str, overrides: str, family: str) -> dict[str, Any] | None:
    kept = json.loads(overrides)
    try:
        spaces = [space for space in family_spaces(family) if reads(model, space)]
    except Exception as error:  # noqa: BLE001 (a plugin's own code)
        return _not_checked(kept, family_spaces(family), error, 0.0)
    if not spaces:
        return None
    start = time.perf_counter()
    try:
        checks = check_model(model, SEEDS, kept, spaces)
        declared = declared_groups(model, spaces, kept)
    except Exception as error:  # noqa: BLE001 (a plugin that cannot be built small: recorded, never fatal)
        return _not_checked(kept, spaces, error, time.perf_counter() - start)
    # what the model claims, not only what a check measured: where its output broke, no group was checked
    claimed = sorted({check.group for check in checks if check.claimed} | declared)
    verdict = ("false claim" if any(check.false_claim for check in checks)
               else "unmeasured" if any(check.broken for check in checks) else "holds")
    return {"groups": claimed, "verdict": verdict, "spaces": list(spaces), "seeds": list(SEEDS),
            "model_config": kept, "check_time_s": round(time.perf_counter() - start, 3), "error": None,
            "checks": [_record(check) for check in checks]}


def declared_groups(model: str, spaces: Sequence[str], overrides: Mapping[str, Any]) -> set[str]:
    """The groups model `model` claims on the checked spaces, each among its space's groups.

    They are the `claimed_symmetries` of the model as checked. They cover its invariant output, and its
    weight output where that is checked."""
    from benchmarks.check_model import build_model, groups, weight_output_spaces
    from nfn_models import claimed_symmetries

    outputs = [(space, "invariant") for space in spaces]
    outputs += [(space, "weights") for space in weight_output_spaces(model) if space in spaces]
    return {group for space, output in outputs
            for group in claimed_symmetries(build_model(model, space, 0, output, overrides))
            if group in groups(space)}


def _not_checked(kept: dict, spaces: Any, error: Exception, elapsed: float) -> dict[str, Any]:
    text = (str(error).strip().splitlines() or [""])[0]
    return {"groups": [], "verdict": "not checked", "spaces": list(spaces), "seeds": list(SEEDS), "model_config": kept,
            "check_time_s": round(elapsed, 3), "error": f"{type(error).__name__}: {text}"[:MAX_TEXT], "checks": []}


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None  # nothing measured (a broken output): null, never NaN


def _record(check: Check) -> dict[str, Any]:
    assert verdict_kind(check.verdict) is not None, f"a check verdict outside CHECK_VERDICTS: {check.verdict!r}"
    return {"space": check.space, "group": check.group, "test": check.test, "magnitude": check.magnitude,
            "claimed": check.claimed, "deviation": _number(check.deviation), "tolerance": _number(check.tolerance),
            "verdict": check.verdict[:MAX_TEXT]}


def verdict_kind(verdict: str) -> str | None:
    """Which of `CHECK_VERDICTS` a check's verdict is ("ok" and a broken contract carry ": <detail>"), or None."""
    if verdict in CLAIMED_VERDICTS or verdict in UNCLAIMED_VERDICTS:
        return verdict
    head, colon, _ = verdict.partition(": ")
    return head if colon and (head == "ok" or head in BROKEN_VERDICTS) else None


def _check_problem(check: ClaimCheck) -> tuple[str, str] | None:
    """(field, why) where a recorded check is not one the checker writes.

    Its test and verdict must come from their sets. Its verdict must be what its numbers say."""
    if check.test not in CHECK_TESTS:
        return "test", f"expected one of {', '.join(CHECK_TESTS)}, got {ascii(check.test[:60])}"
    kind = verdict_kind(check.verdict)
    measured = check.deviation is not None and check.tolerance is not None
    if kind is None:
        return "verdict", (f"expected one of {', '.join(CHECK_VERDICTS)} (`ok` and the broken contracts followed by "
                           f"': ' and what was seen), got {ascii(check.verdict[:60])}")
    if kind not in BROKEN_VERDICTS and (kind == "ok") != (check.test == "output"):  # any check may break
        return "verdict", f"{kind!r} is not a verdict of a {check.test!r} check"
    if kind in BROKEN_VERDICTS or kind == "ok":
        if check.deviation is not None or (kind == "ok" and check.claimed):
            return "deviation", f"a {kind!r} check measures no group: expected null and nothing claimed"
    elif (kind in CLAIMED_VERDICTS) != check.claimed or not measured:
        which = "claimed" if kind in CLAIMED_VERDICTS else "unclaimed"
        return "verdict", (f"{kind!r} needs a {which} group measured (deviation and tolerance), got claimed "
                           f"{check.claimed}, deviation {check.deviation}")
    elif kind in CLAIMED_VERDICTS and (kind == "holds") != (check.deviation <= check.tolerance):
        return "verdict", f"{kind!r} disagrees with deviation {check.deviation!r} and tolerance {check.tolerance!r}"
    return None


def block_problem(claims: Claims) -> tuple[str, str] | None:
    """(key within the block, why) where a claims block is not one `check_claims` writes, or None.

    See the module docstring. Keys look like `checks[3].verdict`."""
    for index, check in enumerate(claims.checks):
        problem = _check_problem(check)
        if problem is None and check.space not in claims.spaces:
            problem = "space", f"expected one of the checked spaces {list(claims.spaces)}, got {check.space!r}"
        if problem is not None:
            return f"checks[{index}].{problem[0]}", problem[1]
    kinds = [verdict_kind(check.verdict) for check in claims.checks]
    unmeasured = sum(kind in BROKEN_VERDICTS for kind in kinds)
    if claims.verdict == "not checked":
        if claims.checks or claims.groups:
            return "checks", "a block that was not checked holds no check and no group"
        return None
    if claims.verdict == "holds":
        passing = {check.group for check, kind in zip(claims.checks, kinds) if check.claimed and kind == "holds"}
        missing = [group for group in claims.groups if group not in passing]
        if missing or not claims.checks:
            return "checks", (f"'holds' needs a passing check of each claimed group; none for {missing}" if missing
                              else "'holds' needs the checks it was reached by; none is recorded")
        if unmeasured:
            return "verdict", (f"'holds', but {unmeasured} check(s) measured nothing (the output broke the "
                               "contract): expected 'unmeasured'")
    if claims.verdict == "unmeasured" and not unmeasured:
        return "verdict", "'unmeasured', but every check measured its output"
    claimed = sorted({check.group for check in claims.checks if check.claimed})
    if not set(claimed) <= set(claims.groups):
        return "groups", f"expected the groups of the claimed checks, {claimed}, got {list(claims.groups)}"
    unchecked = sorted(set(claims.groups) - set(claimed))  # claimed where the output broke before any check
    if unchecked and not unmeasured:
        return "groups", (f"{unchecked} claimed without a check, which only an output that broke the contract "
                          f"explains; expected the groups of the claimed checks, {claimed}")
    return None


MAX_LISTED = 3  # failing checks a one-line summary names; the rest are counted


def listed(items: Sequence[str], what: str) -> str:
    """`items` (worst first) in one line.

    It lists all of them up to `MAX_LISTED`, else the worst and a count of the rest."""
    counted = f"{len(items)} {what}{'' if len(items) == 1 else 's'}"
    if len(items) <= MAX_LISTED:
        return f"{counted}: {'; '.join(items)}"
    return f"{counted}, the worst {MAX_LISTED}: {'; '.join(items[:MAX_LISTED])}; and {len(items) - MAX_LISTED} more"


def describe(claims: Mapping[str, Any] | None) -> str:
    """One line: what a run's claims are and how their check ended, every failing check counted.

    Progress lines, the false-claim warning and the submit refusal print it."""
    if claims is None:
        return "claims not checked (no checked weight space of this family)"
    groups = ", ".join(claims["groups"]) or "no group"
    if claims["verdict"] == "not checked":
        return f"claims not checked: {claims['error']}"
    counted = f"{len(claims['checks'])} checks on {', '.join(claims['spaces'])}, {claims['check_time_s']:.1f} s"
    if claims["verdict"] == "false claim":
        failing = sorted((c for c in claims["checks"] if c["claimed"] and c["deviation"] is not None
                          and c["tolerance"] is not None and c["deviation"] > c["tolerance"]),
                         key=lambda c: -c["deviation"] / c["tolerance"] if c["tolerance"] else -math.inf)
        shown = [f"{c['group']} {c['test']} on {c['space']} at {c['magnitude']} (deviation {c['deviation']:.3g} > "
                 f"{c['tolerance']:.3g})" for c in failing]
        return f"FALSE CLAIM: claims {groups}; {listed(shown, 'failing check')} ({counted})"
    if claims["verdict"] == "unmeasured":
        broken = [c["verdict"] for c in claims["checks"] if verdict_kind(c["verdict"]) in BROKEN_VERDICTS]
        measured = any(c["claimed"] and c["deviation"] is not None for c in claims["checks"])
        if claims["groups"] and not measured:
            return (f"claims {groups}: none measured, the output broke the contract in {len(broken)} check(s) "
                    f"(first: {broken[0][:120]}) ({counted})")
        return f"claims {groups}: hold where measured, {len(broken)} check(s) unmeasured (output broke the contract) " \
               f"({counted})"
    return f"claims {groups}: hold ({counted})"
