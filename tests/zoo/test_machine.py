"""Where checkpoints came from: describing the machine, the folder's machines.json, the manifest's record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.cli import main
from zoo.storage.folder import read_manifest
from zoo.dataset.info import describe
from zoo.validation.inputs import InputError
from zoo.distributed.machine import (MACHINES_FILE, check_machines, describe_machine, isa_note, merge_machines,
                                     read_machines,
                         record_machines)
from zoo.dataset.pack import pack
from zoo.validation.schema import SchemaError

FIELDS = {"platform", "cpu_model", "aten_isa", "onednn_isa", "gpu_models", "cuda", "torch"}


@pytest.fixture(scope="module")
def here() -> dict:
    return describe_machine()


def other(description: dict, **changes) -> dict:
    return {**description, **changes}


def test_describe_machine_has_every_field_as_plain_json(here):
    assert set(here) == FIELDS
    assert isinstance(here["platform"], str) and here["platform"]
    assert here["aten_isa"] == torch.backends.cpu.get_cpu_capability()
    assert here["torch"] == torch.__version__
    assert here["gpu_models"] == [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    for key in ("cpu_model", "onednn_isa", "cuda"):
        assert here[key] is None or isinstance(here[key], str)
    if torch.backends.mkldnn.is_available():
        assert here["onednn_isa"], "oneDNN is built in: its ISA should be read from its verbose log"
    assert json.loads(json.dumps(here)) == here
    assert describe_machine() == here  # the same answer on a second call in one process


def test_onednn_isa_follows_its_cap_in_a_fresh_process():
    """ONEDNN_MAX_CPU_ISA caps the kernels oneDNN picks; what we record is what it picked."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("torch has no oneDNN here")
    script = "from zoo.distributed.machine import onednn_isa; print(onednn_isa())"
    capped = subprocess.run([sys.executable, "-c", script], env={"ONEDNN_MAX_CPU_ISA": "SSE41", "PATH": ""},
                            capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2])
    assert capped.stdout.strip().splitlines()[-1] in ("sse41", "gemm:jit", "ref:any")
    assert "onednn_verbose" not in capped.stdout  # the log we read is not left on the user's terminal


def test_merge_sums_the_counts_of_equal_descriptions(here):
    gpu = other(here, gpu_models=["NVIDIA H100 80GB HBM3"], cuda="12.8")
    merged = merge_machines([{**here, "checkpoints": 10}], [{**here, "checkpoints": 5}, {**gpu, "checkpoints": 7}])
    assert merged == [{**here, "checkpoints": 15}, {**gpu, "checkpoints": 7}]
    assert merge_machines([], []) == []


def test_record_then_read_round_trips_and_accumulates(tmp_path, here):
    avx2 = other(here, aten_isa="AVX2", onednn_isa="avx2")
    record_machines(tmp_path, [{**here, "checkpoints": 3}])
    written = record_machines(tmp_path, [{**here, "checkpoints": 2}, {**avx2, "checkpoints": 4}])
    assert read_machines(tmp_path) == written
    assert [(m["aten_isa"], m["checkpoints"], m["role"]) for m in written] == [
        (here["aten_isa"], 5, "trained"), ("AVX2", 4, "trained")]
    assert read_machines(tmp_path / "nowhere") is None


def test_record_refuses_a_description_without_its_count(tmp_path, here):
    with pytest.raises(SchemaError, match=r"\[0\]\.checkpoints"):
        record_machines(tmp_path, [here])
    assert not (tmp_path / MACHINES_FILE).exists()


