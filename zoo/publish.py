"""Publishing a packed zoo folder to a Hugging Face Hub dataset repository.

The folder is verified first; then the dataset repo is created if needed and the card, the
manifest and the shards are uploaded (never the staging folder or the resolved specs'
scratch files). The Hub client is imported here and nowhere else; `api` may be any object
with `HfApi`'s `create_repo` and `upload_folder`. Offline mode, a missing token, an
unreachable Hub and a refused request are each one line (`PublishError`), not a traceback.
"""

from __future__ import annotations

from pathlib import Path

from zoo.folder import read_manifest
from zoo.verify import verify



def upload_patterns(folder: Path) -> list[str]:
    """The card, the manifest and exactly the shards it lists (no leftovers of an interrupted pack)."""
    manifest = read_manifest(folder)
    shards = sorted(f["path"] for entry in manifest["configs"].values() for f in entry["files"])
    return ["README.md", "manifest.json", *shards]


class PublishError(RuntimeError):
    pass


TOKEN_HINT = "publishing needs a Hugging Face token with write access (set HF_TOKEN or run `hf auth login`)"


def _is_network_error(error: BaseException) -> bool:
    """A failure to reach the Hub: OS-level errors, and the HTTP client's transport errors."""
    module = type(error).__module__.split(".")[0]
    return isinstance(error, (OSError, TimeoutError)) or module.startswith(("httpx", "httpcore", "requests", "urllib3"))


def _hub_failure(error: BaseException, endpoint: str) -> PublishError | None:
    """One line saying why the Hub could not be used, or None for an error that is not the Hub's."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(error, OfflineModeIsEnabled):
        return PublishError(f"offline mode is on (HF_HUB_OFFLINE=1), so the Hub is unreachable; unset it to publish; "
                            f"{TOKEN_HINT}")
    if isinstance(error, HfHubHTTPError):
        status = getattr(error.response, "status_code", None)
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if status in (401, 403):
            return PublishError(f"the Hub refused the request (HTTP {status}): {first_line}; {TOKEN_HINT}")
        return PublishError(f"the Hub answered HTTP {status}: {first_line}")
    if _is_network_error(error):
        return PublishError(f"cannot reach the Hugging Face Hub at {endpoint} ({type(error).__name__}: "
                            f"{str(error).strip().splitlines()[0] if str(error).strip() else 'no detail'}); "
                            f"check the network; {TOKEN_HINT}")
    return None


def publish(folder: str | Path, repo_id: str, *, token: str | None = None, private: bool = False,
            revision: str | None = None, api=None, message: str | None = None) -> str:
    """Uploads `folder` to the dataset repo `repo_id` ("org/name"); returns the commit URL."""
    folder = Path(folder)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PublishError(f"--repo must be ORG/NAME, got {repo_id!r}")
    report = verify(folder)
    if not report.ok:
        raise PublishError("the folder does not verify; fix it before publishing:\n  " + "\n  ".join(report.problems))
    if api is None:
        from huggingface_hub import HfApi, constants, get_token

        if constants.HF_HUB_OFFLINE:
            raise PublishError(f"offline mode is on (HF_HUB_OFFLINE=1), so the Hub is unreachable; unset it to "
                               f"publish; {TOKEN_HINT}")
        if token is None and get_token() is None:
            raise PublishError(f"no Hugging Face token found; {TOKEN_HINT}")
        api = HfApi(token=token)
    endpoint = getattr(api, "endpoint", None) or "the Hub"
    try:
        api.create_repo(repo_id=repo_id, repo_type="dataset", exist_ok=True, private=private)
        if revision is not None:
            api.create_branch(repo_id=repo_id, branch=revision, repo_type="dataset", exist_ok=True)
        commit = api.upload_folder(
            folder_path=str(folder), repo_id=repo_id, repo_type="dataset", revision=revision,
            allow_patterns=upload_patterns(folder),
            commit_message=message or f"Upload zoo ({report.files_checked} shards, {report.rows_checked} checkpoints)",
        )
    except Exception as error:  # noqa: BLE001: the Hub's failures become one line; anything else propagates
        failure = _hub_failure(error, str(endpoint))
        if failure is None:
            raise
        raise failure from None
    return str(getattr(commit, "commit_url", commit))
