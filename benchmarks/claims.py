"""A model's symmetry claims on the record: checked before a benchmark trains, kept in its results.

Every benchmark run (`nfnzoo bench run`, `benchmarks.evaluate`, the suites) first runs the
registry's exactness checks (`benchmarks.check_model`, what `nfnzoo bench check-model` runs: the
model built small, random members at every magnitude, the families' own random group elements,
negative controls) on the weight spaces of the zoo's family (CNN: the ReLU and tanh members; INR:
SIRENs; transformer: both transformer spaces), with the run's own model hyperparameters except its
sizes (`benchmarks.check_model.SMALL`), the members' architecture and the output kind, which the
check sets itself. It costs a second or a few for most models on 2 CPUs (NG-GNN on the
transformers about 25 s), once per model, family and configuration in a process.

The results' `claims` block (`benchmarks.results.Claims`) records the groups the model claims, one
verdict, the seeds and the hyperparameters checked, and every check with its deviation and
tolerance:

- "holds": every claimed group left the output unchanged within its tolerance at every magnitude;
- "false claim": a claimed group moved the output past its tolerance. The run still trains (its
  numbers are real) and says so on stderr; `nfnzoo leaderboard submit` refuses the results;
- "unmeasured": no claim failed, but some checks measured nothing because the output broke the
  contract there (not finite at a magnitude, e.g. MAGEP-NFN at 100x weights in float32);
- "not checked": the check itself raised (a plugin that cannot be built small); the error is kept.
"""

from __future__ import annotations

import functools
import json
import math
import time
from typing import Any, Mapping

from benchmarks.check_model import SEEDS, SMALL, SPACES, Check, check_model, reads
from nfn_models.registry import MODELS

MAX_TEXT = 200  # characters of a check's verdict or of an error kept in the record


def family_spaces(family: str) -> tuple[str, ...]:
    """The checker's weight spaces of a zoo family (none for a family it has no members of)."""
    return tuple(name for name, (space_family, *_) in sorted(SPACES.items()) if space_family == family)


def checked_overrides(model: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The run's model hyperparameters the check keeps: all but the sizes (shrunk), the members'
    architecture (each checked space has its own) and the output kind (each output is checked)."""
    dropped = set(SMALL) | set(getattr(MODELS.get(model), "ARCHITECTURE_FIELDS", ())) | {"output"}
    return {key: value for key, value in overrides.items() if key not in dropped}


def check_claims(model: str, overrides: Mapping[str, Any], family: str) -> dict[str, Any] | None:
    """The `claims` block for model `model` run with `overrides` on a zoo of `family` (None where no
    checked space is of that family or the model reads none of them)."""
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
    except Exception as error:  # noqa: BLE001 (a plugin that cannot be built small: recorded, never fatal)
        return _not_checked(kept, spaces, error, time.perf_counter() - start)
    claimed = sorted({check.group for check in checks if check.claimed})
    verdict = ("false claim" if any(check.false_claim for check in checks)
               else "unmeasured" if any(check.broken for check in checks) else "holds")
    return {"groups": claimed, "verdict": verdict, "spaces": list(spaces), "seeds": list(SEEDS),
            "model_config": kept, "check_time_s": round(time.perf_counter() - start, 3), "error": None,
            "checks": [_record(check) for check in checks]}


def _not_checked(kept: dict, spaces: Any, error: Exception, elapsed: float) -> dict[str, Any]:
    text = (str(error).strip().splitlines() or [""])[0]
    return {"groups": [], "verdict": "not checked", "spaces": list(spaces), "seeds": list(SEEDS), "model_config": kept,
            "check_time_s": round(elapsed, 3), "error": f"{type(error).__name__}: {text}"[:MAX_TEXT], "checks": []}


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None  # nothing measured (a broken output): null, never NaN


def _record(check: Check) -> dict[str, Any]:
    return {"space": check.space, "group": check.group, "test": check.test, "magnitude": check.magnitude,
            "claimed": check.claimed, "deviation": _number(check.deviation), "tolerance": _number(check.tolerance),
            "verdict": check.verdict[:MAX_TEXT]}


def describe(claims: Mapping[str, Any] | None) -> str:
    """One line: what a run's claims are and how their check ended (progress lines, tables)."""
    if claims is None:
        return "claims not checked (no checked weight space of this family)"
    groups = ", ".join(claims["groups"]) or "no group"
    if claims["verdict"] == "not checked":
        return f"claims not checked: {claims['error']}"
    counted = f"{len(claims['checks'])} checks on {', '.join(claims['spaces'])}, {claims['check_time_s']:.1f} s"
    if claims["verdict"] == "false claim":
        false = sorted({f"{c['group']} on {c['space']} at {c['magnitude']} (deviation {c['deviation']:.3g} > "
                        f"{c['tolerance']:.3g})" for c in claims["checks"]
                        if c["claimed"] and c["deviation"] is not None and c["tolerance"] is not None
                        and c["deviation"] > c["tolerance"]})
        return f"FALSE CLAIM: claims {groups}; {'; '.join(false[:3])} ({counted})"
    if claims["verdict"] == "unmeasured":
        broken = sum(1 for c in claims["checks"] if c["verdict"].startswith(("NOT FINITE", "WRONG", "MODIFIES")))
        return f"claims {groups}: hold where measured, {broken} check(s) unmeasured (output broke the contract) " \
               f"({counted})"
    return f"claims {groups}: hold ({counted})"
