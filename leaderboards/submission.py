"""Submitting a results file to a leaderboard: validate it, then store it as an entry.

`submit(results_path, root, dataset_dir)` runs every check. It raises `SubmissionRejected` listing all
problems found, or writes the entry and returns what it did.

Checks beyond the file itself (`leaderboards.validate`) come first. The board must know the dataset hash
(`<root>/datasets.json`). Otherwise it is verified against a local dataset folder, or against the Hub repo
and commit the results recorded (`dataset.repo`, `dataset.revision`). A verified dataset is then registered.
The submission must not duplicate an accepted entry.

A submission whose results name a predictions sidecar is re-scored (`leaderboards.rescore`). That uses the
dataset's pinned test metadata (`leaderboards.pinned`). It is pinned from the checked data when the dataset
is first registered, or given with --dataset. The submission is rejected when its metrics or model_ids do
not agree. Its entry is marked verified and keeps the predictions as Parquet beside it. Without predictions
an entry is accepted as unverified, and shown so.

Bounds. A results file holds at most `MAX_RESULTS_BYTES`. It must be a regular file, read up to that cap; a
FIFO or /dev/zero is refused, never waited on. It must be plain JSON. NaN, Infinity, numbers overflowing to
infinity and repeated keys are refused. So is nesting past `zoo.validation.inputs.MAX_DEPTH`. A predictions
file holds at most `leaderboards.rescore.MAX_PREDICTIONS_BYTES` of plain CSV. It is named by a bare file
name beside the results, with no folders and no links. Nothing is written unless the submission is accepted,
and only under the board's folder. An entry's path is made of the registered task, the dataset's sha256 and
the checked model name.

Before anything is written, the new entry is shown the way `render` shows it. That means its board rows
beside the entries it would share tables with, their Markdown, and the protocol lines. An entry the board
cannot show is a rejection, never a broken board.

The board's state is read and written under its lock (`leaderboards.lock`). So the duplicate check, the
dataset's registration and the writes of concurrent submissions never interleave. The entry is written last,
sealed (`leaderboards.seal`). It is created exclusively (`leaderboards.entries.write_new_entry_file`), so an
existing file is never overwritten, even at a colliding id.

Names (`leaderboards.names`) follow the rule of `zoo.validation.names`: letter case, `-` and `_` aside, and
look-alike letters. A model name must not be mistakable for a built-in model's, unless it is that built-in's
own. Nor may it be mistakable for a different model's name already on the board. A new dataset's display
name must not be mistakable for another dataset's. For example, `StatNN` and `rnlp` beside `statnn` and
`mlp` are refused. A claims block must be one `benchmarks.claims` writes (`leaderboards.validate`), and not
a false claim.
"""

from __future__ import annotations

import dataclasses
import functools
import datetime
import hashlib
import io
from pathlib import Path

import pandas
import pyarrow.parquet

from benchmarks.results import Results
from benchmarks.tasks import get_task_class
from leaderboards import default_root
from leaderboards.board import uncommitted
from leaderboards.datasets import KnownDataset, load_datasets, register_dataset, source_problem, zoo_source
from leaderboards.entries import (CODE_URL, COMMIT, Entry, EntryCollision, content_hash, duplicate_key,
                                  entry_bytes, entry_path, load_entries, stored_predictions_path, write_new_entry_file)
from leaderboards.lock import board_lock
from leaderboards.names import builtin_model_problem, confusable_problem, dataset_name_problem
from leaderboards.pinned import (DEFAULT, load_pinned, missing_pins, pinned_sets, split_set_file_problem, split_set_of,
                                 with_pins, write_pinned)
from leaderboards.render_check import render_problems
from leaderboards.rescore import predictions_frame_bytes, read_predictions, rescore
from leaderboards.seal import sealed
from leaderboards.track_datasets import check_track_dataset, is_track_dataset
from leaderboards.validate import check_results
from zoo.validation.inputs import InputError, read_json_file
from zoo.storage.lock import FolderLock
from zoo.validation.schema import from_data

MAX_RESULTS_BYTES = 4 * 2**20  # 4 MiB: a results file is a few kilobytes


