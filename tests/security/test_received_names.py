"""A received zoo's names are parsed once, where its manifest is read (docs/security.md, "received zoo").

Every key of `manifest.json` that reaches a path (a config's name, a shard's path, a split set's name,
its file and its holding shards) is tried with each hostile spelling: at the boundary
(`zoo.storage.manifest.check_manifest`) every spelling is one `InputError` naming the key; through the
commands a user runs on such a zoo (`verify`, `bench run`, `leaderboard pin`, a `leaderboard submit
--dataset` that is refused), one line, exit 1, and nothing written anywhere.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path

import pytest

from hostile_names import HOSTILE
from zoo.storage.manifest import check_manifest
from zoo.validation.inputs import InputError

CONFIG = "cnn-mnist"
SET = "paper"


def with_split_set(zoo: Path) -> None:
    """Gives `zoo`'s config a valid split set `SET` (its rows re-dealt), as an importer writes one."""
    manifest = json.loads((zoo / "manifest.json").read_text())
    entry = manifest["configs"][CONFIG]
    import pyarrow.parquet as pq

    ids = {split: [] for split in ("train", "validation", "test")}
    for shard in entry["files"]:
        ids[shard["split"]] += pq.read_table(zoo / shard["path"], columns=["model_id"])["model_id"].to_pylist()
    data = json.dumps(ids).encode()
    (zoo / "data" / CONFIG / f"{SET}.json").write_bytes(data)
    entry["split_sets"] = {SET: {"path": f"data/{CONFIG}/{SET}.json", "sha256": hashlib.sha256(data).hexdigest(),
                                 "bytes": len(data), "rows": {s: len(v) for s, v in ids.items()},
                                 "description": "the rows re-dealt", "shards": [f["path"] for f in entry["files"]]}}
    (zoo / "manifest.json").write_text(json.dumps(manifest))


def _rename_config(manifest: dict, value: str) -> None:
    manifest["configs"][value] = manifest["configs"].pop(CONFIG)


def _rename_set(manifest: dict, value: str) -> None:
    sets = manifest["configs"][CONFIG]["split_sets"]
    sets[value] = sets.pop(SET)


KEYS = {  # the manifest's keys that reach a path: how to put a value there
    "configs.<name>": _rename_config,
    "files[].path": lambda m, v: m["configs"][CONFIG]["files"][0].update(path=v),
    "split_sets.<name>": _rename_set,
    "split_sets.<set>.path": lambda m, v: m["configs"][CONFIG]["split_sets"][SET].update(path=v),
    "split_sets.<set>.shards[]": lambda m, v: m["configs"][CONFIG]["split_sets"][SET].update(shards=[v]),
}


@pytest.fixture(scope="module")
def manifest_with_set(tmp_path_factory, tiny_zoo) -> dict:
    import shutil

    zoo = tmp_path_factory.mktemp("named") / "zoo"
    shutil.copytree(tiny_zoo, zoo)
    for path in zoo.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    with_split_set(zoo)
    return json.loads((zoo / "manifest.json").read_text())


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("spelling", HOSTILE)
def test_every_hostile_spelling_of_every_named_key_is_refused_at_the_boundary(manifest_with_set, key, spelling,
                                                                              tmp_path):
    manifest = copy.deepcopy(manifest_with_set)
    KEYS[key](manifest, HOSTILE[spelling])
    with pytest.raises(InputError) as error:
        check_manifest(manifest, "manifest.json")
    assert "\n" not in str(error.value) and "\x1b" not in str(error.value)
    with pytest.raises(InputError):  # and against a folder: nothing is touched outside it
        check_manifest(manifest, "manifest.json", tmp_path)


def test_the_valid_manifest_passes(manifest_with_set):
    """Negative control: the table's starting point is a manifest the boundary accepts."""
    assert check_manifest(copy.deepcopy(manifest_with_set), "manifest.json") is not None


def _malform(entry: dict, key: str, value) -> None:
    if key == "split_sets":
        entry["split_sets"] = value
    elif key == "split_sets.<set>":
        entry["split_sets"][SET] = value
    elif key == "split_sets.<set>.path":
        del entry["split_sets"][SET]["path"]
    elif key == "split_sets.<set>.shards":
        entry["split_sets"][SET]["shards"] = value
    elif key == "split_sets.<set>.rows":
        entry["split_sets"][SET]["rows"] = value
    elif key == "files[]":
        entry["files"][0] = value
    else:
        entry["files"][0]["rows"] = value


MALFORMED = [("split_sets", "paper"), ("split_sets.<set>", "paper"), ("split_sets.<set>.path", None),
             ("split_sets.<set>.shards", 3), ("split_sets.<set>.shards", [["data/x"]]),
             ("split_sets.<set>.rows", [1, 2, 3]), ("files[]", "rows"), ("files[].rows", "3")]


