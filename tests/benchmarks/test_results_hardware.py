"""A results file records the machine it ran on (CPU model, ATen's and oneDNN's instruction sets, GPU),
and results written before those fields still load."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.results import describe_hardware, load_results
from benchmarks.tracks.reporting import write_track_results
from zoo.distributed.machine import describe_machine
from zoo.validation.schema import SchemaError

MACHINE_FIELDS = ("cpu_model", "aten_isa", "onednn_isa", "gpu_model")


def test_a_benchmark_run_records_the_machine(results_path):
    hardware = json.loads(results_path.read_text())["hardware"]
    machine = describe_machine()
    assert {key: hardware[key] for key in ("platform", "cpu_model", "aten_isa", "onednn_isa", "torch")} == {
        key: machine[key] for key in ("platform", "cpu_model", "aten_isa", "onednn_isa", "torch")}
    assert hardware["gpu_model"] is None  # a CPU run; the GPU is the device's when it ran on CUDA
    assert load_results(results_path).hardware.aten_isa == machine["aten_isa"]


def test_a_track_results_file_records_the_machine(tmp_path):
    definition = {"benchmark": {"name": "toy", "tasks": 2}}
    per_seed = [{"seed": seed, "metrics": {"final_average_accuracy": 0.5}, "train_time_s": 1.0,
                 "peak_memory_mb": None, "selection": {}, "ranking": {}} for seed in (0, 1, 2)]
    matrix = np.array([[0.5, 0.4], [np.nan, 0.6]])
    path = write_track_results(tmp_path / "toy.json", task="continual-learning", track="norga", profile="tiny",
                               benchmark="toy", method="method", method_config={}, definition=definition,
                               per_seed=per_seed, matrices={seed: matrix for seed in (0, 1, 2)}, num_params=1)
    results = load_results(path)
    assert results.hardware.aten_isa == describe_machine()["aten_isa"]
    assert results.hardware.cpu_model == describe_machine()["cpu_model"]


def test_results_written_before_the_machine_fields_still_load(results_path, tmp_path):
    data = json.loads(results_path.read_text())
    for key in MACHINE_FIELDS:
        del data["hardware"][key]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    hardware = load_results(old).hardware
    assert all(getattr(hardware, key) is None for key in MACHINE_FIELDS)


@pytest.mark.parametrize("key, value", [("cpu_model", "AMD\nEPYC"), ("gpu_model", "x" * 201), ("aten_isa", 5)])
def test_a_bad_machine_field_is_one_line_naming_it(results_path, tmp_path, key, value):
    data = json.loads(results_path.read_text())
    data["hardware"][key] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(SchemaError, match=f"hardware.{key}") as raised:
        load_results(bad)
    assert "\n" not in str(raised.value)


def test_describe_hardware_names_the_device_and_its_gpu():
    hardware = describe_hardware("cuda (NVIDIA H200)", "NVIDIA H200")
    assert (hardware["device"], hardware["gpu_model"]) == ("cuda (NVIDIA H200)", "NVIDIA H200")
    assert set(hardware) == {"platform", "python", "torch", "device", *MACHINE_FIELDS}


@pytest.mark.parametrize("curve, message", [([0.1, float("nan")], r"per_seed\[0\]\.curve\[1\]: expected a finite "
                                                                   r"number, got nan \(or null\)"),
                                            ([0.1, "high"], r"per_seed\[0\]\.curve\[1\]")])
def test_a_learning_curve_holds_finite_numbers_or_nulls(results_path, curve, message):
    from benchmarks.results import Results
    from zoo.validation.schema import from_data

    data = json.loads(results_path.read_text())
    assert len(data["per_seed"][0]["curve"]) == data["task_config"]["epochs"]  # what a run writes
    data["per_seed"][0]["curve"] = [0.2, None, 0.3]  # null: an epoch whose score was not finite
    assert from_data(Results, data, "r.json").per_seed[0].curve == (0.2, None, 0.3)
    data["per_seed"][0]["curve"] = curve
    with pytest.raises(SchemaError, match=message):
        from_data(Results, data, "r.json")
