"""A check's verdict is one of `benchmarks.claims.CHECK_VERDICTS`: every verdict the checker writes, and no other."""

from __future__ import annotations

import math

import pytest

from benchmarks.check_model import Check
from benchmarks.claims import BROKEN_VERDICTS, CHECK_VERDICTS, verdict_kind


def _check(test="invariance", claimed=True, deviation=0.0, broken=None, detail=""):
    return Check("mlp", "cnn-relu", "permutation", test, claimed, deviation, 1e-5, 1e-4, "unit", broken, detail)


@pytest.mark.parametrize("check, kind", [
    (_check(test="output", claimed=False, deviation=math.nan, detail="(B, 1), finite"), "ok"),
    (_check(), "holds"),
    (_check(deviation=1.0), "FALSE CLAIM"),
    (_check(claimed=False, deviation=1.0), "changes (not claimed)"),
    (_check(claimed=False, deviation=0.0), "unchanged: could be claimed"),
    *[(_check(deviation=math.nan, broken=broken.lower(), detail="f(w), seed 0: ..."), broken)
      for broken in BROKEN_VERDICTS],
])
def test_every_verdict_the_checker_writes_is_in_the_set(check, kind):
    assert verdict_kind(check.verdict) == kind and kind in CHECK_VERDICTS


@pytest.mark.parametrize("verdict", ["fine", "HOLDS", "holds: trust me", "ok", "NOT FINITE", "OK: (B, 1)", ""])
def test_free_text_is_no_verdict(verdict):
    assert verdict_kind(verdict) is None
