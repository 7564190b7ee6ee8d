"""Publishing a board: one commit of the results dataset, the board's files and the site; stale
files deleted in the same commit; the results load with `datasets.load_dataset` from the repo alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from huggingface_hub import CommitOperationDelete

from leaderboards import OFFICIAL_ROOT
from leaderboards.entries import load_entries, stored_predictions_path
from leaderboards.publish import BOARD_MANIFEST, publish_board
from zoo.cli import main
from zoo.hub.publish import PublishError

READ = r"""
import json, sys
import datasets
rows = datasets.load_dataset(sys.argv[1], sys.argv[2], split="entries")
print(json.dumps({"rows": rows.num_rows, "columns": rows.column_names, "entry_ids": sorted(rows["entry_id"]),
                  "verified": sum(rows["verified"]), "tau": rows["kendall_tau_mean"][:3]}))
"""


SMALLEST = "e6f11d37eb40"  # the official board's dataset with the fewest entries: rendering them is most of a test


@pytest.fixture
def board(tmp_path):
    root = tmp_path / "board"
    folder = OFFICIAL_ROOT / "entries" / "generalization" / SMALLEST
    shutil.copytree(folder, root / "entries" / "generalization" / SMALLEST)
    (root / "pinned").mkdir()
    shutil.copy(OFFICIAL_ROOT / "pinned" / f"{SMALLEST}.test.parquet", root / "pinned")
    shutil.copy(OFFICIAL_ROOT / "datasets.json", root / "datasets.json")
    return root


def test_one_commit_holds_the_results_the_board_and_the_site_and_loads_with_datasets(board, api, repo, offline_hf):
    published = publish_board(board, "org/board", api=api)
    ((commit, operations),) = repo.commits
    assert published.commit == commit and repo.tags == {published.tag: commit}
    files = repo.files()
    entries = load_entries(board)
    assert {"README.md", BOARD_MANIFEST, "data/generalization/entries.parquet", "board/datasets.json",
            "site/index.html", "site/generalization.html", "site/site.js"} <= files
    assert {f"board/{p.relative_to(board).as_posix()}" for p, _ in entries} <= files
    manifest = json.loads((repo.root / BOARD_MANIFEST).read_text())
    assert manifest["entries"] == len(entries) == published.entries
    result = subprocess.run([sys.executable, "-c", READ, str(repo.root), "generalization"], env=offline_hf,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["rows"] == len(entries) and seen["verified"] == len(entries)
    assert seen["entry_ids"] == sorted(entry.submission.id for _, entry in entries)
    assert {"protocol", "model_config", "kendall_tau_std", "kendall_tau_per_seed", "code_url"} <= set(seen["columns"])
    # the published board audits again from the repo's own files
    assert main(["leaderboard", "audit", "--root", str(repo.root / "board"), "--require-verified"]) == 0


def test_a_republish_with_fewer_entries_deletes_the_stale_files_in_the_same_commit(board, api, repo):
    publish_board(board, "org/board", api=api)
    path, _ = load_entries(board)[0]
    gone = {f"board/{p.relative_to(board).as_posix()}" for p in (path, stored_predictions_path(path))}
    path.unlink()
    stored_predictions_path(path).unlink()
    second = publish_board(board, "org/board", api=api)
    _, operations = repo.commits[-1]
    assert {op.path_in_repo for op in operations if isinstance(op, CommitOperationDelete)} == gone
    assert not gone & repo.files() and set(second.deleted) == gone
    assert len(repo.tags) == 2  # a new content, a new tag


def test_a_foreign_repo_and_a_board_that_does_not_audit_are_refused(board, api, repo):
    (repo.root / "README.md").write_text("# someone else's dataset\n")
    with pytest.raises(PublishError, match="not an nfnzoo board"):
        publish_board(board, "org/board", api=api)
    (repo.root / "README.md").unlink()
    api.create_repo.reset_mock()
    path, _ = load_entries(board)[0]
    path.write_text(path.read_text().replace('"kendall_tau": 0.', '"kendall_tau": 0.0', 1))
    with pytest.raises(PublishError, match="the board does not audit"):
        publish_board(board, "org/board", api=api)
    assert repo.commits == [] and not api.create_repo.called


def _publish(board, env):
    return subprocess.run([sys.executable, "-m", "zoo.cli", "leaderboard", "publish", "--repo", "org/board", "--root",
                           str(board)], env=env, capture_output=True, text=True, timeout=300)


def test_offline_mode_is_one_line_before_any_work(board, offline_hf):
    """No token and an unreachable Hub take the zoo publisher's path (`zoo.hub.publish.hub_client`,
    `hub_failure`), tested in tests/zoo/test_publish.py."""
    result = _publish(board, offline_hf)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "offline mode is on (HF_HUB_OFFLINE=1)" in line and "HF_TOKEN" in line
