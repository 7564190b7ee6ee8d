"""Publishing a packed zoo folder to a Hugging Face Hub dataset repository, as one tagged commit.

The folder is verified first. Then the dataset repo is created if needed, and its current card and
manifest are read at the head commit. Then one commit (`HfApi.create_commit`) is sent.

It adds the folder's shards, `manifest.json` and the card `README.md`. The shards are exactly those the
manifest lists: never staging/, specs/ or the leftovers of an interrupted pack.

It deletes every file under `data/<config>/` of an uploaded config that the folder's manifest does not
list. `upload_folder` would overwrite same-name files and leave the others. A re-pack would then leave
old shards that an older card's glob (`data/<config>/<split>-*.parquet`) reads too, duplicating rows.
Also, since huggingface_hub 1.x with hf_xet, `upload_folder` may split a large folder into several
commits. So its `delete_patterns` would not make one atomic change.

Configs already in the repo that the folder does not hold are kept. The manifest and the card are
merged, and the folder's version of a config wins (`merge_manifests`). One repo holding several configs
published from separate folders (`transformer-mnist`, `transformer-agnews`) is the design's layout.
`nfnzoo pack` merges configs into a folder's manifest the same way.

A repo with a card but no nfnzoo manifest, or a manifest of another format version, is refused rather
than overwritten. The commit's parent is the head that was read. So the Hub refuses this commit after a
concurrent publish, instead of silently dropping its configs.

The commit is then tagged `v<package version>-<content hash[:8]>` (`release_tag`,
`zoo.storage.integrity`). Readers pin it with `load_dataset(repo, config, revision=tag)` or `nfnzoo
bench run --data repo@tag`.

The Hub client is imported here and in `zoo.hub.resolve` only. `api` may be any object with `HfApi`'s
methods. Offline mode, a missing token, an unreachable Hub and a refused request are each one line
(`PublishError`), not a traceback.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from zoo.storage.folder import MANIFEST, read_manifest
from zoo.validation.inputs import InputError, read_json_file
from zoo.storage.manifest import MAX_MANIFEST_BYTES, check_manifest, shard_path
from zoo.storage.integrity import release_hash, release_tag  # noqa: F401 (part of the publisher's story)
from zoo.dataset.verify import verify

CARD = "README.md"


class PublishError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class Published:
    """What one `publish` did: the commit, its tag, and what the repo holds after it."""

    repo_id: str
    commit: str  # the commit's oid (40-hex sha)
    commit_url: str
    tag: str  # the release tag at `commit`
    revision: str | None  # the branch committed to (None: the default branch)
    configs: tuple[str, ...]  # every config in the repo after the commit
    kept: tuple[str, ...]  # configs already in the repo, not in the folder, kept as they were
    replaced: tuple[str, ...]  # configs in both, replaced by the folder's
    deleted: tuple[str, ...]  # stale shards removed in the commit
    tag_existed: bool = False  # the tag already named a commit with the same data; left as it was

    def lines(self) -> list[str]:
        first = self.configs[0]
        kept = f"; kept from the repo: {', '.join(self.kept)}" if self.kept else ""
        replaced = f"; replaced: {', '.join(self.replaced)}" if self.replaced else ""
        deleted = f"; removed {len(self.deleted)} stale shards" if self.deleted else ""
        tag = f"tag {self.tag}" + (" (already there, same data; kept)" if self.tag_existed else "")
        return [f"repo {self.repo_id}" + (f" (branch {self.revision})" if self.revision else ""),
                f"commit {self.commit} {self.commit_url}",
                f"{tag}; configs: {', '.join(self.configs)}{kept}{replaced}{deleted}",
                f'pinned: datasets.load_dataset("{self.repo_id}", "{first}", revision="{self.tag}")',
                f"        nfnzoo bench run --data {self.repo_id}@{self.tag} --config {first} ..."]


TOKEN_HINT = "publishing needs a Hugging Face token with write access (set HF_TOKEN or run `hf auth login`)"


def merge_manifests(repo_manifest: dict | None, folder_manifest: dict, where: str) -> dict:
    """The repo's manifest with the folder's configs added or replacing the repo's versions."""
    if repo_manifest is None:
        return folder_manifest
    ours, theirs = folder_manifest.get("format_version"), repo_manifest.get("format_version")
    if ours != theirs:
        raise PublishError(f"{where}: the repo's {MANIFEST} has format_version {theirs}, the folder's {ours}; "
                           "re-pack and publish every config of the repo with one nfnzoo version, or use another repo")
    return {**repo_manifest, **folder_manifest, "configs": {**repo_manifest["configs"], **folder_manifest["configs"]}}


