"""A staged checkpoint counts only if it is whole: checksummed, checked, else set aside and retrained.

A 0-byte, truncated or bit-flipped file in staging/ used to count as staged forever: every
`generate` skipped its run and every `pack` failed with "not a safetensors buffer" naming no
file. Now it is moved to staging/.corrupt/ with a warning naming it, `pack` says which
checkpoints are missing, and training the plan again (what each `generate` trial does,
`zoo.training.worker.train_runs`, deciding by the same `Staging.missing` as the driver) rewrites
exactly that checkpoint, after which the pack is byte-identical to the original.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zoo.storage import safetensors_io
from zoo.cli import main
from zoo.storage.folder import MANIFEST, STAGING_FOLDER, load_saved_specs
from zoo.planning.plan import plan_runs
from zoo.storage.staging import CHECKSUM_KEY, CORRUPT_FOLDER, RECORD_KEY, Staging, staged_file_problem
from zoo.training.worker import train_runs


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "zero":
        data = bytearray()
    elif how == "short":
        data = data[:5]
    elif how == "truncated":
        data = data[: len(data) // 2]
    elif how == "flipped-data":
        data[-100] ^= 0x01  # one bit of one weight: the file still decodes
    elif how == "flipped-header":
        marker = b'epoch\\": '  # inside the record's JSON, itself a JSON string of the header
        position = bytes(data).index(marker) + len(marker)
        data[position] = ord("7") if data[position] != ord("7") else ord("8")  # a record that still parses
    elif how == "huge-header":
        data[:8] = (2**40).to_bytes(8, "little")
    path.chmod(0o644)
    path.write_bytes(bytes(data))


DAMAGES = ["zero", "short", "truncated", "flipped-data", "flipped-header", "huge-header"]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_staged_file_is_set_aside_named_and_retrained(tiny_zoo, tiny_zoo_copy, capsys, how):
    staging = Staging(tiny_zoo_copy / STAGING_FOLDER)
    victim = sorted(staging.model_ids())[7]
    path = staging.path(victim)
    _damage(path, how)

    code = main(["pack", str(tiny_zoo_copy)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"warning: staged checkpoint {path} is not trusted" in err, err
    assert f"moved to {tiny_zoo_copy / STAGING_FOLDER / CORRUPT_FOLDER / path.name}" in err, err
    assert "incomplete: 17 of 18 planned checkpoints are staged" in err, err
    assert not path.exists() and (tiny_zoo_copy / STAGING_FOLDER / CORRUPT_FOLDER / path.name).exists()
    assert (tiny_zoo_copy / MANIFEST).read_bytes() == (tiny_zoo / MANIFEST).read_bytes()  # the last pack stays

    spec, = load_saved_specs(tiny_zoo_copy)
    fresh = Staging(tiny_zoo_copy / STAGING_FOLDER)
    assert fresh.missing([m for run in plan_runs(spec) for m in run.model_ids]) == [victim]
    assert train_runs(spec, plan_runs(spec), fresh) == 1  # only the damaged checkpoint is written again
    code = main(["pack", str(tiny_zoo_copy)])
    assert code == 0, capsys.readouterr().err
    assert (tiny_zoo_copy / MANIFEST).read_bytes() == (tiny_zoo / MANIFEST).read_bytes()  # the same zoo again


def test_a_staged_file_records_a_checksum_of_its_header_and_data(tiny_zoo):
    staging = Staging(tiny_zoo / STAGING_FOLDER)
    for model_id in staging.model_ids():
        header, _ = safetensors_io.read_header(staging.path(model_id).read_bytes())
        assert len(header["__metadata__"][CHECKSUM_KEY]) == 64
        assert staged_file_problem(staging.path(model_id)) is None


def _without_checksum(path: Path, drop: tuple[str, ...] = ()) -> bytes:
    tensors, metadata = safetensors_io.decode(path.read_bytes())
    for key in (CHECKSUM_KEY, *drop):
        del metadata[key]
    return safetensors_io.encode(tensors, metadata)


def test_a_file_staged_before_checksums_is_trusted_only_if_it_decodes(tiny_zoo_copy, capsys):
    staging = Staging(tiny_zoo_copy / STAGING_FOLDER)
    whole, cut, broken = staging.model_ids()[:3]
    legacy = {whole: _without_checksum(staging.path(whole)), cut: _without_checksum(staging.path(cut))[:-40],
              broken: _without_checksum(staging.path(broken), drop=(RECORD_KEY,))}  # a header, but no record
    for model_id, data in legacy.items():
        staging.path(model_id).chmod(0o644)
        staging.path(model_id).write_bytes(data)
    fresh = Staging(tiny_zoo_copy / STAGING_FOLDER)
    assert fresh.missing([whole, cut, broken]) == [cut, broken]
    assert fresh.read(whole).model_id == whole
    err = capsys.readouterr().err
    assert f"{staging.path(cut)} is not trusted (not a safetensors file: tensor" in err, err
    assert f"{staging.path(broken)} is not trusted (does not decode (KeyError))" in err, err


def test_a_folder_or_pipe_in_place_of_a_staged_file_is_set_aside(tiny_zoo_copy, capsys):
    import os

    staging = Staging(tiny_zoo_copy / STAGING_FOLDER)
    first, second = staging.model_ids()[:2]
    staging.path(first).unlink()
    staging.path(first).mkdir()
    staging.path(second).unlink()
    os.mkfifo(staging.path(second))
    fresh = Staging(tiny_zoo_copy / STAGING_FOLDER)
    assert fresh.missing([first, second]) == [first, second]  # a FIFO is not opened for reading: no hang
    err = capsys.readouterr().err
    assert "is a folder" in err and "not a regular file" in err


def test_checking_the_staging_folder_is_done_once_per_file_version(tiny_zoo):
    """Each staged file's bytes are read once; asking again only stats them (its cost is measured by
    `make bench-generation`, not timed here). Counted by Python's own `open` audit events."""
    import sys

    opened: list[str] = []
    watching = [False]

    def hook(event, arguments):
        if watching[0] and event == "open" and str(arguments[0]).endswith(".safetensors"):
            opened.append(str(arguments[0]))

    sys.addaudithook(hook)  # hooks cannot be removed: this one only counts while `watching`
    staging = Staging(tiny_zoo / STAGING_FOLDER)
    watching[0] = True
    ids = staging.model_ids()
    first, opened[:] = list(opened), []
    assert staging.model_ids() == ids
    watching[0] = False
    assert len(ids) == 18 and len(set(first)) == 18, first  # the negative control: a first look reads each file
    assert opened == [], opened
