"""The suite's schedule: which tests `make test-fast` leaves out, and the order modules start in.

`tests/durations.json` holds each test's measured seconds (setup, call and teardown together).
`make test-durations` rewrites it from a whole run on the 2-core development machine. A test
measured at `SLOW_SECONDS` or more is marked `slow`, like a test that starts a Ray cluster or trains
a model is marked by hand: the edit loop skips it, CI runs it. So is every test of a module measured
at `SLOW_MODULE_SECONDS` together: its module fixture would cost the edit loop as much. Modules start longest first, by
their tests' recorded seconds (an unrecorded test counts `UNKNOWN_SECONDS`). So the pytest-xdist
workers end on short modules, not one waiting on a long module that started last. The modules that
use the session's two-node Ray cluster run as one unit on one worker, which starts the cluster once.
"""

from __future__ import annotations

import collections
import functools
import json
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
SLOW_SECONDS = 1.0
SLOW_MODULE_SECONDS = 10.0
UNKNOWN_SECONDS = 0.5


def recorded(path: Path = DURATIONS) -> dict[str, float]:
    """Test id -> seconds, as the last `make test-durations` measured them (none without the file)."""
    return json.loads(path.read_text()) if path.exists() else {}


def schedule(items: list, seconds: dict[str, float]) -> None:
    """Marks the tests measured slow and orders `items` so that the longest modules come first."""
    per_module: collections.Counter = collections.Counter()
    for item in items:
        per_module[item.path] += seconds.get(item.nodeid, UNKNOWN_SECONDS)
    for item in items:
        if seconds.get(item.nodeid, 0.0) >= SLOW_SECONDS or per_module[item.path] >= SLOW_MODULE_SECONDS:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: -per_module[item.path])  # stable: a module's tests keep their order


class Recorder:
    """A pytest plugin: each test's seconds over a run, written as `durations.json` where the run ends."""

    def __init__(self, path: Path):
        self.path, self.seconds = path, collections.defaultdict(float)

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[report.nodeid] += report.duration

    def pytest_sessionfinish(self) -> None:
        self.path.write_text(json.dumps({test: round(s, 2) for test, s in sorted(self.seconds.items())},
                                        indent=0) + "\n")


CLUSTER_SCOPE = "modules that use the session's Ray cluster"


@functools.lru_cache(maxsize=None)
def uses_cluster(path: str) -> bool:
    """Whether the test module at `path` asks for the session's Ray cluster."""
    return Path(path).name.startswith("test_") and "ray_cluster" in Path(path).read_text(encoding="utf-8")


def scope_of(nodeid: str, root: Path) -> str:
    """A test's unit of work: its module, but one unit for every module that uses `ray_cluster`, so one
    worker starts the two-node cluster and runs them all, instead of each worker starting its own."""
    module = nodeid.split("::", 1)[0]
    return CLUSTER_SCOPE if uses_cluster(str(root / module)) else module


def scheduler(config, log):
    """pytest-xdist's file scheduling with the cluster's modules as one unit (`--dist loadfile` only)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ClusterOnce(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid, config.rootpath)

    return ClusterOnce(config, log)