def manifest_text(manifest: dict) -> str:
    """The manifest serialized as `nfnzoo pack` writes it (`zoo.storage.folder.write_json_atomic`)."""
    return json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n"


def plan_commit(folder: Path, folder_manifest: dict, repo_files: list[str], repo_manifest: dict | None,
                where: str) -> tuple[list[tuple[str, Path | bytes]], list[str], dict]:
    """The commit's plan: files to add, paths to delete, and the merged manifest.

    Each file to add is (path in repo, local path or bytes).
    """
    merged = merge_manifests(repo_manifest, folder_manifest, where)
    shards = sorted(f["path"] for entry in folder_manifest["configs"].values() for f in entry["files"])
    # an imported zoo's named split sets (data/<config>/splitset-<name>.json) travel with their shards
    shards += sorted(s["path"] for entry in folder_manifest["configs"].values()
                     for s in entry.get("split_sets", {}).values())
    adds: list[tuple[str, Path | bytes]] = [(path, shard_path(folder, path, f"{folder / MANIFEST}: shard {path}"))
                                            for path in shards]
    if merged is folder_manifest:  # nothing to merge: the folder's own card and manifest, byte for byte
        adds += [(CARD, folder / CARD), (MANIFEST, folder / MANIFEST)]
    else:
        from zoo.dataset.card import render_card

        try:
            card = render_card(merged)
        except (KeyError, TypeError, ValueError) as error:
            raise PublishError(f"{where}: cannot render the merged card from the repo's {MANIFEST} and the folder's "
                               f"({type(error).__name__}: {error}; written by another nfnzoo version?); publish "
                               "the repo's other configs again with this version, or use another repo") from None
        adds += [(CARD, card.encode()), (MANIFEST, manifest_text(merged).encode())]
    prefixes = tuple(f"data/{name}/" for name in folder_manifest["configs"])
    keep = set(shards)
    deletes = sorted(p for p in repo_files if p.startswith(prefixes) and p not in keep)
    return adds, deletes, merged


def _read_repo(api: Any, repo_id: str, revision: str | None, where: str) -> tuple[str, list[str], dict | None]:
    """The head commit sha, the files there, and the repo's manifest (None when it has none)."""
    head = api.repo_info(repo_id, repo_type="dataset", revision=revision).sha
    files = list(api.list_repo_files(repo_id, repo_type="dataset", revision=head))
    if MANIFEST not in files:
        if CARD in files:
            raise PublishError(f"{where}: the repo has a {CARD} but no {MANIFEST}, so it is not an nfnzoo zoo and "
                               f"its card would be replaced; publish to another repo, or delete its {CARD} first")
        return head, files, None
    path = api.hf_hub_download(repo_id, MANIFEST, repo_type="dataset", revision=head)
    try:
        manifest = read_json_file(path, MAX_MANIFEST_BYTES, strict=True, what="manifest")
    except InputError as error:
        raise PublishError(f"{where}@{head[:12]}: {MANIFEST} is not readable JSON "
                           f"({str(error).removeprefix(f'{path}: ')}); fix or delete it in the repo before "
                           "publishing") from None
    try:
        check_manifest(manifest, f"{where}@{head[:12]}: {MANIFEST}")  # its shard paths by their form: never opened
    except InputError as error:
        raise PublishError(f"{error}; publish to another repo") from None
    return head, files, manifest


def tag_commit(api: Any, repo_id: str, tag: str, commit: str) -> bool:
    """Tags `commit`; True when the tag already existed (same version and data, so it is kept)."""
    existing = {ref.name: ref.target_commit for ref in api.list_repo_refs(repo_id, repo_type="dataset").tags}
    if tag in existing:
        return True
    api.create_tag(repo_id, tag=tag, revision=commit, repo_type="dataset",
                   tag_message=f"nfnzoo release {tag}")
    return False


def _is_network_error(error: BaseException) -> bool:
    """A failure to reach the Hub: OS-level errors, and the HTTP client's transport errors."""
    module = type(error).__module__.split(".")[0]
    return isinstance(error, (OSError, TimeoutError)) or module.startswith(("httpx", "httpcore", "requests", "urllib3"))


