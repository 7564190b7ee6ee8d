"""The thread count of a benchmark process is chosen, not inherited (`benchmarks.threads`): from its affinity
mask, its cgroup's CPU quota, the CPUs idle now and the runs sharing them, with `NFNZOO_THREADS` and an
explicit `OMP_NUM_THREADS` as overrides; `bench run` records it and says it, and check-model's child runs
on it. No timing here: the times are `benchmarks.perf.threads`' (docs/performance.md)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from benchmarks import threads as thread_module
from benchmarks.results import load_results
from benchmarks.threads import (ThreadChoice, available_cpus, benchmark_threads, choose_threads, cpu_times,
                                idle_cpus, quota_cpus, threads_line)
from zoo.cli import main
from zoo.validation.schema import SchemaError

NFNZOO = Path(sys.executable).parent / "nfnzoo"


def _files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# ---- the CPUs a process may use: affinity and quota

def test_the_affinity_mask_counts_and_a_quota_bounds_it_rounded_down():
    assert available_cpus({0, 3, 5}) == 3
    assert available_cpus({0, 3, 5}, quota=2.5) == 2  # a thread beyond the quota is throttled
    assert available_cpus({0, 3, 5}, quota=8.0) == 3
    assert available_cpus({0, 1}, quota=0.5) == 1  # at least one
    assert available_cpus() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("files, expected", [
    ({"cgroup": "0::/\n", "fs/cpu.max": "150000 100000\n"}, 1.5),  # cgroup v2
    ({"cgroup": "0::/\n", "fs/cpu.max": "max 100000\n"}, None),  # no quota
    ({"cgroup": "0::/jobs/mine\n", "fs/jobs/mine/cpu.max": "max 100000\n", "fs/jobs/cpu.max": "200000 100000\n"},
     2.0),  # an ancestor's quota bounds its children
    ({"cgroup": "0::/a\n", "fs/a/cpu.max": "300000 100000\n", "fs/cpu.max": "400000 100000\n"}, 3.0),  # the tightest
    ({"cgroup": "4:cpu,cpuacct:/docker/x\n", "fs/cpu,cpuacct/docker/x/cpu.cfs_quota_us": "250000\n",
      "fs/cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n"}, 2.5),  # cgroup v1
    ({"cgroup": "2:cpu,cpuacct:/\n", "fs/cpu/cpu.cfs_quota_us": "-1\n", "fs/cpu/cpu.cfs_period_us": "100000\n"},
     None),  # v1 without a quota
    ({"cgroup": "0::/\n", "fs/cpu.max": "lots\n"}, None),  # unreadable: no quota known
    ({"cgroup": "0::/../../etc\n"}, None),  # a path never leads above the mount
    ({}, None),  # no cgroup file system
])
def test_the_cgroup_quota_is_read_from_the_folder_given(tmp_path, files, expected):
    _files(tmp_path, files)
    (tmp_path / "fs").mkdir(exist_ok=True)
    assert quota_cpus(tmp_path / "fs", tmp_path / "cgroup") == expected


# ---- the CPUs idle now

STAT = ("cpu  {a} 0 0 {b} 0 0 0 0 0 0\ncpu0 {busy0} 0 0 {idle0} 0 0 0 0 0 0\n"
        "cpu1 {busy1} 0 0 {idle1} 3 0 0 0 0 0\nintr 5\n")


def test_idle_cpus_count_only_the_mask_s_cpus(tmp_path):
    _files(tmp_path, {"a": STAT.format(a=0, b=0, busy0=100, idle0=50, busy1=10, idle1=500),
                      "b": STAT.format(a=0, b=0, busy0=120, idle0=50, busy1=10, idle1=517)})
    before, after = cpu_times(tmp_path / "a"), cpu_times(tmp_path / "b")
    assert before == {0: (50, 150), 1: (503, 513)}  # idle counts I/O wait; the summary line is no CPU
    assert idle_cpus(before, after, {0, 1}) == pytest.approx(1.0)  # cpu0 busy throughout, cpu1 idle
    assert idle_cpus(before, after, {0}) == 0.0 and idle_cpus(before, after, {1}) == pytest.approx(1.0)
    assert idle_cpus(before, after, {7}) is None  # none of the mask's CPUs read
    assert cpu_times(tmp_path / "missing") == {}


# ---- the decision

@pytest.fixture
def eight_cpus(monkeypatch):
    monkeypatch.setattr(thread_module.os, "cpu_count", lambda: 8)


def test_nfnzoo_threads_overrides_everything(eight_cpus):
    choice = choose_threads(environ={"NFNZOO_THREADS": "3", "OMP_NUM_THREADS": "1"}, cpus=2, idle=0.0, current=1)
    assert (choice.threads, choice.source) == (3, "NFNZOO_THREADS")
    assert choice.describe() == "3 torch threads (from NFNZOO_THREADS; 2 CPUs)"


@pytest.mark.parametrize("value", ["0", "-1", "two", "9", "1.5", "9" * 40])
def test_a_malformed_nfnzoo_threads_is_an_error_saying_what_is_expected(eight_cpus, value):
    with pytest.raises(ValueError, match=r"NFNZOO_THREADS=.*: expected a number of threads from 1 to this machine's "
                                         r"8 CPUs"):
        choose_threads(environ={"NFNZOO_THREADS": value}, cpus=8, idle=8.0, current=8)


@pytest.mark.parametrize("value, expected", [("3", 3), ("3,2", 3), ("64", 8)])
def test_an_explicit_omp_num_threads_is_honoured(eight_cpus, value, expected):
    choice = choose_threads(environ={"OMP_NUM_THREADS": value}, cpus=8, idle=0.0, current=1)
    assert (choice.threads, choice.source) == (expected, "OMP_NUM_THREADS")


def test_an_omp_num_threads_openmp_cannot_read_is_ignored(eight_cpus):
    assert choose_threads(environ={"OMP_NUM_THREADS": "many"}, cpus=8, idle=8.0, current=8).source == "CPUs"


@pytest.mark.parametrize("idle, current, expected", [
    (8.0, 8, 8),  # a quiet machine: every CPU
    (2.9, 8, 3), (2.7, 8, 2),  # a CPU counts when mostly idle
    (0.0, 8, 1),  # every core held by another process: one thread, never none
    (None, 8, 8),  # not measured: the CPUs
    (8.0, 1, 1),  # a caller that set fewer keeps them
])
def test_without_an_override_the_idle_cpus_decide(idle, current, expected):
    choice = choose_threads(environ={}, cpus=8, idle=idle, measure=False, current=current)
    assert (choice.threads, choice.source) == (expected, "CPUs")


@pytest.mark.parametrize("shares, expected", [(1, 8), (2, 4), (3, 2), (8, 1), (20, 1)])
def test_runs_side_by_side_share_the_cpus_at_least_one_thread_each(shares, expected):
    choice = choose_threads(shares, environ={}, cpus=8, idle=8.0, current=8)
    assert choice.threads == expected and (f"shared by {shares} runs" in choice.describe()) == (shares > 1)


def test_shares_below_one_are_refused():
    with pytest.raises(ValueError, match="shares must be at least 1"):
        choose_threads(0, environ={}, cpus=8, idle=8.0, current=8)


def test_the_block_sets_the_count_says_it_and_restores_the_one_before(monkeypatch):
    monkeypatch.setenv("NFNZOO_THREADS", "1")
    previous = torch.get_num_threads()
    assert threads_line() == f"{previous} torch thread{'s' if previous != 1 else ''} (this process's setting)"
    with benchmark_threads() as choice:
        assert torch.get_num_threads() == 1 == choice.threads
        assert threads_line() == choice.describe() == f"1 torch thread (from NFNZOO_THREADS; {choice.cpus} CPU" + \
            ("s)" if choice.cpus != 1 else ")")
    assert torch.get_num_threads() == previous


def test_the_measured_idle_cpus_are_in_the_description():
    assert ThreadChoice(1, "CPUs", 2, 0.43).describe() == "1 torch thread (2 CPUs, 0.4 idle; NFNZOO_THREADS=N chooses)"


# ---- the commands

def _environment(**more: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("NFNZOO_THREADS", "OMP_NUM_THREADS")}
    return {**env, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled", **more}


def _bench_run(tiny_zoo: Path, out: Path, env: dict[str, str], cpus: set[int] | None = None):
    argv = [str(NFNZOO), "bench", "run", "--task", "generalization", "--model", "statnn", "--data", str(tiny_zoo),
            "--seeds", "0", "--out", str(out), "--set", "task.epochs=1"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600,
                          preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus))


@pytest.mark.parametrize("how", ["NFNZOO_THREADS", "affinity"])
def test_bench_run_records_and_says_the_thread_count_it_used(tiny_zoo, tmp_path, how):
    if how == "NFNZOO_THREADS":  # more than the child's mask allows: the override is the user's
        expected, env, cpus, said = min(2, os.cpu_count()), _environment(NFNZOO_THREADS=str(min(2, os.cpu_count()))), \
            {min(os.sched_getaffinity(0))}, "(from NFNZOO_THREADS; 1 CPU)"
    else:  # one CPU in the mask: one thread, however idle the machine
        expected, env, cpus, said = 1, _environment(), {min(os.sched_getaffinity(0))}, \
            "(1 CPU; NFNZOO_THREADS=N chooses)"
    done = _bench_run(tiny_zoo, tmp_path / "r.json", env, cpus)
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stderr.splitlines()[0]
    assert first.startswith(f"bench generalization/statnn: {expected} torch thread") and said in first, first
    assert load_results(tmp_path / "r.json").hardware.threads == expected


def test_a_malformed_nfnzoo_threads_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("NFNZOO_THREADS", "0")
    assert main(["bench", "check-model", "statnn", "--seeds", "0", "--spaces", "siren"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("nfnzoo bench: error: NFNZOO_THREADS='0': expected a number of threads from 1 ")
    assert captured.err.count("\n") == 1 and captured.out == ""


PLUGIN = textwrap.dedent('''
    import dataclasses
    import os

    import torch
    from torch import nn


    @dataclasses.dataclass(frozen=True)
    class MomentsConfig:
        out_features: int = 1


    class CountsThreads(nn.Module):
        """Two permutation-invariant moments of each tensor's entries; raises unless torch runs on
        EXPECTED_THREADS threads in the process that runs it."""

        Config = MomentsConfig
        symmetries = ("permutation",)
        weight_spaces = ("feedforward",)

        def __init__(self, weight_space, out_features: int = 1):
            super().__init__()
            self.head = nn.Linear(2 * len(weight_space.tensors), out_features)

        def forward(self, weights):
            if torch.get_num_threads() != int(os.environ["EXPECTED_THREADS"]):
                raise ValueError(f"ran on {torch.get_num_threads()} threads")
            flat = [t.reshape(len(weights), -1) for t in weights.tensors]
            return self.head(torch.stack([m for f in flat for m in (f.mean(1), f.abs().mean(1))], dim=1))
''')


@pytest.mark.skipif(os.cpu_count() < 2, reason="the child's default count must differ from the chosen one")
@pytest.mark.parametrize("chosen, expected", [("1", "1"), ("1", "2")])  # the second: the check can fail
def test_check_model_s_child_runs_on_the_command_s_thread_count(tmp_path, chosen, expected):
    (tmp_path / "threads_plugin.py").write_text(PLUGIN)
    env = _environment(NFNZOO_THREADS=chosen, EXPECTED_THREADS=expected, PYTHONPATH=str(tmp_path))
    done = subprocess.run([str(NFNZOO), "bench", "check-model", "threads_plugin:CountsThreads", "--seeds", "0",
                           "--spaces", "cnn-relu"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if chosen == expected:
        assert done.returncode == 0, done.stderr[-3000:]
        assert "threads: 1 torch thread (from NFNZOO_THREADS; " in done.stdout, done.stdout
    else:
        assert done.returncode == 1 and f"ran on {chosen} threads" in done.stderr, done.stderr[-3000:]


def test_the_hardware_block_bounds_the_thread_count(results_path, tmp_path):
    data = json.loads(results_path.read_text())
    assert load_results(results_path).hardware.threads == torch.get_num_threads()  # the fixture's run, here
    for value, reason in ((0, "expected 1 to 8,192 threads"), (True, "expected an integer")):
        data["hardware"]["threads"] = value
        (tmp_path / "bad.json").write_text(json.dumps(data))
        with pytest.raises(SchemaError, match=f"hardware.threads: {reason}"):
            load_results(tmp_path / "bad.json")
    del data["hardware"]["threads"]  # results written before the field still load
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert load_results(tmp_path / "old.json").hardware.threads is None


def test_the_benchmark_s_busy_loops_all_stop():
    """`benchmarks.perf.threads`' competing load: one spinning process per CPU, every one gone after."""
    from benchmarks.perf.threads import busy_loops

    def spinning() -> set[int]:
        found = set()
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                if b"os.fork() == 0" in cmdline.read_bytes():
                    found.add(int(cmdline.parent.name))
        return found

    before = spinning()
    with busy_loops(2):
        assert len(spinning() - before) == 2
    for _ in range(50):  # SIGKILL to the group: the forked children end as the leader does, or just after
        if not spinning() - before:
            break
        time.sleep(0.1)
    assert not spinning() - before
