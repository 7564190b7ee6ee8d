"""Where a zoo is read from: a local folder, or a Hub dataset repo `ORG/NAME[@REVISION]`.

`resolve_data(text)` turns what a user gave `--data` (or `nfnzoo info` / `verify`) into a local folder.
An existing local path always wins.

Otherwise text of the form `ORG/NAME` or `ORG/NAME@REVISION` names a Hub dataset repo. The revision is a
branch, a tag or a commit sha; `nfnzoo publish` makes `v<version>-<hash>` tags.
`huggingface_hub.snapshot_download` brings the repo into the user's Hub cache (`$HF_HUB_CACHE`, by
default `$HF_HOME/hub`).

Offline (`HF_HUB_OFFLINE=1`) the repo resolves from that cache alone. There `refs/<revision>` names the
commit and `snapshots/<commit>/` holds the files. Anything else is left as a folder path, for the
caller's "no such folder" error.

The resolved commit sha comes back with the folder. So a benchmark result records exactly which bytes it
read (`benchmarks.results.DatasetInfo.repo` / `.revision`). The snapshot is not trusted more than a
folder. The callers check its shards against `manifest.json` (`zoo.storage.integrity`,
`zoo.dataset.verify`).

Failures are one line (`HubDataError`, a `ValueError`) naming the repo, the revision and what was
expected. A reference that breaks the Hub's naming rules is refused before any Hub call. Examples are a
5,000-character name, or a revision with `..` or control characters. The message shows at most 60 of its
characters.

This module and `zoo.hub.publish` are the only ones importing the Hub client. They import it only when a
repo is actually named.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

# what reads as ORG/NAME[@REVISION] rather than a folder path (then checked against the Hub's rules)
REPO_REFERENCE = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[^\s@]+))?")
# the Hub's rules for each part of a repo id (huggingface_hub `validate_repo_id`): 1-96 ASCII letters,
# digits, `-`, `_`, `.`, starting and ending with a letter, digit or `_`; no `--` or `..`; no `.git` end
REPO_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")
# a branch, tag or commit sha, or a ref such as refs/pr/1: parts of letters, digits and `._-`, each
# starting with a letter, digit or `_` (so never `.` or `..`), joined by `/`; the revision becomes a
# path under the Hub cache's refs/ folder, which this confines it to
REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(?:/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
MAX_REVISION = 255
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
DATA_HELP = ("a packed zoo folder, or a Hub dataset repo ORG/NAME[@REVISION] (a branch, tag or commit sha; "
             "default main), fetched into the Hugging Face cache (with HF_HUB_OFFLINE=1, read from it); an "
             "existing local path always wins: ORG/NAME is a repo only when no such folder exists")


class HubDataError(ValueError):
    """A Hub dataset repo that could not be resolved to a local snapshot (one line)."""


@dataclasses.dataclass(frozen=True)
class DataSource:
    """A zoo resolved to a local folder, and where it came from."""

    folder: Path  # the folder to read: the given path, or the repo's snapshot in the Hub cache
    given: str  # what the user wrote, e.g. "runs/cnn-mnist" or "org/zoo@v0.1.0-1a2b3c4d"
    repo: str | None = None  # the Hub dataset repo id, for a repo
    revision: str | None = None  # the commit sha the repo's revision resolved to, for a repo

    def describe(self) -> str:
        """`org/zoo@<sha[:12]>` for a repo, the folder otherwise (for messages)."""
        return f"{self.repo}@{self.revision[:12]}" if self.repo and self.revision else str(self.folder)


def parse_repo_reference(text: str | Path) -> tuple[str, str | None] | None:
    """(repo_id, revision or None) when `text` names a Hub repo rather than a local path, else None.

    An existing path (file or folder) is never a repo. So a local `org/zoo` folder shadows the repo of
    that name, and `./org/zoo` always means the folder.
    """
    if isinstance(text, Path) or os.path.exists(text):  # os.path: a too long name is no path, not an error
        return None
    match = REPO_REFERENCE.fullmatch(text)
    if match is None:
        return None
    problem = reference_problem(match["repo"], match["revision"])
    if problem is not None:
        shown = ascii(text[:60])[1:-1] + (f"… ({len(text):,} characters)" if len(text) > 60 else "")
        raise HubDataError(f"{shown}: not a Hub dataset repo ORG/NAME[@REVISION] nor an existing folder: {problem}")
    return match["repo"], match["revision"]


def reference_problem(repo: str, revision: str | None) -> str | None:
    """Why `repo` (ORG/NAME) or `revision` breaks the Hub's rules, or None; checked before any Hub call."""
    for part, what in zip(repo.split("/"), ("ORG", "NAME")):
        if not REPO_PART.fullmatch(part):
            return (f"{what} must be 1-96 letters, digits, '-', '_' or '.', starting and ending with a letter, "
                    f"digit or '_' (it has {len(part):,} characters)")
        if "--" in part or ".." in part:
            return f"{what} may not hold '--' or '..'"
    if repo.endswith(".git"):
        return "NAME may not end with '.git'"
    if revision is not None:
        if len(revision) > MAX_REVISION:
            return f"REVISION has {len(revision):,} characters; at most {MAX_REVISION}"
        if not REVISION.fullmatch(revision) or ".." in revision:
            return ("REVISION must be a branch, tag or commit sha: letters, digits and '._-' in parts joined by '/', "
                    "each starting with a letter, digit or '_', no '..' and no control characters")
    return None