def hub_failure(error: BaseException, endpoint: str) -> PublishError | None:
    """One line saying why the Hub could not be used; None for an error that is not the Hub's."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(error, OfflineModeIsEnabled):
        return PublishError(f"offline mode is on (HF_HUB_OFFLINE=1), so the Hub is unreachable; unset it to publish; "
                            f"{TOKEN_HINT}")
    if isinstance(error, HfHubHTTPError):
        status = getattr(error.response, "status_code", None)
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if status in (401, 403):
            return PublishError(f"the Hub refused the request (HTTP {status}): {first_line}; {TOKEN_HINT}")
        if status in (409, 412):
            return PublishError(f"the Hub answered HTTP {status}: {first_line}; the repo changed while publishing "
                                "(another publish?): run the same command again")
        return PublishError(f"the Hub answered HTTP {status}: {first_line}")
    if _is_network_error(error):
        return PublishError(f"cannot reach the Hugging Face Hub at {endpoint} ({type(error).__name__}: "
                            f"{str(error).strip().splitlines()[0] if str(error).strip() else 'no detail'}); "
                            f"check the network; {TOKEN_HINT}")
    return None


def hub_client(token: str | None) -> Any:
    """An `HfApi` for publishing.

    Raises a one-line `PublishError` when offline mode is on or no token is found.
    """
    from huggingface_hub import HfApi, constants, get_token

    if constants.HF_HUB_OFFLINE:
        raise PublishError(f"offline mode is on (HF_HUB_OFFLINE=1), so the Hub is unreachable; unset it to "
                           f"publish; {TOKEN_HINT}")
    if token is None and get_token() is None:
        raise PublishError(f"no Hugging Face token found; {TOKEN_HINT}")
    return HfApi(token=token)


def publish(folder: str | Path, repo_id: str, *, token: str | None = None, private: bool = False,
            revision: str | None = None, api: Any = None, message: str | None = None) -> Published:
    """Uploads `folder` to the dataset repo `repo_id` ("org/name") as one commit, and tags it.

    Returns what it did.
    """
    folder = Path(folder)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PublishError(f"--repo must be ORG/NAME, got {repo_id!r}")
    report = verify(folder, full=True)  # the sha256 the Hub and the dataset hash rest on
    if not report.ok:
        raise PublishError("the folder does not verify; fix it before publishing:\n  " + "\n  ".join(report.problems))
    stale = [warning for warning in report.warnings if warning.startswith(f"{CARD}: ")]
    if stale:  # the card would make `load_dataset` read other shards than the manifest lists
        raise PublishError(f"{folder}: {stale[0].split(' (')[0]}; re-run `nfnzoo pack {folder}` to rewrite the card")
    folder_manifest = read_manifest(folder)
    api = api if api is not None else hub_client(token)
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    endpoint = getattr(api, "endpoint", None) or "the Hub"
    where = repo_id + (f" (branch {revision})" if revision else "")
    try:
        api.create_repo(repo_id=repo_id, repo_type="dataset", exist_ok=True, private=private)
        if revision is not None:
            api.create_branch(repo_id=repo_id, branch=revision, repo_type="dataset", exist_ok=True)
        head, repo_files, repo_manifest = _read_repo(api, repo_id, revision, where)
        adds, deletes, merged = plan_commit(folder, folder_manifest, repo_files, repo_manifest, where)
        operations = ([CommitOperationDelete(path_in_repo=path) for path in deletes]
                      + [CommitOperationAdd(path_in_repo=path, path_or_fileobj=source if isinstance(source, bytes)
                                            else str(source)) for path, source in adds])
        summary = (f"{report.files_checked} shards, {report.rows_checked} checkpoints"
                   + (f", {len(deletes)} stale shards removed" if deletes else ""))
        commit = api.create_commit(repo_id=repo_id, repo_type="dataset", operations=operations, revision=revision,
                                   parent_commit=head, commit_message=message or f"Upload zoo ({summary})")
        tag = release_tag(merged)
        tag_existed = tag_commit(api, repo_id, tag, commit.oid)
    except PublishError:
        raise
    except Exception as error:  # the Hub's failures become one line; anything else propagates
        failure = hub_failure(error, str(endpoint))
        if failure is None:
            raise
        raise failure from None
    previous = set(repo_manifest["configs"]) if repo_manifest else set()
    return Published(repo_id=repo_id, commit=commit.oid, commit_url=str(commit.commit_url), tag=tag,
                     revision=revision, configs=tuple(sorted(merged["configs"])),
                     kept=tuple(sorted(previous - set(folder_manifest["configs"]))),
                     replaced=tuple(sorted(previous & set(folder_manifest["configs"]))),
                     deleted=tuple(deletes), tag_existed=tag_existed)
