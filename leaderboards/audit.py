"""Auditing a board: every accepted entry checked again, as CI does for the official board.

`audit(root)` re-reads each entry under `<root>/entries` and reports, per entry, what no longer
holds: its results' content hash (a hand-edited metric changes it), its stored predictions'
sha256, the dataset's pinned test metadata and its sha256, and the re-scoring itself
(`leaderboards.rescore`) of every seed's metrics from the stored predictions. An entry that was
accepted unverified (no predictions) is listed as such, not as a problem; `require_verified`
makes it one (the official board holds only verified entries).
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from benchmarks.files import read_json
from leaderboards.datasets import load_datasets
from leaderboards.entries import content_hash, load_entries, stored_predictions_path
from leaderboards.pinned import load_pinned
from leaderboards.rescore import read_stored_predictions, rescore


@dataclasses.dataclass(frozen=True)
class EntryAudit:
    path: Path
    verified: bool
    problems: tuple[str, ...]


def audit_entry(root: Path, path: Path, entry, datasets: dict, require_verified: bool = False) -> EntryAudit:
    problems = []
    results = entry.results
    if content_hash(read_json(path)["results"]) != entry.submission.content_hash:
        problems.append("the results differ from those accepted (their content hash changed)")
    if not entry.submission.verified:
        if require_verified:
            problems.append(f"unverified ({entry.submission.rescoring or 'accepted before re-scoring'})")
        return EntryAudit(path, False, tuple(problems))
    stored = stored_predictions_path(path)
    try:
        digest = hashlib.sha256(stored.read_bytes()).hexdigest()
    except OSError as error:
        return EntryAudit(path, True, (*problems, f"{stored}: cannot be read ({error.strerror or error})"))
    if digest != entry.submission.predictions_sha256:
        problems.append(f"{stored.name}: sha256 {digest[:12]}… is not the recorded "
                        f"{entry.submission.predictions_sha256[:12]}… (the predictions were changed)")
    record = datasets.get(results.dataset.dataset_hash)
    if record is None:
        return EntryAudit(path, True, (*problems, f"dataset {results.dataset.dataset_hash[:12]}… is not registered"))
    try:
        metadata = load_pinned(root, record)
    except ValueError as error:
        return EntryAudit(path, True, (*problems, str(error)))
    problems += rescore(results, read_stored_predictions(stored), metadata)
    return EntryAudit(path, True, tuple(problems))


def audit(root: str | Path, *, require_verified: bool = False) -> list[EntryAudit]:
    """Every entry of the board, audited (see the module docstring), sorted by path."""
    root = Path(root)
    datasets = load_datasets(root)
    return [audit_entry(root, path, entry, datasets, require_verified) for path, entry in load_entries(root)]