class SubmissionRejected(ValueError):
    """A submission failed validation; `problems` lists every reason."""

    def __init__(self, source: str | Path, problems: list[str]):
        self.source, self.problems = str(source), list(problems)
        if len(self.problems) == 1:  # one reason, one line (as every other error of the CLI)
            super().__init__(f"{source} was rejected: {self.problems[0]}")
            return
        listing = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"{source} was rejected ({len(self.problems)} problems):\n{listing}")


@dataclasses.dataclass(frozen=True)
class Accepted:
    path: Path  # the entry file written
    entry_id: str
    registered_dataset: KnownDataset | None  # set when the submission introduced a dataset (local or Hub)
    verified: bool = False  # re-scored from its predictions on the pinned test metadata
    rescoring: str = ""  # what was re-scored, or why the entry is unverified
    uncommitted: str | None = None  # the commit the model's code had uncommitted changes on, when it ran
    linked: bool = False  # the entry links that commit (its Code cell says it is not reproducible from it)

    def describe(self) -> str:
        lines = [f"accepted {self.entry_id} ({self.rescoring or 'unverified'}): wrote {self.path}"]
        if self.uncommitted is not None:
            lines.append(f"note: the model's code ran with uncommitted changes on commit {self.uncommitted[:12]}: "
                         + ("the board links that commit and shows the entry as not reproducible from it"
                            if self.linked else "no commit holds it, and the board links none")
                         + "; commit them and run again for an entry reproducible from its commit")
        if self.registered_dataset is not None:
            record = self.registered_dataset
            lines.insert(0, f"registered dataset {record.name!r} (config {record.config}, "
                            f"hash {record.dataset_hash[:12]}), source: {record.source}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class _DatasetCheck:
    problems: list[str]
    record: KnownDataset | None = None  # the dataset's record, known or to register
    new: bool = False  # the record is to be registered
    folder: Path | None = None  # checked data to pin the test metadata from, when the record lacks some
    pin: bytes | None = None  # or the test metadata itself (a track's matrix cells)

    @functools.cached_property
    def set_files(self) -> dict[str, str]:
        """The checked folder's split sets' file hashes (`zoo.reader.split_set_files`), read once."""
        from zoo.reader import split_set_files

        return split_set_files(self.folder, self.record.config) if self.folder is not None else {}


def _check_dataset(results: Results, root: Path, dataset_dir: str | Path | None,
                   predicted_rows: int | None) -> _DatasetCheck:
    """Problems with the claimed dataset, and its record (a verified local or Hub one is new)."""
    claimed = results.dataset
    known = load_datasets(root).get(claimed.dataset_hash)
    if is_track_dataset(results):  # checked from its definition, whether known or not
        if not (claimed.path or "").startswith("track:"):  # the name it is registered by
            return _DatasetCheck(["a track's results name their benchmark as dataset.path, "
                                  f"track:<track>/<benchmark>; got {ascii(claimed.path)[:80]}"])
        problems, record, pin = check_track_dataset(results, predicted_rows)
        if known is not None and record is not None:
            record, pin = known, (pin if known.test_metadata is None else None)
        return _DatasetCheck(problems, record, known is None, pin=pin)
    if known is not None:
        if known.config != claimed.config:
            return _DatasetCheck([f"dataset {claimed.dataset_hash[:12]} is known as config {known.config!r}, "
                                  f"but the results say {claimed.config!r}"])
        unpinned = split_set_of(results.task_config) not in pinned_sets(known)
        if unpinned and dataset_dir is not None:  # a chance to pin it
            problems, record, folder = _check_local(results, Path(dataset_dir))
            return _DatasetCheck(problems, known, False, folder)
        return _DatasetCheck([], known)
    if dataset_dir is None and claimed.repo is not None:
        problems, record, folder = _check_hub_dataset(results)
        return _DatasetCheck(problems, record, True, folder)
    given = dataset_dir if dataset_dir is not None else claimed.path  # the folder older results recorded
    if given is None or not Path(given).is_dir():
        where = f"no local dataset folder was found at {given}" if given is not None else "the results name no folder"
        read = f" (the run read {claimed.source})" if claimed.source else ""
        return _DatasetCheck([f"dataset_hash {claimed.dataset_hash[:12]}… is not a known dataset (see "
                              f"{root / 'datasets.json'}) and {where}; pass --dataset DIR, the zoo's folder{read}, "
                              "to verify it"])
    local = Path(given)
    problems, record, folder = _check_local(results, local)
    return _DatasetCheck(problems, record, True, folder)


def _check_local(results: Results, local: Path) -> tuple[list[str], KnownDataset | None, Path | None]:
    from zoo.storage.integrity import verified_dataset_hash  # only needed to verify a local dataset

    claimed = results.dataset
    try:
        actual = verified_dataset_hash(local, claimed.config)  # the shards' bytes, not just the manifest's word
    except (OSError, ValueError, KeyError) as error:
        return [f"could not verify the dataset at {local} (config {claimed.config!r}): {error}"], None, None
    if actual != claimed.dataset_hash:
        return [f"the dataset at {local} (config {claimed.config!r}) has hash {actual[:12]}…, "
                f"not the claimed {claimed.dataset_hash[:12]}…"], None, None
    try:  # how anyone gets these bytes (the spec and profile its manifest records, ...), never this machine's path
        source = zoo_source(local, claimed.config)
    except (OSError, ValueError, KeyError) as error:
        return [f"could not register the dataset at {local}: {error}"], None, None
    record = KnownDataset(name=local.resolve().name, config=claimed.config, dataset_hash=actual,
                          family=claimed.family, source=source)
    return [], record, local


def _check_hub_dataset(results: Results) -> tuple[list[str], KnownDataset | None, Path | None]:
    """Verifies a dataset the results read from a Hub repo, at the commit they recorded.

    The snapshot comes from the Hub cache (offline) or the Hub. Its shards are checked like a local
    folder's. It is registered as `ORG/NAME@<commit>`, which pins the bytes.
    """
    from zoo.hub.resolve import resolve_data
    from zoo.storage.integrity import verified_dataset_hash

    claimed = results.dataset
    pinned = f"{claimed.repo}@{claimed.revision}"
    try:
        folder = resolve_data(pinned, config=claimed.config).folder
        actual = verified_dataset_hash(folder, claimed.config)
    except (OSError, ValueError, KeyError) as error:
        return [f"could not verify the dataset {pinned} (config {claimed.config!r}): {error}"], None, None
    if actual != claimed.dataset_hash:
        return [f"the dataset {pinned} (config {claimed.config!r}) has hash {actual[:12]}…, "
                f"not the claimed {claimed.dataset_hash[:12]}…"], None, None
    return [], KnownDataset(name=claimed.repo, config=claimed.config, dataset_hash=actual, family=claimed.family,
                            source=pinned), folder


def _check_duplicates(results: Results, hash_of_content: str, root: Path) -> list[str]:
    key = duplicate_key(results)
    problems = []
    entries = load_entries(root)
    for path, entry in entries:
        if entry.submission.content_hash == hash_of_content:
            problems.append(f"identical to the accepted entry {path}")
        elif duplicate_key(entry.results) == key:
            problems.append(f"duplicates the accepted entry {path}: same task, model, model config, "
                            "task config, dataset and seeds (configs compared in canonical form: Unicode-normalised "
                            "text, 256.0 as 256); use new seeds or change the model or protocol")
    if builtin_model_problem(results.model) is not None:  # refused already (`validate`): one line for one name
        return problems
    confused = confusable_problem("model name", results.model, (entry.results.model for _, entry in entries))
    return problems + ([confused] if confused else [])


def _check_dataset_name(check: _DatasetCheck, root: Path) -> list[str]:
    """A dataset to register: its display name in the names' characters, and not mistakable for another's."""
    if not check.new or check.record is None:
        return []
    problem = dataset_name_problem(check.record.name)
    if problem is None:
        names = (record.name for record in load_datasets(root).values())
        problem = confusable_problem("dataset name", check.record.name, names)
    return [problem] if problem else []


def _read_submission(path: Path) -> tuple[object, list[str]]:
    """The results file as plain JSON (see the module docstring), read up to its size bound."""
    try:
        return read_json_file(path, MAX_RESULTS_BYTES, strict=True, what="results file"), []
    except InputError as error:
        return None, [str(error)]


def _predictions(results_path: Path, results: Results) -> tuple[pandas.DataFrame | None, list[str]]:
    """The submitted predictions sidecar, read as plain CSV; (None, []) when the results name none."""
    if results.predictions is None:
        return None, []
    path = results_path.parent / results.predictions  # a bare file name (validate.FILE_NAME)
    if path.is_symlink():
        return None, [f"{path}: the predictions file is a symbolic link; submit the file itself"]
    return read_predictions(path)


def _verification(results: Results, predictions: pandas.DataFrame | None, check: _DatasetCheck,
                  root: Path) -> tuple[list[str], str, dict[str, bytes]]:
    """Re-scores the predictions on the pinned test metadata of the results' split set.

    Returns (problems, what was checked or why not, test metadata to pin with the entry, split set ->
    bytes). The last is filled where the dataset lacks it: with a checked folder, every split set it
    records.
    """
    task_class = get_task_class(results.task)
    record, split_set = check.record, split_set_of(results.task_config)
    problem = split_set_file_problem(record, split_set, results.dataset.split_set_sha256, check.set_files)
    if problem is not None:
        return [problem], "", {}
    if predictions is None:
        return [], "unverified: the results name no predictions file", {}
    if not task_class.RESCORING:
        return [], f"unverified: the {results.task} task cannot be re-scored", {}
    pins = {DEFAULT: check.pin} if check.pin is not None else {}
    if check.folder is not None:
        pins = missing_pins(record, check.folder)
    if split_set in pins:
        metadata = pyarrow.parquet.read_table(io.BytesIO(pins[split_set])).to_pandas()
    elif split_set in pinned_sets(record):
        metadata = load_pinned(root, record, split_set)
    else:
        which = "" if split_set == DEFAULT else f" of split set {split_set!r}"
        return [], (f"unverified: the board holds no test metadata{which} for dataset {record.name!r}; "
                    "pass --dataset DIR to pin it"), pins
    return rescore(results, predictions, metadata), f"re-scored: {task_class.RESCORING}", pins


def stored_results(data: dict) -> dict:
    """The results as a board stores (and hashes) them. That drops the folder older results recorded as
    `dataset.path`. A track's benchmark id (`track:<track>/<benchmark>`) is no folder and stays."""
    dataset = data.get("dataset")
    if not isinstance(dataset, dict) or "path" not in dataset or str(dataset["path"]).startswith("track:"):
        return data
    return {**data, "dataset": {key: value for key, value in dataset.items() if key != "path"}}


def _source_problems(results: Results) -> list[str]:
    """A dataset source the results name says how anyone gets the bytes (`SOURCE_FORMS`), never a path."""
    problem = source_problem(results.dataset.source) if results.dataset.source is not None else None
    return [f"dataset.source: {problem}"] if problem else []


def _claims_problems(results: Results) -> list[str]:
    """A results file whose model's claims failed their check (`benchmarks.claims`) is refused."""
    from benchmarks.claims import describe
    from zoo.validation.schema import to_data

    if results.claims is None or results.claims.verdict != "false claim":
        return []
    return [f"model {results.model!r} makes a false symmetry claim ({describe(to_data(results.claims))}); correct "
            "the groups it claims (`nfnzoo bench check-model` shows each check) and run the benchmark again"]


def _commit_of(results: Results, code_commit: str | None) -> tuple[str | None, list[str]]:
    """The code commit an entry links: --commit, else the one the results recorded (`model_source.commit`).
    A --commit that contradicts the recorded one is a problem."""
    recorded = results.model_source.commit if results.model_source is not None else None
    if code_commit is None or recorded is None:
        return code_commit or recorded, []
    if not recorded.startswith(code_commit):
        return code_commit, [f"--commit {code_commit} is not the commit the results recorded for the model's code "
                             f"({recorded}); leave --commit out to link the recorded one"]
    return recorded, []


def _check_code(code_url: str | None, code_commit: str | None) -> list[str]:
    problems = []
    if code_url is not None and not CODE_URL.fullmatch(code_url):
        problems.append(f"the code URL {code_url!r} must be an https URL (letters, digits and ._~%/+- in its path)")
    if code_commit is not None and not COMMIT.fullmatch(code_commit):
        problems.append(f"the code commit {code_commit!r} must be 7-40 lowercase hex digits")
    if code_commit is not None and code_url is None:
        problems.append("a code commit needs the code's URL (--code)")
    return problems


def submit(results_path: str | Path, root: str | Path | None = None,
           dataset_dir: str | Path | None = None, *, code_url: str | None = None,
           code_commit: str | None = None) -> Accepted:
    """Validates a results file and stores it as an accepted entry under `root`.

    `root` defaults to the user's own board (`leaderboards.default_root()`). Raises `SubmissionRejected`
    listing every problem.

    `dataset_dir` is a local dataset folder. With it an unknown dataset hash is verified, or a known one's
    test metadata pinned. It defaults to an older results file's `dataset.path`, which the entry never
    stores (`stored_results`). With its predictions the entry is re-scored and marked verified. Without them
    it is accepted as unverified.

    `code_url` and `code_commit` name the code that produced the results, shown as the entry's link. The
    commit defaults to the one the results recorded for the model's code. Results whose model made a false
    symmetry claim are refused. Those are their `claims`, checked before training.
    """
    root = Path(root) if root is not None else default_root()
    results_path = Path(results_path)
    data, problems = _read_submission(results_path)
    if problems:
        raise SubmissionRejected(results_path, problems)
    results, problems = check_results(data, where=str(results_path))
    if results is None:
        raise SubmissionRejected(results_path, problems)
    predictions, prediction_problems = _predictions(results_path, results)
    given_commit = code_commit
    code_commit, commit_problems = _commit_of(results, code_commit)
    if code_url is None and given_commit is None:
        code_commit = None  # a recorded commit and no URL to link it to: the results keep it
    problems += (prediction_problems + commit_problems + _check_code(code_url, code_commit)
                 + _claims_problems(results) + _source_problems(results))
    data = stored_results(data)  # never a local path on the board
    if problems:  # rejected whatever the board holds: its checks only add to the list, and nothing is written
        _accept(results_path, data, results, predictions, problems, root, dataset_dir, code_url, code_commit, None)
    with board_lock(root) as lock:  # from the first read of the board's state to the last write
        return _accept(results_path, data, results, predictions, problems, root, dataset_dir, code_url,
                       code_commit, lock)


def _accept(results_path: Path, data: dict, results: Results, predictions: pandas.DataFrame | None,
            problems: list[str], root: Path, dataset_dir: str | Path | None, code_url: str | None,
            code_commit: str | None, lock: FolderLock | None) -> Accepted:
    """The checks against the board's state, the render check, and the writes.

    Every problem is listed, beside the file's own `problems`. It all runs under the board's `lock`. The
    lock is None only when `problems` already rejects the submission. Then nothing is written, not even the
    lock file.
    """
    hash_of_content = content_hash(data)
    check = _check_dataset(results, root, dataset_dir, None if predictions is None else len(predictions))
    problems = (problems + check.problems + _check_dataset_name(check, root)
                + _check_duplicates(results, hash_of_content, root))
    verified, pins = "", {}
    if not problems:
        rescore_problems, verified, pins = _verification(results, predictions, check, root)
        problems += rescore_problems
    if problems:
        raise SubmissionRejected(results_path, problems)
    assert lock is not None and lock.held, "an accepted submission is written under the board's lock"

    record = check.record
    if pins:
        record = with_pins(record, pins, check.set_files)
    path = entry_path(root, results, hash_of_content)
    entry_id = path.stem
    submission = {"id": entry_id, "content_hash": hash_of_content,
                  "accepted": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "source": results_path.name[:200], "verified": verified.startswith("re-scored"),
                  "rescoring": verified, "code_url": code_url, "code_commit": code_commit}
    stored = None
    if predictions is not None and submission["verified"]:
        stored = predictions_frame_bytes(predictions)
        submission.update(predictions=stored_predictions_path(path).name,
                          predictions_sha256=hashlib.sha256(stored).hexdigest())
    entry_data = sealed({"submission": submission, "results": data})
    problems = render_problems(root, from_data(Entry, entry_data, where=str(path)), record)
    if problems:
        raise SubmissionRejected(results_path, problems)

    if pins:
        write_pinned(root, record, pins)
    if check.new or pins:
        register_dataset(root, record, replace=not check.new, lock=lock)
    try:  # both created exclusively: an existing file is never overwritten
        if stored is not None:
            write_new_entry_file(root, stored_predictions_path(path), stored, entry_id)
        write_new_entry_file(root, path, entry_bytes(entry_data), entry_id)  # last: an entry has its predictions
    except EntryCollision as error:
        raise SubmissionRejected(results_path, [str(error)]) from None
    source = results.model_source
    dirty = source.commit if source is not None and source.dirty is True and source.commit else None
    return Accepted(path, entry_id, record if check.new else None, submission["verified"], verified, dirty,
                    bool(code_url) and uncommitted(results, code_commit))
