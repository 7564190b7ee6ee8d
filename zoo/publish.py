"""Publishing a packed zoo folder to a Hugging Face Hub dataset repository.

The folder is verified first; then the dataset repo is created if needed and the card, the
manifest and the shards are uploaded (never the staging folder or the resolved specs'
scratch files). The Hub client is imported here and nowhere else; `api` may be any object
with `HfApi`'s `create_repo` and `upload_folder`.
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
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    api.create_repo(repo_id=repo_id, repo_type="dataset", exist_ok=True, private=private)
    if revision is not None:
        api.create_branch(repo_id=repo_id, branch=revision, repo_type="dataset", exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(folder), repo_id=repo_id, repo_type="dataset", revision=revision,
        allow_patterns=upload_patterns(folder),
        commit_message=message or f"Upload zoo ({report.files_checked} shards, {report.rows_checked} checkpoints)",
    )
    return str(getattr(commit, "commit_url", commit))
