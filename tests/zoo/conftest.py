"""Fixtures for zoo tests: hand-made CNN checkpoint records, and a packed zoo read by `datasets`.

The trained tiny zoo itself (`tiny_zoo`, `tiny_zoo_copy`) lives in tests/conftest.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import pytest
import torch

from zoo.families import create_family
from zoo.training.train import CLASSIFICATION_METRICS as METRIC_NAMES
from zoo.families.cnn import CNNArchitecture, CNNHParams
from zoo.storage.record import CheckpointRecord

ARCH = dataclasses.asdict(CNNArchitecture())
HPARAMS = {"optimizer": "adam", "learning_rate": 0.003, "l2": 1e-6, "init": "normal", "init_std": 0.1,
           "activation": "relu", "dropout": 0.1, "train_fraction": 0.5}
HPARAM_NAMES = [f.name for f in dataclasses.fields(CNNHParams)]


def cnn_weights(seed: int, architecture: dict = ARCH) -> dict[str, torch.Tensor]:
    """A CNN state dict in weight-space order with seeded random values."""
    generator = torch.Generator().manual_seed(seed)
    shapes = create_family("cnn").build(architecture).state_dict()
    return {name: torch.randn(tensor.shape, generator=generator) for name, tensor in shapes.items()}


def make_record(seed: int = 0, *, status: str = "ok", architecture: dict = ARCH, epoch: int = 3) -> CheckpointRecord:
    """A record with seeded random weights; a diverged one has NaN metrics."""
    metrics = ({name: 0.1 * (i + 1) + seed for i, name in enumerate(METRIC_NAMES)} if status == "ok"
               else dict.fromkeys(METRIC_NAMES, math.nan))
    return CheckpointRecord(model_id=f"model{seed:04d}", run_id=f"run{seed:04d}", family="cnn", config="cnn-mnist",
                            epoch=epoch, seed=seed, hparams=dict(HPARAMS), metrics=metrics, status=status,
                            architecture=dict(architecture), weights=cnn_weights(seed, architecture))


def assert_same_record(actual: CheckpointRecord, expected: CheckpointRecord) -> None:
    """Every field equal (NaN metrics match NaN), weights equal in order, dtype and value."""
    for field in dataclasses.fields(CheckpointRecord):
        if field.name not in ("weights", "metrics"):
            assert getattr(actual, field.name) == getattr(expected, field.name), field.name
    assert sorted(actual.metrics) == sorted(METRIC_NAMES)
    for name in METRIC_NAMES:
        a, e = actual.metrics[name], expected.metrics[name]
        assert a == e or (math.isnan(a) and math.isnan(e)), name
    assert list(actual.weights) == list(expected.weights)
    for name, tensor in expected.weights.items():
        assert actual.weights[name].dtype == tensor.dtype
        assert torch.equal(actual.weights[name], tensor), name


def assert_members_match(solo: dict, together: dict, weight_tolerance: float, metric_tolerance: float) -> None:
    """Checkpoints of members trained alone and in a population agree to the tolerances."""
    assert set(solo) == set(together)
    for key, alone in solo.items():
        member = together[key]
        assert member.status == alone.status == "ok"
        for name, tensor in alone.weights.items():
            assert torch.allclose(member.weights[name], tensor, rtol=weight_tolerance, atol=weight_tolerance), \
                (key, name, f"max |difference| {(member.weights[name] - tensor).abs().max().item():.3g}")
        for metric, value in alone.metrics.items():
            assert math.isclose(member.metrics[metric], value, rel_tol=metric_tolerance, abs_tol=metric_tolerance), \
                (key, metric)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device here: the population's GPU path runs where one is"))])
def device(request) -> torch.device:
    """Where a population trains in equivalence tests (its solo reference always runs on the CPU)."""
    from zoo.training.device import exact_float32

    exact_float32()
    return torch.device(request.param)


@pytest.fixture(name="assert_members_match")
def assert_members_match_fixture():
    return assert_members_match


@pytest.fixture(name="make_record")
def make_record_fixture():
    return make_record


@pytest.fixture(name="assert_same_record")
def assert_same_record_fixture():
    return assert_same_record


# A script that reads a packed zoo the way a user of the Hub would: only `datasets` and
# `safetensors` (numpy flavour), no zoo and no torch. It prints what it saw as JSON.
READ_WITH_DATASETS = r"""
import hashlib, json, sys
import datasets
from safetensors.numpy import load

folder, config = sys.argv[1], sys.argv[2]
zoo = datasets.load_dataset(folder, config)
seen = {"imported_zoo": any(m == "zoo" or m.startswith("zoo.") for m in sys.modules), "splits": {}}
for split, rows in zoo.items():
    first = load(rows[0]["weights"])
    seen["splits"][split] = {
        "rows": rows.num_rows,
        "columns": rows.column_names,
        "features": {name: str(feature) for name, feature in rows.features.items()},
        "model_ids": list(rows["model_id"]),
        "weights_sha256": [hashlib.sha256(w).hexdigest() for w in rows["weights"]],
        "first_row": {name: {"shape": list(a.shape), "dtype": str(a.dtype), "values": a.ravel().tolist()}
                      for name, a in first.items()},
    }
print(json.dumps(seen))
"""


@pytest.fixture
def read_with_datasets(offline_hf):
    """read_with_datasets(folder, config) -> what `datasets.load_dataset` sees, in a fresh process."""

    def read(folder, config: str) -> dict:
        result = subprocess.run([sys.executable, "-c", READ_WITH_DATASETS, str(folder), config], env=offline_hf,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-4000:]
        return json.loads(result.stdout.strip().splitlines()[-1])

    return read
