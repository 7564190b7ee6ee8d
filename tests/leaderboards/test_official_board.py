"""The official board (leaderboards/): every accepted entry re-scores from its stored predictions
on the pinned test metadata, so a hand-edited entry, prediction or pinned file fails CI."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from leaderboards import OFFICIAL_ROOT
from leaderboards.audit import audit
from leaderboards.datasets import load_datasets
from leaderboards.entries import entry_files, load_entries, stored_predictions_path

ENTRY_FILES = entry_files(OFFICIAL_ROOT)  # listed at collection; audited once, by the worker that runs this module


@pytest.fixture(scope="module")
def audits() -> dict:
    return {report.path: report for report in audit(OFFICIAL_ROOT, require_verified=True)}


@pytest.mark.parametrize("path", ENTRY_FILES, ids=[path.stem for path in ENTRY_FILES])
def test_every_official_entry_is_verified_and_re_scores(path, audits):
    report = audits[path]
    assert report.verified and report.problems == ()


def test_the_official_board_is_seeded_and_its_pinned_files_match_their_hashes(audits):
    assert len(audits) == len(ENTRY_FILES) >= 56
    datasets = load_datasets(OFFICIAL_ROOT)
    used = {entry.results.dataset.dataset_hash for _, entry in load_entries(OFFICIAL_ROOT)}
    assert used <= set(datasets)
    for dataset_hash in used:
        record = datasets[dataset_hash]
        data = (OFFICIAL_ROOT / record.test_metadata).read_bytes()
        assert hashlib.sha256(data).hexdigest() == record.test_metadata_sha256


def test_the_audit_catches_a_changed_copy_of_an_official_entry(tmp_path):
    """The negative control: the same audit fails once one number of one entry moves."""
    board = tmp_path / "board"
    shutil.copytree(OFFICIAL_ROOT / "pinned", board / "pinned")
    shutil.copy(OFFICIAL_ROOT / "datasets.json", board / "datasets.json")
    path, entry = load_entries(OFFICIAL_ROOT)[0]
    copied = board / path.relative_to(OFFICIAL_ROOT)
    copied.parent.mkdir(parents=True)
    shutil.copy(stored_predictions_path(path), stored_predictions_path(copied))
    text = path.read_text()
    metric = next(iter(entry.results.per_seed[0].metrics))
    value = entry.results.per_seed[0].metrics[metric]
    copied.write_text(text)
    assert audit(board, require_verified=True)[0].problems == ()
    assert repr(value) in text
    copied.write_text(text.replace(repr(value), repr(value + 0.01), 1))
    problems = audit(board, require_verified=True)[0].problems
    assert any("content hash changed" in p for p in problems) and any("re-score to" in p for p in problems)
