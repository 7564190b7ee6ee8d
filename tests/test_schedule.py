"""The suite's schedule (`tests/schedule.py`): measured-slow tests are marked, long modules start first,
and the recorded durations still describe the suite."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from schedule import SLOW_MODULE_SECONDS, SLOW_SECONDS, recorded, schedule


def _item(nodeid: str):
    marks = []
    return types.SimpleNamespace(nodeid=nodeid, path=Path(nodeid.split("::")[0]), marks=marks,
                                 add_marker=marks.append)


def test_measured_slow_tests_are_marked_and_the_longest_module_starts_first():
    items = [_item("a.py::quick"), _item("a.py::also_quick"), _item("b.py::long"), _item("c.py::new")]
    schedule(items, {"a.py::quick": 0.1, "a.py::also_quick": 0.2, "b.py::long": SLOW_SECONDS + 5})
    assert [item.nodeid for item in items] == ["b.py::long", "c.py::new", "a.py::quick", "a.py::also_quick"]
    assert [item.nodeid for item in items if item.marks] == ["b.py::long"]
    assert items[0].marks[0].name == "slow"


def test_a_module_measured_long_together_is_slow_whole():
    quick = SLOW_SECONDS / 2
    many = [_item(f"a.py::t{n}") for n in range(int(SLOW_MODULE_SECONDS / quick) + 1)]
    schedule(many, {item.nodeid: quick for item in many})
    assert all(item.marks for item in many)


def test_negative_control_without_durations_nothing_is_marked_or_moved():
    items = [_item("a.py::x"), _item("b.py::y")]
    schedule(items, {})
    assert [item.nodeid for item in items] == ["a.py::x", "b.py::y"] and not any(item.marks for item in items)


def test_the_recorded_durations_name_most_of_the_suite(request):
    """A stale file (tests renamed since `make test-durations`) schedules less and less: most ids still match."""
    ids = {item.nodeid for item in request.session.items}
    seconds = recorded()
    if len(ids) < 1000:
        pytest.skip("a partial run: the durations describe the whole suite")
    assert len(ids & set(seconds)) >= 0.9 * len(ids), "run `make test-durations` to measure the suite again"


def test_the_cluster_modules_are_one_unit_of_work_and_the_others_their_own():
    from schedule import CLUSTER_SCOPE, scope_of

    root = Path(__file__).resolve().parents[1]
    assert scope_of("tests/zoo/test_generate_cluster.py::test_x", root) == CLUSTER_SCOPE
    assert scope_of("tests/benchmarks/test_jobs_cluster.py::test_y[a]", root) == CLUSTER_SCOPE
    assert scope_of("tests/zoo/test_reader.py::test_z", root) == "tests/zoo/test_reader.py"  # the control