@pytest.mark.parametrize("content, names", [
    ('{"platform": "x"}', "expected a list"),
    ("[{\"platform\": \"x\"", "not valid JSON"),
    ('[{"platform": "x", "cpu_model": null, "aten_isa": null, "onednn_isa": null, "gpu_models": [], "cuda": null,'
     ' "torch": null, "checkpoints": -1}]', r"\[0\]\.checkpoints"),
    ('[{"platform": "x", "colour": "red"}]', r"\[0\]\.colour: unknown key"),
    ('[{"platform": "a\\u202eb", "cpu_model": null, "aten_isa": null, "onednn_isa": null, "gpu_models": [],'
     ' "cuda": null, "torch": null}]', r"\[0\]\.platform"),
])
def test_a_damaged_machines_file_is_one_line_naming_it(tmp_path, content, names):
    (tmp_path / MACHINES_FILE).write_text(content)
    with pytest.raises((InputError, SchemaError), match=names) as raised:
        read_machines(tmp_path)
    assert str(tmp_path / MACHINES_FILE) in str(raised.value) and "\n" not in str(raised.value)


def test_a_fifo_in_place_of_machines_json_is_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / MACHINES_FILE)
    with pytest.raises(InputError, match="not a regular file"):
        read_machines(tmp_path)


def test_isa_note_names_the_instruction_set_that_differs(here):
    trainers = check_machines([{**other(here, aten_isa="AVX2"), "checkpoints": 4}], "x")
    note = isa_note(trainers, here)
    assert "aten_isa" in note and "AVX2 recorded" in note
    assert isa_note(check_machines([{**here, "checkpoints": 4}], "x"), here) is None  # same ISA: no excuse
    assert isa_note([{**here, "checkpoints": None, "role": "packed"}], other(here, aten_isa="AVX2")) is None


# --- the manifest ---------------------------------------------------------------------------------

def test_a_pack_without_machines_json_records_the_packing_machine(tiny_zoo, here):
    """The session zoo is staged by `zoo.training.worker.train_runs` without Ray: its trainers are unknown."""
    machines = read_manifest(tiny_zoo)["configs"]["cnn-mnist"]["machines"]
    assert machines == [{**here, "checkpoints": None, "role": "packed"}]
    assert "packed the zoo (the machines that trained it are unknown)" in describe(tiny_zoo)


def test_a_pack_copies_machines_json_into_the_manifest(tiny_zoo_copy, here, capsys):
    trainers = [{**other(here, gpu_models=["NVIDIA H200"], cuda="13.0"), "checkpoints": 6},
                {**other(here, aten_isa="AVX2", onednn_isa="avx2"), "checkpoints": 2}]
    record_machines(tiny_zoo_copy, trainers)
    pack(tiny_zoo_copy)
    recorded = read_manifest(tiny_zoo_copy)["configs"]["cnn-mnist"]["machines"]
    assert recorded == [{**machine, "role": "trained"} for machine in trainers]
    assert main(["info", str(tiny_zoo_copy)]) == 0
    shown = capsys.readouterr().out
    assert "trained 6 checkpoints" in shown and "GPUs NVIDIA H200" in shown and "ATen AVX2, oneDNN avx2" in shown


def test_a_damaged_machines_json_stops_the_pack_before_it_writes(tiny_zoo_copy, capsys):
    before = (tiny_zoo_copy / "manifest.json").read_bytes()
    (tiny_zoo_copy / MACHINES_FILE).write_text("[{]")
    assert main(["pack", str(tiny_zoo_copy)]) == 1
    error = capsys.readouterr().err.strip()
    assert MACHINES_FILE in error and len(error.splitlines()) == 1
    assert (tiny_zoo_copy / "manifest.json").read_bytes() == before


def test_a_hand_edited_manifest_machine_is_one_line_naming_the_key(tiny_zoo_copy, capsys):
    path = tiny_zoo_copy / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["configs"]["cnn-mnist"]["machines"][0]["gpu_models"] = "H100"
    path.write_text(json.dumps(manifest))
    assert main(["info", str(tiny_zoo_copy)]) == 1
    error = capsys.readouterr().err.strip()
    assert "configs.cnn-mnist.machines: [0].gpu_models" in error and len(error.splitlines()) == 1


def test_a_manifest_from_before_machines_still_reads(tiny_zoo_copy):
    path = tiny_zoo_copy / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["configs"]["cnn-mnist"]["machines"]
    path.write_text(json.dumps(manifest))
    assert "machines: not recorded" in describe(tiny_zoo_copy)
