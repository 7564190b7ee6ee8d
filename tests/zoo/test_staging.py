"""The staging folder: atomic writes, listings that ignore temporary files, full-record reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import safetensors.torch
import torch

from zoo.storage import atomic as atomic_module
from zoo.storage.staging import SUFFIX, Staging, read_staged


def all_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_write_then_read_round_trips(tmp_path, make_record, assert_same_record):
    staging = Staging(tmp_path / "staging")
    records = [make_record(1), make_record(2, status="diverged")]
    for record in records:
        path = staging.write(record)
        assert path == staging.path(record.model_id)
        assert path.parent.name == record.model_id[:2] and path.name == record.model_id + SUFFIX
    assert staging.model_ids() == sorted(r.model_id for r in records)
    for record in records:
        assert staging.exists(record.model_id)
        assert_same_record(staging.read(record.model_id), record)
    for read, record in zip(staging, sorted(records, key=lambda r: r.model_id)):
        assert_same_record(read, record)


def test_staged_file_is_a_plain_safetensors_file(tmp_path, make_record):
    record = make_record(3)
    path = Staging(tmp_path).write(record)
    loaded = safetensors.torch.load(path.read_bytes())
    assert all(torch.equal(loaded[name], tensor) for name, tensor in record.weights.items())


def test_missing_lists_exactly_the_absent_ids(tmp_path, make_record):
    staging = Staging(tmp_path)
    staging.write(make_record(4))
    assert staging.missing(["model0004", "model0005", "model0006"]) == ["model0005", "model0006"]
    assert staging.missing(("model0004",)) == []


def test_crash_in_rename_leaves_no_file_and_no_temporary(tmp_path, make_record, monkeypatch):
    staging = Staging(tmp_path / "staging")
    record = make_record(5)

    def crash(src, dst):
        assert Path(src).exists() and Path(src).read_bytes()  # the data was fully written before the rename
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        staging.write(record)
    monkeypatch.undo()
    assert not staging.exists(record.model_id)
    assert staging.model_ids() == []
    assert all_files(tmp_path) == []  # the temporary was removed


def test_crash_while_writing_the_payload_leaves_nothing(tmp_path, make_record, monkeypatch):
    staging = Staging(tmp_path / "staging")
    record = make_record(6)

    def crash(descriptor):
        raise KeyboardInterrupt  # e.g. Ctrl-C during fsync; BaseException, not Exception

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(KeyboardInterrupt):
        staging.write(record)
    monkeypatch.undo()
    assert staging.model_ids() == [] and all_files(tmp_path) == []


def test_tensor_that_cannot_be_serialized_leaves_nothing(tmp_path, make_record):
    staging = Staging(tmp_path / "staging")
    record = make_record(7)
    record.weights["dense.bias"] = record.weights["dense.bias"].to(torch.complex64)  # no safetensors dtype
    with pytest.raises(KeyError):
        staging.write(record)
    assert staging.model_ids() == [] and all_files(tmp_path) == []


def test_crash_keeps_an_earlier_complete_version(tmp_path, make_record, monkeypatch):
    staging = Staging(tmp_path)
    record = make_record(8)
    path = staging.write(record)
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(atomic_module.os, "replace", crash)
    with pytest.raises(OSError):
        staging.write(make_record(8, epoch=4))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert all_files(tmp_path) == [path.relative_to(tmp_path).as_posix()]


def test_model_ids_ignores_temporary_and_foreign_files(tmp_path, make_record):
    staging = Staging(tmp_path)
    staging.write(make_record(9))
    folder = staging.path("model0009").parent
    (folder / ".model0010.abc123.tmp").write_bytes(b"partial")  # what a killed writer leaves
    (folder / "notes.txt").write_text("not a checkpoint")
    (tmp_path / "model0011.safetensors").write_bytes(b"")  # not in a two-letter sub-folder
    assert staging.model_ids() == ["model0009"]
    assert staging.missing(["model0010"]) == ["model0010"]
    assert [r.model_id for r in staging] == ["model0009"]


def test_second_write_replaces_cleanly(tmp_path, make_record, assert_same_record):
    staging = Staging(tmp_path)
    first = make_record(12)
    path = staging.write(first)
    staging.write(first)
    assert path.read_bytes() == staging.write(first).read_bytes()  # same record, same bytes
    changed = make_record(12, status="diverged")
    staging.write(changed)
    assert_same_record(read_staged(path), changed)
    assert all_files(tmp_path) == [path.relative_to(tmp_path).as_posix()]
