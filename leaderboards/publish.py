"""Publishing a board to a Hugging Face Hub dataset repository, as one tagged commit.

The board is audited first (`leaderboards.audit`). A board whose entries do not re-score is not published.
The upload set is built in memory.

(1) `data/<task>/entries.parquet` has one row per accepted entry (`entry_rows`). A row holds the ids, model,
and dataset (hash, name, config, source). It holds the protocol (JSON and its description), the configs
(JSON) and the seeds. It holds each metric's mean, std and per-seed values. It also holds parameters, time,
memory, hardware, version, verified and code. The card's `configs` make each task a config that
`datasets.load_dataset(repo, task, split="entries")` reads.

(2) `board/` holds the board's own files: `datasets.json`, `pinned/`, and `entries/` with their stored
predictions. So the published board can be audited and rendered again from the repo alone.

(3) `site/` holds the rendered Markdown, plots and HTML site (`leaderboards.render`).

(4) `board.json` is the upload's file list with sha256, which marks the repo as an nfnzoo board. Beside it
is the card `README.md`.

The commit works as for zoos (`zoo.hub.publish`). One `create_commit` has as parent the head that was read.
So a concurrent publish is refused rather than merged silently. It deletes every file under `data/`,
`board/` and `site/` that the upload does not hold. So a board republished with fewer entries leaves no
stale ones for the card's globs to read. A repo with a card but no `board.json` (a zoo, or anything else) is
refused. The commit is tagged `board-<hash of board.json[:12]>`; an existing tag (same content) is kept.
Offline mode, a missing token, an unreachable Hub and a refused request are each one line (`PublishError`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.tasks import get_task_class
from leaderboards.audit import audit
from leaderboards.datasets import DATASETS_FILE, load_datasets
from leaderboards.entries import ENTRIES_DIR, Entry, load_entries
from leaderboards.escape import markdown_text, yaml_string
from leaderboards.pinned import MAX_PINNED_BYTES, PINNED_DIR
from zoo.validation.inputs import read_capped
from zoo.hub.publish import PublishError, hub_client, hub_failure, tag_commit

BOARD_MANIFEST = "board.json"
CARD = "README.md"
FORMAT = "nfnzoo-leaderboard"
PREFIXES = ("data/", "board/", "site/")


@dataclasses.dataclass(frozen=True)
class BoardPublished:
    repo_id: str
    commit: str
    commit_url: str
    tag: str
    tag_existed: bool
    tasks: tuple[str, ...]
    entries: int
    deleted: tuple[str, ...]

    def lines(self) -> list[str]:
        tag = f"tag {self.tag}" + (" (already there, same content; kept)" if self.tag_existed else "")
        deleted = f"; removed {len(self.deleted)} stale files" if self.deleted else ""
        first = self.tasks[0] if self.tasks else "TASK"
        return [f"repo {self.repo_id}", f"commit {self.commit} {self.commit_url}",
                f"{tag}; {self.entries} entries in the tasks {', '.join(self.tasks)}{deleted}",
                f'results: datasets.load_dataset("{self.repo_id}", "{first}", split="entries", revision="{self.tag}")',
                "site: site/index.html in the repo (download the folder and open it)"]


def entry_rows(entries: list[Entry], datasets: dict) -> pa.Table:
    """One row per entry of one task (see the module docstring)."""
    task_class = get_task_class(entries[0].results.task)
    metrics = sorted(task_class.metrics)
    rows = []
    for entry in entries:
        results, info = entry.results, entry.submission
        record = datasets.get(results.dataset.dataset_hash)
        memory = [s.peak_memory_mb for s in results.per_seed if s.peak_memory_mb is not None]
        row = {"entry_id": info.id, "model": results.model, "task": results.task,
               "dataset_hash": results.dataset.dataset_hash, "dataset_name": record.name if record else None,
               "dataset_config": results.dataset.config, "dataset_source": record.source if record else None,
               "protocol": json.dumps(task_class.evaluation_protocol(results.task_config), sort_keys=True, default=str),
               "protocol_description": task_class.describe_protocol(results.task_config),
               "model_config": json.dumps(results.model_config, sort_keys=True),
               "task_config": json.dumps(results.task_config, sort_keys=True),
               "seeds": list(results.seeds), "num_params": results.num_params,
               "train_time_s_mean": statistics.fmean(s.train_time_s for s in results.per_seed),
               "peak_memory_mb": max(memory) if memory else None, "device": results.hardware.device,
               "platform": results.hardware.platform, "torch": results.hardware.torch,
               "package_version": results.package_version, "verified": info.verified, "rescoring": info.rescoring,
               "code_url": info.code_url, "code_commit": info.code_commit, "accepted": info.accepted,
               "content_hash": info.content_hash}
        for name in metrics:
            summary = results.summary.get(name)
            row[f"{name}_mean"] = summary.mean if summary else None
            row[f"{name}_std"] = summary.std if summary else None
            row[f"{name}_per_seed"] = [s.metrics.get(name) for s in results.per_seed]
        rows.append(row)
    return pa.Table.from_pylist(rows)


def _parquet(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def upload_set(root: str | Path) -> dict[str, bytes]:
    """Every file of the upload, by its path in the repo (see the module docstring)."""
    from leaderboards.renderer import render

    root = Path(root)
    problems = [f"{report.path}: {problem}" for report in audit(root) for problem in report.problems]
    if problems:
        raise PublishError("the board does not audit; fix it before publishing:\n  " + "\n  ".join(problems))
    entries = [entry for _, entry in load_entries(root)]
    if not entries:
        raise PublishError(f"the board {root} holds no entries; nothing to publish")
    datasets = load_datasets(root)
    files: dict[str, bytes] = {}
    by_task: dict[str, list[Entry]] = {}
    for entry in entries:
        by_task.setdefault(entry.results.task, []).append(entry)
    for task, task_entries in sorted(by_task.items()):
        files[f"data/{task}/entries.parquet"] = _parquet(entry_rows(task_entries, datasets))
    for path in [root / DATASETS_FILE, *sorted((root / PINNED_DIR).glob("*")),
                 *sorted((root / ENTRIES_DIR).rglob("*"))]:
        if path.is_file():  # a board file, within the largest bound the board reads any file with
            files[f"board/{path.relative_to(root).as_posix()}"] = read_capped(path, MAX_PINNED_BYTES, "board file")
    with tempfile.TemporaryDirectory() as rendered:
        render(root, rendered)
        for path in sorted(Path(rendered).iterdir()):
            files[f"site/{path.name}"] = path.read_bytes()
    listing = {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())}
    manifest = {"format": FORMAT, "tasks": sorted(by_task), "entries": len(entries),
                "verified": sum(e.submission.verified for e in entries), "files": listing}
    files[BOARD_MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    files[CARD] = _card(by_task, manifest, datasets).encode()
    return files


def board_tag(files: dict[str, bytes]) -> str:
    return f"board-{hashlib.sha256(files[BOARD_MANIFEST]).hexdigest()[:12]}"


def _card(by_task: dict[str, list[Entry]], manifest: dict, datasets: dict) -> str:
    """The repo's card: YAML front matter, every value a quoted YAML string. Then Markdown whose free text
    (dataset names and sources) is escaped (`leaderboards.escape`)."""
    configs = "\n".join(f"- config_name: {yaml_string(task)}\n  data_files:\n  - split: entries\n"
                        f"    path: {yaml_string(f'data/{task}/*.parquet')}" for task in sorted(by_task))
    rows = "\n".join(f"| `{task}` | {len(entries)} | {sum(e.submission.verified for e in entries)} | "
                     f"{len({e.results.dataset.dataset_hash for e in entries})} |"
                     for task, entries in sorted(by_task.items()))
    used = sorted({e.results.dataset.dataset_hash for entries in by_task.values() for e in entries})
    sources = "\n".join(f"- `{h[:12]}`: {markdown_text(datasets[h].name)} (config `{datasets[h].config}`, source "
                        f"{markdown_text(datasets[h].source)})" if h in datasets else f"- `{h[:12]}`: unregistered"
                        for h in used)
    first = sorted(by_task)[0]
    return f"""---
