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


def test_the_portable_benchmark_trains_the_portable_spec_and_measures_every_part_of_the_mode():
    """benchmarks.perf.portable's portable child trains a spec in the portable mode (whose optimizers take
    IEEE's square root), not only the native spec in the portable environment; and `--each` has a part for
    every setting of the mode's environment but the thread counts (one thread in every child already)."""
    from benchmarks.perf.portable import PARTS, child
    from zoo.training.reproducibility import PORTABLE_ENV

    assert child("inr", 2, "portable")["reproducibility"] == "portable"
    assert child("inr", 2, "native")["reproducibility"] == "native"  # the control: the child passes the mode on
    covered = {key for keys in PARTS.values() for key in keys}
    assert covered == set(PORTABLE_ENV) - {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}
    assert () in PARTS.values()  # the spec's part, the square root
