"""Suite entries recorded as skipped on a dataset (`leaderboards/skipped.json`), and why.

A suite writes `<entry>.skipped` where a cell's protocol leaves its data no test rows. The board keeps those
records so a results page can say that no result can exist, instead of showing a gap.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from benchmarks.results import line_problem
from leaderboards.datasets import SHA256
from zoo.validation.inputs import name_problem, read_json_file
from zoo.validation.schema import SchemaError, from_data

SKIPPED_FILE = "skipped.json"
MAX_SKIPPED_BYTES = 1 * 2**20


@dataclasses.dataclass(frozen=True)
class SkippedEntries:
    """Suite entries that could not run on a dataset, and why (what the suite wrote to `<entry>.skipped`)."""
    task: str
    dataset_hash: str  # the full sha256
    suite: str
    entries: tuple[str, ...]
    protocol: dict[str, Any]  # the task-config fields in which these entries differ from the dataset's others
    reason: str  # one line: the error the task raises on the pinned test split with that protocol

    def validate(self, where: str, key: str) -> None:
        for field, value in (("task", self.task), ("suite", self.suite),
                             *((f"entries[{i}]", name) for i, name in enumerate(self.entries))):
            problem = name_problem(value)
            if problem is not None:
                raise SchemaError(where, f"{key}.{field}", problem)
        if not SHA256.fullmatch(self.dataset_hash):
            raise SchemaError(where, f"{key}.dataset_hash",
                              f"expected a sha256 hex digest, got {ascii(self.dataset_hash[:80])}")
        problem = line_problem(self.reason, 500)
        if problem is not None:
            raise SchemaError(where, f"{key}.reason", problem)


@dataclasses.dataclass(frozen=True)
class SkippedFile:
    skipped: tuple[SkippedEntries, ...] = ()


def load_skipped(root: str | Path) -> tuple[SkippedEntries, ...]:
    """The board's skipped-entry records (`<root>/skipped.json`); a missing file means none."""
    path = Path(root) / SKIPPED_FILE
    if not path.exists():
        return ()
    data = read_json_file(path, MAX_SKIPPED_BYTES, strict=True, what="skipped-entries file")
    return from_data(SkippedFile, data, where=str(path)).skipped
