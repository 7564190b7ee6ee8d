"""Submitting a results file to a leaderboard: validate it, then store it as an entry.

`submit(results_path, root, dataset_dir)` runs every check and raises `SubmissionRejected`
listing all problems found, or writes the entry and returns what it did. Checks beyond the
file itself (`leaderboards.validate`): the dataset hash must be known to the board
(`<root>/datasets.json`) or verified against a local dataset folder, or against the Hub
repo and commit the results recorded (`dataset.repo`, `dataset.revision`), which is then
registered; and the submission must not duplicate an accepted entry. Nothing is written
unless the submission is accepted.
"""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path

from benchmarks.files import read_json, write_json_atomic
from benchmarks.results import Results
from leaderboards import default_root
from leaderboards.datasets import KnownDataset, load_datasets, register_dataset
from leaderboards.entries import content_hash, duplicate_key, entry_path, load_entries
from leaderboards.validate import check_results


class SubmissionRejected(ValueError):
    """A submission failed validation; `problems` lists every reason."""

    def __init__(self, source: str | Path, problems: list[str]):
        self.source, self.problems = str(source), list(problems)
        listing = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"{source} was rejected ({len(self.problems)} problem(s)):\n{listing}")


@dataclasses.dataclass(frozen=True)
class Accepted:
    path: Path  # the entry file written
    entry_id: str
    registered_dataset: KnownDataset | None  # set when the submission introduced a dataset (local or Hub)

    def describe(self) -> str:
        lines = [f"accepted {self.entry_id}: wrote {self.path}"]
        if self.registered_dataset is not None:
            record = self.registered_dataset
            kind = "local dataset" if record.source.startswith("local:") else "Hub dataset"
            lines.insert(0, f"registered {kind} {record.name!r} (config {record.config}, "
                            f"hash {record.dataset_hash[:12]}) from {record.source.removeprefix('local:')}")
        return "\n".join(lines)


def _check_dataset(results: Results, root: Path, dataset_dir: str | Path | None) -> tuple[list[str], KnownDataset | None]:
    """Problems with the claimed dataset, and the record to register if it is a verified local one."""
    claimed = results.dataset
    known = load_datasets(root).get(claimed.dataset_hash)
    if known is not None:
        if known.config != claimed.config:
            return [f"dataset {claimed.dataset_hash[:12]} is known as config {known.config!r}, "
                    f"but the results say {claimed.config!r}"], None
        return [], None
    if dataset_dir is None and claimed.repo is not None:
        return _check_hub_dataset(results)
    local = Path(dataset_dir if dataset_dir is not None else claimed.path)
    if not local.is_dir():
        return [f"dataset_hash {claimed.dataset_hash[:12]}… is not a known dataset (see {root / 'datasets.json'}) "
                f"and no local dataset folder was found at {local}; pass --dataset DIR to verify it"], None
    from zoo.integrity import verified_dataset_hash  # only needed to verify a local dataset

    try:
        actual = verified_dataset_hash(local, claimed.config)  # the shards' bytes, not just the manifest's word
    except (OSError, ValueError, KeyError) as error:
        return [f"could not verify the dataset at {local} (config {claimed.config!r}): {error}"], None
    if actual != claimed.dataset_hash:
        return [f"the dataset at {local} (config {claimed.config!r}) has hash {actual[:12]}…, "
                f"not the claimed {claimed.dataset_hash[:12]}…"], None
    # an absolute path: the board may be read from anywhere, and a relative one names nothing there
    record = KnownDataset(name=local.resolve().name, config=claimed.config, dataset_hash=actual,
                          family=claimed.family, source=f"local:{local.resolve()}")
    return [], record


def _check_hub_dataset(results: Results) -> tuple[list[str], KnownDataset | None]:
    """Verifies a dataset the results read from a Hub repo, at the commit they recorded.

    The snapshot comes from the Hub cache (offline) or the Hub; its shards are checked like a
    local folder's, and it is registered as `ORG/NAME@<commit>`, which pins the bytes.
    """
    from zoo.hub import resolve_data
    from zoo.integrity import verified_dataset_hash

    claimed = results.dataset
    pinned = f"{claimed.repo}@{claimed.revision}"
    try:
        actual = verified_dataset_hash(resolve_data(pinned, config=claimed.config).folder, claimed.config)
    except (OSError, ValueError, KeyError) as error:
        return [f"could not verify the dataset {pinned} (config {claimed.config!r}): {error}"], None
    if actual != claimed.dataset_hash:
        return [f"the dataset {pinned} (config {claimed.config!r}) has hash {actual[:12]}…, "
                f"not the claimed {claimed.dataset_hash[:12]}…"], None
    return [], KnownDataset(name=claimed.repo, config=claimed.config, dataset_hash=actual, family=claimed.family,
                            source=pinned)


def _check_duplicates(results: Results, hash_of_content: str, root: Path) -> list[str]:
    key = duplicate_key(results)
    problems = []
    for path, entry in load_entries(root):
        if entry.submission.content_hash == hash_of_content:
            problems.append(f"identical to the accepted entry {path}")
        elif duplicate_key(entry.results) == key:
            problems.append(f"duplicates the accepted entry {path}: same task, model, model config, "
                            "task config, dataset and seeds; use new seeds or change the model or protocol")
    return problems


def submit(results_path: str | Path, root: str | Path | None = None,
           dataset_dir: str | Path | None = None) -> Accepted:
    """Validates a results file and stores it as an accepted entry under `root`.

    `root` defaults to the user's own board (`leaderboards.default_root()`). Raises
    `SubmissionRejected` listing every problem. `dataset_dir` is a local dataset folder to
    verify an unknown dataset hash against (default: the results' `dataset.path`).
    """
    root = Path(root) if root is not None else default_root()
    try:
        data = read_json(results_path)
    except ValueError as error:
        raise SubmissionRejected(results_path, [str(error)]) from None
    results, problems = check_results(data, where=str(results_path))
    if results is None:
        raise SubmissionRejected(results_path, problems)
    hash_of_content = content_hash(data)
    dataset_problems, new_dataset = _check_dataset(results, root, dataset_dir)
    problems += dataset_problems + _check_duplicates(results, hash_of_content, root)
    if problems:
        raise SubmissionRejected(results_path, problems)

    if new_dataset is not None:
        register_dataset(root, new_dataset)
    path = entry_path(root, results, hash_of_content)
    entry_id = path.stem
    submission = {"id": entry_id, "content_hash": hash_of_content,
                  "accepted": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "source": Path(results_path).name}
    write_json_atomic(path, {"submission": submission, "results": data})
    return Accepted(path, entry_id, new_dataset)