@pytest.mark.parametrize("key,value", MALFORMED)
def test_a_malformed_split_set_or_shard_entry_is_one_error(manifest_with_set, key, value):
    manifest = copy.deepcopy(manifest_with_set)
    _malform(manifest["configs"][CONFIG], key, value)
    with pytest.raises(InputError, match=r"manifest\.json: configs\.cnn-mnist\.(split_sets|files)"):
        check_manifest(manifest, "manifest.json")


@pytest.mark.parametrize("key,value", MALFORMED[:6])
def test_bench_run_and_verify_say_a_malformed_split_set_in_one_line(cli, tiny_zoo_copy, tmp_path, key, value):
    """The round-4 cases that ended in KeyError, TypeError or AttributeError tracebacks (one after the
    benchmark had written its results): now refused where the manifest is read, before anything runs."""
    with_split_set(tiny_zoo_copy)
    manifest = json.loads((tiny_zoo_copy / "manifest.json").read_text())
    _malform(manifest["configs"][CONFIG], key, value)
    (tiny_zoo_copy / "manifest.json").write_text(json.dumps(manifest))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "results.json"
    for argv in (["verify", str(tiny_zoo_copy)],
                 ["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(tiny_zoo_copy),
                  "--seeds", "0", "--out", str(out), "--set", f"task.splits={SET}", "--set", "task.epochs=1"]):
        done = cli.run(argv, cwd=tmp_path, env=env, timeout=300)
        assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
        assert done.stderr.count("\n") <= 1, (argv, done.stdout, done.stderr)
        assert "split_sets" in done.stdout + done.stderr, (argv, done.stdout, done.stderr)
    assert not out.exists()


def test_row_counts_that_disagree_with_the_shards_are_refused(manifest_with_set):
    manifest = copy.deepcopy(manifest_with_set)
    manifest["configs"][CONFIG]["splits"]["train"] += 1
    with pytest.raises(InputError, match=r"splits\.train: 13 rows, but its shards' `rows` add up to 12"):
        check_manifest(manifest, "manifest.json")


# --- through the commands ---------------------------------------------------------------------------

def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def _hostile_zoo(tiny_zoo_copy: Path, key: str, value: str) -> None:
    with_split_set(tiny_zoo_copy)
    manifest = json.loads((tiny_zoo_copy / "manifest.json").read_text())
    KEYS[key](manifest, value)
    (tiny_zoo_copy / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("key", KEYS)
def test_commands_on_a_zoo_with_a_hostile_name_write_nothing(cli, tiny_zoo_copy, tmp_path, key):
    """Each command ends in one line and exit 1, and no file appears or changes anywhere under the test's
    folder (the zoo, the board, a `victims/` beside them: where `x/../../../victims/pwned` pointed)."""
    _hostile_zoo(tiny_zoo_copy, key, HOSTILE["escape"])
    board, victims = tmp_path / "board", tmp_path / "victims"
    board.mkdir()
    victims.mkdir()
    before = _tree(tmp_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NFNZOO_LEADERBOARD": str(board)}
    commands = [["verify", str(tiny_zoo_copy)],
                ["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(tiny_zoo_copy),
                 "--seeds", "0", "--out", str(tmp_path / "results.json"), "--set", "task.epochs=1"],
                ["leaderboard", "pin", str(tiny_zoo_copy), "--root", str(board)]]
    for argv in commands:
        done = cli.run(argv, cwd=tmp_path, env=env, timeout=300)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, (argv, done.stderr[-2000:])
        assert "Traceback" not in done.stderr
    assert _tree(tmp_path) == before


def test_a_refused_submission_with_a_hostile_zoo_writes_nothing(cli, tiny_zoo, tiny_zoo_copy, tmp_path):
    """The round-3 case: `leaderboard submit --dataset ZOO` on a zoo whose split set's name leaves the board."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    results = tmp_path / "run" / "results.json"
    done = cli.run(["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(tiny_zoo),
                    "--seeds", "0", "--out", str(results), "--set", "task.epochs=1"], cwd=tmp_path, env=env,
                   timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    _hostile_zoo(tiny_zoo_copy, "split_sets.<name>", HOSTILE["escape"])
    board = tmp_path / "board"
    board.mkdir()
    before = _tree(tmp_path)
    done = cli.run(["leaderboard", "submit", str(results), "--root", str(board), "--dataset", str(tiny_zoo_copy)],
                   cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "split_sets" in done.stderr and "Traceback" not in done.stderr
    assert _tree(tmp_path) == before
