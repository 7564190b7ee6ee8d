"""What `nfnzoo bench check-model` prints of `benchmarks.check_model`'s checks.

It prints a Markdown table with one row per measurement. A row holds the weight space, the
members' magnitude, the group, the test, the deviation, the tolerance and the verdict. Notes go
under the table. They give the size the model was checked at on each space, and each magnitude's
members and tolerances. They also list claims the model could make.

Then comes the one-line error. It names any output that broke the contract: not finite, or of the
wrong shape. That is a verdict of its own, never one on a claim. It also names the false claims."""

from __future__ import annotations

import json
import math
from typing import Sequence

from benchmarks.check_model import MAGNITUDES, Check, Size


def _number(value: float, form: str) -> str:
    return "-" if math.isnan(value) else format(value, form)


def format_table(checks: Sequence[Check]) -> str:
    """A Markdown table of the checks: the max relative deviation each measured and its verdict."""
    lines = ["| weight space | magnitude | group | test | claimed | max relative deviation | tolerance | verdict |",
             "|---|---|---|---|---|---:|---:|---|"]
    lines += [f"| {c.space} | {c.magnitude} | {c.group} | {c.test} | "
              f"{'-' if c.test == 'output' else 'yes' if c.claimed else 'no'} | {_number(c.deviation, '.2e')} | "
              f"{_number(c.tolerance if c.claimed else c.moves, '.0e')} | {c.verdict} |" for c in checks]
    return "\n".join(lines) + "\n"


def sizes_note(sizes: Sequence[Size]) -> str:
    """One line: the parameters the model was checked with on each space, and the size fields shrunk.

    The fields are given as `--set` takes them. Otherwise it says the model was checked at its own size."""
    return "checked at: " + "; ".join(
        f"{s.space}{' (weight output)' if s.output == 'weights' else ''}: {s.parameters:,} parameters, "
        + (f"shrunk to {', '.join(f'model.{k}={json.dumps(v)}' for k, v in s.shrunk.items())}" if s.shrunk
           else "its own size (no size field shrunk)") for s in sizes)


def _magnitudes(names: Sequence[str]) -> str:
    names = list(dict.fromkeys(names))
    return f"magnitude{'s' if len(names) > 1 else ''} {', '.join(names)}"


def summary(name: str, checks: Sequence[Check]) -> tuple[list[str], str | None]:
    """What the table means: notes, and the error.

    Notes give the magnitudes and their tolerances, and claims the model could make. The error is None
    when every claim holds and every output keeps the contract."""
    shown = sorted({c.magnitude for c in checks if c.magnitude in MAGNITUDES}, key=list(MAGNITUDES).index)
    notes = ["magnitudes: " + "; ".join(f"{m}: {MAGNITUDES[m].description}, claims within "
                                        f"{MAGNITUDES[m].tolerance:.0e} (equivariance "
                                        f"{MAGNITUDES[m].equivariant_tolerance:.0e})" for m in shown)]
    broken_spaces = {c.space for c in checks if c.broken}
    unclaimed = sorted({(c.space, c.group) for c in checks if c.space not in broken_spaces and c.test != "output"
                        and not c.claimed and c.verdict.startswith("unchanged")})
    if unclaimed:
        notes.append(f"{name}: unchanged by groups it does not claim (claims it could make): "
                     f"{', '.join(f'{g} on {s}' for s, g in unclaimed)}")
    problems = []
    # per weight space: the magnitudes, and the first seen
    for kind in ("modifies its input", "not finite", "wrong shape", "wrong dtype"):
        found: dict[str, list[Check]] = {}
        for c in checks:
            if c.broken == kind:
                found.setdefault(c.space, []).append(c)
        if found:
            what = "the model modifies its input" if kind == "modifies its input" else f"output {kind}"
            problems.append(f"{what} on " + ", ".join(
                f"{s} at {_magnitudes([c.magnitude for c in cs])} ({cs[0].detail})" for s, cs in found.items()))
    false: dict[tuple[str, str], list[Check]] = {}
    for c in checks:  # per group and weight space: each test and magnitude where the claim failed
        if c.false_claim:
            false.setdefault((c.group, c.space), []).append(c)
    if false:
        problems.append(f"{sum(map(len, false.values()))} false claim(s): " + "; ".join(
            f"{group} on {space_name} (" + ", ".join(
                f"{c.test}{'' if c.magnitude == c.test else f' at {c.magnitude}'}: deviation {c.deviation:.2e} > "
                f"{c.tolerance:.0e}" for c in found) + ")" for (group, space_name), found in false.items()))
    return notes, (f"{name}: " + "; ".join(problems)) if problems else None
