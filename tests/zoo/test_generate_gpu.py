"""What a trial asks Ray for: CUDA trials take GPU shares (so Ray places them on GPU nodes only),
CPU trials none, and a cluster without GPUs is one line before anything runs. No GPU here: the
placement itself is Ray's (`num_gpus`); the device checks on a GPU machine are
benchmarks/perf/gpu_check.sh's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from zoo.distributed.driver import trial_resources

CPU_ONLY = {"CPU": 4.0, "memory": 8e9, "object_store_memory": 2e9, "node:127.0.0.1": 1.0}
MIXED = {"CPU": 12.0, "GPU": 2.0, "memory": 8e9, "node:127.0.0.1": 1.0}


@pytest.mark.parametrize("device, gpus_per_trial, cluster, expected", [
    (None, None, CPU_ONLY, ("cpu", 0.0)),  # auto: no GPU in the cluster
    (None, None, MIXED, ("cuda", 2 / 12)),  # auto: CUDA, an equal share among the CPUs
    ("cuda", 0.25, MIXED, ("cuda", 0.25)),  # four trials per GPU
    (None, 1, MIXED, ("cuda", 1.0)),  # --gpus-per-trial alone means CUDA
    ("cuda:1", None, {"CPU": 1.0, "GPU": 4.0}, ("cuda:1", 1.0)),  # at most one GPU each by default
    ("cpu", None, MIXED, ("cpu", 0.0)),  # CPU trials ask for no GPU, even on a GPU cluster
])
def test_trials_ask_for_gpus_only_when_they_train_on_cuda(device, gpus_per_trial, cluster, expected, monkeypatch):
    monkeypatch.delenv("NFNZOO_DEVICE", raising=False)
    assert trial_resources(device, gpus_per_trial, cluster, int(cluster["CPU"])) == expected


@pytest.mark.parametrize("device, gpus_per_trial, cluster, message", [
    ("cuda", None, CPU_ONLY, "device cuda requested, but the Ray cluster has no GPU (its resources: CPU 4, "
                             "memory 8e+09, object_store_memory 2e+09)"),
    ("cpu", 0.5, MIXED, "--gpus-per-trial 0.5 asks for GPUs, but the device is 'cpu'"),
    ("cuda", 3, MIXED, "--gpus-per-trial 3 is more than the Ray cluster's 2 GPUs"),
    ("tpu", None, MIXED, "unknown device 'tpu' (from --device or NFNZOO_DEVICE): expected cpu, cuda or cuda:N"),
])
def test_impossible_requests_are_named(device, gpus_per_trial, cluster, message, monkeypatch):
    monkeypatch.delenv("NFNZOO_DEVICE", raising=False)
    with pytest.raises(ValueError) as error:
        trial_resources(device, gpus_per_trial, cluster, int(cluster["CPU"]))
    assert str(error.value) == message


@pytest.mark.slow
def test_cuda_on_a_cluster_without_gpus_is_one_line_and_trains_nothing(ray_cluster, tmp_path):
    out = tmp_path / "zoo"
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
    result = subprocess.run([sys.executable, "-m", "zoo.cli", "generate", "cnn-mnist", "--profile", "tiny", "--out",
                             str(out), "--gpus-per-trial", "0.5", "--address", ray_cluster.address],
                            capture_output=True, text=True, env=environment, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("nfnzoo generate: error: device cuda requested, but the Ray cluster has no GPU "
                           "(its resources: CPU 2"), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert not list((out / "staging").glob("*/*.safetensors"))
