"""The benchmark jobs on Ray: a tiny suite and a tiny track give the same records run here, one
job after another in this process, and as Ray tasks on the shared two-node cluster, whose worker
node sees neither the driver's output folder nor its data (`tests/cluster.py`); every record is
written on the driver; a job's peak memory is its own."""

from __future__ import annotations

import dataclasses
import json
import re
import sys

import numpy as np
import pytest

from benchmarks.jobs import Job, run_jobs
from zoo.cli import main

pytestmark = pytest.mark.slow

TIMING = ("train_time_s", "peak_memory_mb", "wall_time_s")  # where and when a job ran, not what it computed
SUITE = ["bench", "suite", "cnn-generalization", "--seeds", "0,1", "--only", "statnn-tanh,mlp-tanh",
         "--set", "task.epochs=1", "--set", "task.checkpoints=all", "--set", "task.subset={}"]


def _without_timing(value):
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def _worker_node_ids(cluster) -> set[str]:
    head = cluster.head_node_id()
    return {node["NodeID"] for node in cluster.alive_nodes()} - {head}


def _results(folder) -> dict:
    kept = {}
    for name in ("statnn-tanh", "mlp-tanh"):
        results = json.loads((folder / f"{name}.json").read_text())
        kept[name] = _without_timing({k: results[k] for k in ("per_seed", "summary", "num_params", "model_config",
                                                             "task_config", "dataset")})
        kept[name]["predictions"] = (folder / f"{name}.predictions.csv").read_text()
    return kept


def test_a_suite_on_the_cluster_gives_the_local_records(ray_cluster, tiny_zoo, tmp_path, capsys):
    local, remote = tmp_path / "local", tmp_path / "cluster"
    assert main([*SUITE, "--data", str(tiny_zoo), "--out", str(local), "--workers", "1"]) == 0  # no Ray
    capsys.readouterr()
    assert main([*SUITE, "--data", str(tiny_zoo), "--out", str(remote), "--address", ray_cluster.address]) == 0
    printed = capsys.readouterr().err
    # the worker node ran seeds of a zoo it cannot see (tiny_zoo is under the hidden base temp)
    ran_on = set(re.findall(r"on node ([0-9a-f]{12})", printed))
    assert any(node[:12] in ran_on for node in _worker_node_ids(ray_cluster)), printed[-2000:]
    # one torch thread per job on both: the same numbers, bit for bit (float summation order is the same)
    assert _results(remote) == _results(local)
    assert (remote / "table.md").exists() and not list(remote.glob("*.seeds"))  # written here, then folded


def test_a_track_on_the_cluster_gives_the_local_records(ray_cluster, tmp_path, monkeypatch):
    from benchmarks.tracks.registry import create_track
    from benchmarks.tracks.wave import track as wave

    # two of the tiny profile's methods: FewRel (../shared/data, hidden on the worker) and the
    # cached queries (in --out, hidden too) reach the worker node through Ray
    monkeypatch.setitem(wave.PROFILES, "tiny-pair",
                        dataclasses.replace(wave.PROFILES["tiny"], methods=("wave-cre", "finetune")))
    track = create_track("wave-cre")
    local, remote = tmp_path / "local", tmp_path / "cluster"
    track.run("tiny-pair", [2021], local, workers=1)  # here, no Ray
    track.run("tiny-pair", [2021], remote, address=ray_cluster.address)
    records = sorted(p.relative_to(remote) for p in (remote / "jobs").rglob("*.json"))
    assert [str(p) for p in records] == ["jobs/fewrel-semeval/finetune/seed2021.json",
                                         "jobs/fewrel-semeval/wave-cre/seed2021.json"]  # on the driver
    nodes = set()
    for path in records:
        there, here = json.loads((remote / path).read_text()), json.loads((local / path).read_text())
        assert there["fingerprint"] == here["fingerprint"]
        assert _without_timing(there["outcome"]) == _without_timing(here["outcome"])
        assert there["peak_memory_mb"] > 0
        nodes.add(there["node_id"])
    assert nodes <= {n["NodeID"] for n in ray_cluster.alive_nodes()}


def _hold(megabytes: int) -> dict:
    """A job that holds `megabytes` of touched memory for a moment."""
    block = np.ones(megabytes * 2**20, dtype=np.uint8)
    return {"sum": int(block[:: 4096].sum())}


@pytest.mark.parametrize("where", ["in this process", "on the cluster"])
def test_a_small_job_after_a_large_one_reports_its_own_peak(ray_cluster, tmp_path, where):

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # `_hold` travels by value: tests/ is no package
    jobs = [Job("large", _hold, (400,), "large"), Job("small", _hold, (1,), "small")]
    address = ray_cluster.address if where == "on the cluster" else None
    run_jobs(jobs, tmp_path, 1, address=address)
    large, small = (json.loads((tmp_path / f"{key}.json").read_text())["peak_memory_mb"] for key in ("large", "small"))
    assert large > small + 300, (large, small)  # the small job's peak is not the large one's



def test_gpus_per_job_on_a_cluster_without_gpus_is_an_error_before_any_job_runs(ray_cluster, tiny_zoo, tmp_path,
                                                                                  capsys):
    out = tmp_path / "s"
    argv = [*SUITE, "--data", str(tiny_zoo), "--out", str(out), "--address", ray_cluster.address, "--gpus-per-job", "1"]
    assert main(argv) == 1
    assert f"the Ray cluster at {ray_cluster.address} has no node with that many GPUs" in capsys.readouterr().err
    assert not list(out.rglob("*.json"))  # no job ran