configs:
{configs}
tags:
- nfnzoo
- leaderboard
- weight-space-learning
---
# nfnzoo leaderboard

Benchmark results of neural functional networks on nfnzoo model zoos, as accepted by an nfnzoo
board: every verified entry was re-scored from its predictions on the dataset's pinned test
metadata (`nfnzoo leaderboard audit --root board` re-checks them from this repo alone).

| task | entries | verified | datasets |
|---|---|---|---|
{rows}

Datasets (by sha256):
{sources}

Read the results with `datasets.load_dataset("<this repo>", "{first}", split="entries")`: one row per
entry, with the protocol, the configs, each metric's mean, std and per-seed values, parameters,
time, memory, hardware, version and the code link. The rendered board is `site/index.html`.
"""


def _read_repo(api: Any, repo_id: str, revision: str | None) -> tuple[str, list[str]]:
    head = api.repo_info(repo_id, repo_type="dataset", revision=revision).sha
    files = list(api.list_repo_files(repo_id, repo_type="dataset", revision=head))
    if CARD in files and BOARD_MANIFEST not in files:
        raise PublishError(f"{repo_id}: the repo has a {CARD} but no {BOARD_MANIFEST}, so it is not an nfnzoo board "
                           f"(a zoo, or another dataset) and its card would be replaced; publish to another repo")
    return head, files


def publish_board(root: str | Path, repo_id: str, *, token: str | None = None, private: bool = False,
                  revision: str | None = None, api: Any = None) -> BoardPublished:
    """Uploads the board at `root` to the dataset repo `repo_id` as one commit and tags it."""
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PublishError(f"--repo must be ORG/NAME, got {repo_id!r}")
    api = api if api is not None else hub_client(token)  # before the upload set: an unusable Hub fails at once
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    files = upload_set(root)
    manifest = json.loads(files[BOARD_MANIFEST])
    try:
        api.create_repo(repo_id=repo_id, repo_type="dataset", exist_ok=True, private=private)
        if revision is not None:
            api.create_branch(repo_id=repo_id, branch=revision, repo_type="dataset", exist_ok=True)
        head, repo_files = _read_repo(api, repo_id, revision)
        deletes = sorted(p for p in repo_files if p.startswith(PREFIXES) and p not in files)
        operations = ([CommitOperationDelete(path_in_repo=path) for path in deletes]
                      + [CommitOperationAdd(path_in_repo=path, path_or_fileobj=data) for path, data in files.items()])
        commit = api.create_commit(repo_id=repo_id, repo_type="dataset", operations=operations, revision=revision,
                                   parent_commit=head, commit_message=f"Upload leaderboard ({manifest['entries']} "
                                                                      f"entries, {manifest['verified']} verified)")
        tag = board_tag(files)
        tag_existed = tag_commit(api, repo_id, tag, commit.oid)
    except PublishError:
        raise
    except Exception as error:  # the Hub's failures become one line; anything else propagates
        failure = hub_failure(error, str(getattr(api, "endpoint", None) or "the Hub"))
        if failure is None:
            raise
        raise failure from None
    return BoardPublished(repo_id, commit.oid, str(commit.commit_url), tag, tag_existed, tuple(manifest["tasks"]),
                          manifest["entries"], tuple(deletes))
