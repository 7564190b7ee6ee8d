"""benchmarks.perf.generation measures every mode it reports: the runs one at a time and as populations
(`solo=False`, what benchmarks.perf.portable asks for, leaves the one-at-a-time column out)."""

from __future__ import annotations

from benchmarks.perf.generation import measure


def test_every_mode_asked_for_is_timed_and_only_those():
    both = measure("inr", runs_count=4, schemes=("torch-generator",))
    assert both.solo_s is not None and both.solo_s > 0 and both.population_s > 0 and both.counter_s is None
    populations_only = measure("inr", runs_count=4, schemes=("torch-generator",), solo=False)
    assert populations_only.solo_s is None and populations_only.population_s > 0
    assert both.checkpoints == populations_only.checkpoints == 8  # 4 runs x the profile's 2 checkpoints