def resolve_data(text: str | Path, *, config: str | None = None) -> DataSource:
    """The local folder of `text`: itself, or the cached snapshot of the Hub repo it names.

    With `config`, only that config's shards (and the card and manifest) are fetched.
    """
    reference = parse_repo_reference(text)
    if reference is None:
        return DataSource(folder=Path(text), given=str(text))
    repo, revision = reference
    folder = _snapshot(repo, revision, config)
    commit = folder.name  # the cache layout: .../datasets--ORG--NAME/snapshots/<commit sha>
    if not COMMIT_SHA.fullmatch(commit):
        raise HubDataError(f"{repo}@{revision or 'main'}: the Hub cache returned {folder}, which is not a "
                           "snapshots/<commit> folder; clear that repo from the cache (`hf cache delete`) and retry")
    return DataSource(folder=folder, given=str(text), repo=repo, revision=commit)


def _snapshot(repo: str, revision: str | None, config: str | None) -> Path:
    """`snapshot_download` of the dataset repo, its failures turned into one-line `HubDataError`s."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, IncompleteSnapshotError,
                                        LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError)

    where = f"{repo}@{revision or 'main'}"
    patterns = None if config is None else ["README.md", "manifest.json", f"data/{config}/*"]
    try:
        return Path(snapshot_download(repo, repo_type="dataset", revision=revision, allow_patterns=patterns))
    except IncompleteSnapshotError:
        raise HubDataError(f"{where}: the cached snapshot in {constants.HF_HUB_CACHE} is missing files and the Hub "
                           "cannot be reached to complete it; download it again with network access") from None
    except LocalEntryNotFoundError:
        offline = "offline mode is on (HF_HUB_OFFLINE=1)" if constants.is_offline_mode() else "the Hub is unreachable"
        raise HubDataError(f"{where}: revision {revision or 'main'!r} of dataset repo {repo} is not in the Hugging "
                           f"Face cache ({constants.HF_HUB_CACHE}) and {offline}, and no local folder {repo} "
                           "exists; give an existing zoo folder, or download the repo once "
                           "with network access") from None
    except RevisionNotFoundError:
        raise HubDataError(f"{where}: dataset repo {repo} has no revision {revision!r} (expected a branch, a tag "
                           "or a commit sha)") from None
    except (RepositoryNotFoundError, GatedRepoError):
        raise HubDataError(f"{where}: no dataset repo {repo} on the Hub, or it is private or gated (set HF_TOKEN); "
                           f"{repo} is not a local folder either") from None
    except HfHubHTTPError as error:
        status = getattr(error.response, "status_code", None)
        raise HubDataError(f"{where}: the Hub answered HTTP {status} "
                           f"({str(error).strip().splitlines()[0] if str(error).strip() else 'no detail'})") from None
