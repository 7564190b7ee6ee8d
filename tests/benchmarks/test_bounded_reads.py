"""What the benchmarks read on a user's say-so is bounded: JSON (results, job records, relation
files) and .npz sidecars come through `zoo.validation.inputs` (regular files only, capped, nesting depth
limited, array shapes checked against their bytes), and `--seeds` is bounded before any list is
built. A FIFO or a device is refused at once, so each such read runs in a subprocess under a
timeout: before, it blocked forever."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from benchmarks.command_arguments import parse_seeds
from benchmarks.files import read_json, read_npz
from benchmarks.jobs import Job, run_jobs
from zoo.cli import CommandError


def _read_in_subprocess(function: str, path: str) -> str:
    """The error message of `benchmarks.files.<function>(path)` in a fresh process (10 s at most)."""
    code = (f"from benchmarks.files import {function}\n"
            f"try:\n    {function}({path!r})\nexcept ValueError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.parametrize("function", ["read_json", "read_npz"])
def test_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path, function):
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    assert "not a regular file" in _read_in_subprocess(function, str(fifo))
    assert "not a regular file" in _read_in_subprocess(function, "/dev/zero")


def test_json_is_capped_and_its_nesting_bounded(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="deep.json: JSON nested too deeply"):
        read_json(deep)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"padding": "x" * 5000}))
    with pytest.raises(ValueError, match="big.json: larger than 1,000 bytes"):
        read_json(big, limit=1000)
    overflow = tmp_path / "overflow.json"
    overflow.write_text('{"tau": 1e999}')
    with pytest.raises(ValueError, match="1e999 overflows to infinity"):
        read_json(overflow, strict=True)


def test_an_npz_member_declaring_more_than_it_holds_is_refused_before_allocation(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (200000, 200000)})
    path = tmp_path / "r.examples.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("edited.npy", header.getvalue() + b"\0" * 64)
    with pytest.raises(ValueError, match=r"member 'edited.npy' declares a \(200000, 200000\) float64 array"):
        read_npz(path)


def test_a_hostile_job_record_is_run_again_not_a_crash(tmp_path):
    """A record nested 100,000 deep (a RecursionError in json.loads before) or a folder in its
    place counts as damaged: the job runs again and its record is written."""
    jobs = [Job("seed0", dict, ([("v", 1)],), "f0"), Job("seed1", dict, ([("v", 2)],), "f1")]
    (tmp_path / "seed0.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "seed1.json").write_text('{"fingerprint": "f1", "outcome": {"v": 1e999}')  # truncated
    outcomes = run_jobs(jobs, tmp_path)
    assert outcomes == {"seed0": {"v": 1}, "seed1": {"v": 2}}
    assert json.loads((tmp_path / "seed0.json").read_text())["outcome"] == {"v": 1}


def test_seed_ranges_are_bounded_before_they_are_listed():
    start = time.perf_counter()
    for text in ("0-1000000000", "0-999,1000-1000", "0-" + "9" * 19):
        with pytest.raises(CommandError, match="--seeds"):
            parse_seeds(text)
    assert time.perf_counter() - start < 1.0  # arithmetic, not a billion-element list
    assert len(parse_seeds("0-999")) == 1000
    with pytest.raises(CommandError, match="the seed 4294967296 is too large"):
        parse_seeds("4294967296")
    with pytest.raises(CommandError, match=r"the seeds \[3\] appear twice"):
        parse_seeds("1-3,3")


def test_a_skip_record_reads_back_as_its_first_line_bounded_and_printable(tmp_path):
    from benchmarks.results import skip_path, skip_reason, write_skip
    from zoo.validation.inputs import InputError

    record = write_skip(tmp_path, "statnn-t0.8", ValueError("threshold 0.8 leaves 1 test row\nsecond line"))
    assert record == skip_path(tmp_path, "statnn-t0.8") == tmp_path / "statnn-t0.8.skipped"
    assert skip_reason(record) == "threshold 0.8 leaves 1 test row"
    record.write_text("bell \x07 and escape \x1b[2J in a hand-edited record\n")
    assert skip_reason(record) == ascii("bell \x07 and escape \x1b[2J in a hand-edited record")
    record.write_text("x" * 600)
    assert len(skip_reason(record)) <= 502  # cut to 500 characters, quoted
    record.write_bytes(b"y" * (64 * 2**10 + 1))
    with pytest.raises(InputError, match="statnn-t0.8.skipped"):
        skip_reason(record)


def test_a_results_file_in_an_out_folder_is_checked_against_the_schema_naming_file_and_key(tmp_path):
    from benchmarks.results import read_results
    from zoo.validation.schema import SchemaError

    damaged = tmp_path / "np.json"
    damaged.write_text(json.dumps({"schema_version": 1, "task": "generalization"}))
    with pytest.raises(SchemaError, match=r"np\.json: model: missing"):
        read_results(damaged)
