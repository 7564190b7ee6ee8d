"""Accepted submissions as data files: `<root>/entries/<task>/<hash12>/<model>-<id8>.json`.

An entry holds the submitted results unchanged plus a `submission` block: its id, the
sha256 of the results' canonical JSON (the content hash), the acceptance time, the file name
it was submitted from, whether it was re-scored (`verified`, `rescoring`) and, when it was,
its predictions' file beside it (`<model>-<id8>.predictions.parquet`) and their sha256, and the
entry's seal (`leaderboards.seal`: the sha256 of the whole entry as written). `hash12` is the
first 12 characters of the dataset hash, `id8` the first 8 of the content hash. Two submissions are duplicates when they have the same
content hash, or the same task, model, model config, task config (the protocol: a model on the
ReLU subset and on the tanh subset are two experiments), dataset hash and set of seeds.

Entry files are read within `MAX_ENTRY_BYTES` (a results file's bound and room for the
submission block), regular files only (`zoo.validation.inputs.read_json_file`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from benchmarks.results import Results
from zoo.validation.inputs import read_json_file
from zoo.validation.schema import SchemaError, from_data

ENTRIES_DIR = "entries"
CODE_URL = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/+-]*)?")  # no quotes, spaces or queries
COMMIT = re.compile(r"[0-9a-f]{7,40}")
SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_ENTRY_BYTES = 4 * 2**20 + 2**16  # a results file (submission.MAX_RESULTS_BYTES) and its submission block
MAX_TEXT = 1_000  # characters of the board's own text fields (the re-scoring record, the source's name)


@dataclasses.dataclass(frozen=True)
class SubmissionInfo:
    id: str  # "<model>-<first 8 hex digits of content_hash>", also the file's stem
    content_hash: str  # sha256 of the results' canonical JSON
    accepted: str  # UTC time in ISO 8601
    source: str  # the name of the submitted results file
    verified: bool = False  # re-scored from its predictions on the pinned test metadata (older entries: no)
    rescoring: str = ""  # what was re-scored, or why the entry is unverified
    predictions: str | None = None  # the stored predictions beside the entry (`<stem>.predictions.parquet`)
    predictions_sha256: str | None = None  # their sha256, set exactly when `predictions` is
    code_url: str | None = None  # the code the submitter names (an https URL), shown as the entry's link
    code_commit: str | None = None  # its commit (7-40 hex digits)
    seal: str | None = None  # sha256 of the whole entry without this field (leaderboards.seal); audit checks it

    def validate(self, where: str, key: str) -> None:
        for name in ("content_hash", "predictions_sha256", "seal"):
            value = getattr(self, name)
            if value is not None and not SHA256.fullmatch(value):
                raise SchemaError(where, f"{key}.{name}", f"expected a sha256 hex digest, got {ascii(value[:80])}")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}-[0-9a-f]{8}", self.id):
            raise SchemaError(where, f"{key}.id", f"expected <model>-<8 hex digits>, got {ascii(self.id[:80])}")
        for name in ("accepted", "source", "rescoring"):
            if len(getattr(self, name)) > MAX_TEXT or "\n" in getattr(self, name):
                raise SchemaError(where, f"{key}.{name}", f"expected one line of at most {MAX_TEXT:,} characters")
        if (self.predictions is None) != (self.predictions_sha256 is None):
            raise SchemaError(where, f"{key}.predictions", "expected predictions and predictions_sha256 together")
        if self.predictions is not None and self.predictions != f"{self.id}.predictions.parquet":
            raise SchemaError(where, f"{key}.predictions", f"expected {self.id}.predictions.parquet, "
                                                           f"got {self.predictions!r}")
        if self.code_url is not None and not CODE_URL.fullmatch(self.code_url):
            raise SchemaError(where, f"{key}.code_url", f"expected an https URL, got {self.code_url!r}")
        if self.code_commit is not None and not COMMIT.fullmatch(self.code_commit):
            raise SchemaError(where, f"{key}.code_commit", f"expected 7-40 hex digits, got {self.code_commit!r}")
        if self.verified and self.predictions is None:
            raise SchemaError(where, f"{key}.verified", "a verified entry keeps its predictions")


@dataclasses.dataclass(frozen=True)
class Entry:
    submission: SubmissionInfo
    results: Results


def canonical_json(data: Any) -> str:
    """Key-sorted, whitespace-free JSON: equal data gives equal text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def content_hash(data: Any) -> str:
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def duplicate_key(results: Results) -> tuple:
    """What makes two submissions the same experiment (the seeds' order does not matter)."""
    return (results.task, results.model, canonical_json(results.model_config),
            canonical_json(results.task_config), results.dataset.dataset_hash, tuple(sorted(results.seeds)))


def entry_path(root: str | Path, results: Results, hash_of_content: str) -> Path:
    folder = Path(root) / ENTRIES_DIR / results.task / results.dataset.dataset_hash[:12]
    return folder / f"{results.model}-{hash_of_content[:8]}.json"


def stored_predictions_path(entry: str | Path) -> Path:
    """Where an entry keeps its predictions: `<stem>.predictions.parquet` beside it."""
    entry = Path(entry)
    return entry.with_name(f"{entry.stem}.predictions.parquet")


def entry_files(root: str | Path) -> list[Path]:
    """The entry files under `root`, sorted by path."""
    return sorted((Path(root) / ENTRIES_DIR).glob("*/*/*.json"))


def read_entry(path: str | Path) -> tuple[dict[str, Any], Entry]:
    """An entry file's data and its parsed entry; a malformed or oversized file is an error naming it."""
    data = read_json_file(path, MAX_ENTRY_BYTES, strict=True, what="leaderboard entry")
    return data, from_data(Entry, data, where=str(path))


def load_entries(root: str | Path) -> list[tuple[Path, Entry]]:
    """Every accepted entry under `root`, sorted by path; a malformed entry is an error naming it."""
    return [(path, read_entry(path)[1]) for path in entry_files(root)]
