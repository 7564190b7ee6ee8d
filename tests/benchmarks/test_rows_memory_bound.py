"""A benchmark's load holds the rows its task keeps, not the zoo: measured under a memory cgroup.

A Small CNN Zoo of ~6,300 checkpoints (~125 MB of weights) is imported; a child process loads its
splits as `bench run` does for a task keeping each run's final checkpoint (one row in nine), under a
limit of the child's import floor plus half the zoo's weights. It must finish; the same load of every
row under the same limit must not fit (the negative control: the limit binds), and is refused before
its copy in one line that says what it needs and what would fit (`zoo.memory_budget`).

The shards are read into the page cache by this process just before each limited child runs. A
child that faults them in itself is charged for them: its group then sits at the limit, and the
load depends on the kernel reclaiming mapped pages in time. That is why this test once failed in a
full run, where other tests had pushed the zoo's pages out of memory. Measured here: the kept load
peaks 32-34 MB over the floor with the pages resident, and at the limit (+60 MB) without.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "zoo"))  # the hand-made Small CNN Zoo fixture

from memory_limit import GIB, run_limited
from small_cnn_fixture import make_zoo

RUNS = 700  # x 9 steps = 6,300 rows of 4,970 float32 weights: ~125 MB
FLOOR = "import benchmarks.harness, benchmarks.tasks.rows, zoo.loader, zoo.split_set_loader"
LOAD = """
import sys
from benchmarks.harness import load_splits
from benchmarks.tasks import create_task
from benchmarks.tasks.rows import kept_by
keep = kept_by(create_task("generalization", checkpoints="final")) if sys.argv[2] == "kept" else None
splits, _ = load_splits(sys.argv[1], None, keep=keep)
print(sum(len(split) for split in splits.values()))
"""


def _resident(folder: Path) -> None:
    """The zoo's shards read into the page cache, charged to this process's group, not a child's."""
    for path in sorted(folder.rglob("*.parquet")):
        path.read_bytes()


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    from zoo.imports.small_cnn_zoo import import_zoo

    root = tmp_path_factory.mktemp("rows_memory")
    make_zoo(root / "src", runs=RUNS, split_file=False)
    import_zoo(root / "src", root / "out")
    return root / "out"


def test_a_benchmark_load_of_the_kept_rows_fits_where_the_whole_zoo_does_not(zoo):
    root = Path(__file__).resolve().parents[2]
    environment = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    floor = run_limited([sys.executable, "-c", FLOOR], limit_bytes=3 * GIB, env=environment, cwd=root)
    if floor.peak_bytes is None:
        pytest.skip(f"no memory cgroup can be made here ({floor.mechanism}): the bound cannot be measured")
    assert floor.returncode == 0, floor.describe()
    weights = RUNS * 9 * 4970 * 4
    limit = floor.peak_bytes + weights // 2
    _resident(zoo)
    kept = run_limited([sys.executable, "-c", LOAD, str(zoo), "kept"], limit_bytes=limit, env=environment, cwd=root)
    # what a failure needs to be explained: the floor and limit it ran under, beside the group's own peak
    where = f"limit {limit:,} B = floor {floor.peak_bytes:,} B + half the weights {weights // 2:,} B"
    assert kept.returncode == 0 and not kept.oom_killed, f"{where}; {kept.describe()}"
    assert int(kept.stdout.split()[-1]) == RUNS  # one checkpoint a run
    _resident(zoo)
    whole = run_limited([sys.executable, "-c", LOAD, str(zoo), "all"], limit_bytes=limit, env=environment, cwd=root)
    # the limit binds: every row does not fit, and the load says so before it copies (zoo.memory_budget),
    # naming what would fit, instead of being killed halfway
    assert whole.returncode not in (0, None) and not whole.oom_killed, f"{where}; {whole.describe()}"
    assert "GiB of memory and" in whole.stderr and "GiB is available" in whole.stderr, f"{where}; {whole.describe()}"
    assert "a split set reads fewer rows" in whole.stderr, f"{where}; {whole.describe()}"
