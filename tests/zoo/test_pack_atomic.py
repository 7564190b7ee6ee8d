"""A pack's commit is atomic: after a SIGKILL or a full disk at any point, one complete pack.

A real `nfnzoo pack` runs in a subprocess whose os.replace / os.rename / os.unlink /
shutil.rmtree and manifest/card writes are wrapped (in the `python -c` script, not in the
package) so that the process SIGKILLs itself at the N-th such call of the commit, for every N
until the pack completes. After each kill: `nfnzoo verify` passes, our loader and
`datasets.load_dataset` read the complete old or the complete new pack, and the next pack
leaves no leftover. A small tmpfs gives a real ENOSPC.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.storage.folder import MANIFEST, read_manifest
from zoo.storage.integrity import verified_dataset_hash
from zoo.loader import read_metadata
from zoo.dataset.pack import pack
from zoo.dataset.verify import verify

CONFIG = "cnn-mnist"
NEW_SHARD_MB = "0.06"  # ~3 rows a shard: the re-pack differs from the tiny zoo's one shard per split
ROOT = Path(__file__).resolve().parents[2]

KILL_AT = r"""
import os, shutil, signal, sys
import zoo.storage.commit, zoo.dataset.pack
from zoo.cli import main

source, work, shard_mb = sys.argv[1], sys.argv[2], sys.argv[3]
calls, active = [0], [False]
kill_at = [0]

def counted(function):
    def wrapper(*args, **kwargs):
        if active[0]:
            calls[0] += 1
            if calls[0] == kill_at[0]:
                os.kill(os.getpid(), signal.SIGKILL)
        return function(*args, **kwargs)
    return wrapper

os.replace, os.rename, os.unlink = counted(os.replace), counted(os.rename), counted(os.unlink)
shutil.rmtree, zoo.storage.commit._write = counted(shutil.rmtree), counted(zoo.storage.commit._write)
real_commit = zoo.dataset.pack.commit_pack

def commit_pack(*args, **kwargs):
    active[0] = True  # count only the commit's steps: building is thrown away on any failure
    return real_commit(*args, **kwargs)

zoo.dataset.pack.commit_pack = commit_pack
for n in range(1, 100):  # one forked process per kill point (imports once: seconds, not minutes)
    folder = os.path.join(work, f"zoo{n}")
    shutil.copytree(source, folder, copy_function=shutil.copyfile)
    child = os.fork()
    if child == 0:
        kill_at[0] = n
        code = main(["pack", folder, "--shard-mb", shard_mb])
        sys.stdout.flush()
        os._exit(code)
    _, status = os.waitpid(child, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    print("outcome", n, "killed" if killed else os.waitstatus_to_exitcode(status), flush=True)
    if not killed:
        break
"""


def run_packs(source: Path, work: Path, shard_mb: str = NEW_SHARD_MB) -> list[tuple[int, str]]:
    """Packs a copy of `source` once per kill point, each in its own process; (N, outcome) for each."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", KILL_AT, str(source), str(work), shard_mb], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return [(int(n), outcome) for _, n, outcome in (line.split() for line in result.stdout.splitlines()
                                                     if line.startswith("outcome "))]


def state(folder: Path) -> dict:
    """What each reader sees: the manifest's checked dataset hash and model ids, the card's shards."""
    manifest = read_manifest(folder)
    entry = manifest["configs"][CONFIG]
    ids = {split: sorted(read_metadata(folder, CONFIG, split)["model_id"]) for split in entry["splits"]}
    card = (folder / "README.md").read_text()
    card_files = sorted(line.split("- ", 1)[1] for line in card.split("\n---\n", 1)[0].splitlines()
                        if line.strip().startswith("- data/"))
    return {"hash": verified_dataset_hash(folder, CONFIG), "ids": ids, "card_files": card_files}


def listing(folder: Path) -> dict:
    entry = read_manifest(folder)["configs"][CONFIG]
    return {"hash": entry["dataset_hash"], "files": sorted(f["path"] for f in entry["files"])}


@pytest.fixture
def repacked(tiny_zoo, tmp_path) -> dict:
    """The old pack's and the new pack's listings (the new one made on a throwaway copy)."""
    copy = Path(shutil.copytree(tiny_zoo, tmp_path / "new", copy_function=shutil.copyfile))
    pack(copy, max_shard_bytes=int(float(NEW_SHARD_MB) * 2**20))
    return {"old": listing(tiny_zoo), "new": listing(copy)}


def test_a_kill_at_any_step_of_the_commit_leaves_one_complete_pack(tiny_zoo, tmp_path, repacked, offline_hf):
    old, new = repacked["old"], repacked["new"]
    assert old["hash"] != new["hash"] and len(new["files"]) > len(old["files"])
    ids = None
    seen = set()
    outcomes = run_packs(tiny_zoo, tmp_path)
    assert outcomes[-1][1] == "0" and all(outcome == "killed" for _, outcome in outcomes[:-1]), outcomes
    for kill_at, _ in outcomes[:-1]:
        folder = tmp_path / f"zoo{kill_at}"
        report = verify(folder)
        assert report.ok, (kill_at, report.problems)
        seen_state = state(folder)
        which = "old" if seen_state["hash"] == old["hash"] else "new"
        assert seen_state["hash"] == repacked[which]["hash"], kill_at
        ids = ids or seen_state["ids"]
        assert seen_state["ids"] == ids  # every row once, whichever pack
        card_pack = "old" if seen_state["card_files"] == old["files"] else "new"
        assert seen_state["card_files"] == repacked[card_pack]["files"], kill_at  # the card names one whole pack
        assert all((folder / path).is_file() for path in seen_state["card_files"])
        seen.add((which, card_pack))
        if kill_at % 4 == 1 or card_pack != which:  # `datasets` reads the card's pack (a few states: seconds each)
            import datasets

            loaded = datasets.load_dataset(str(folder), CONFIG, cache_dir=str(tmp_path / f"hf{kill_at}"))
            assert {s: sorted(loaded[s]["model_id"]) for s in loaded} == ids
        pack(folder, max_shard_bytes=int(float(NEW_SHARD_MB) * 2**20))  # the next pack: clean, nothing left over
        assert listing(folder) == new
        on_disk = sorted(p.relative_to(folder).as_posix() for p in (folder / "data").rglob("*"))
        assert on_disk == sorted([f"data/{CONFIG}", *new["files"]]), kill_at
        final = verify(folder)
        assert final.ok and not final.warnings, (final.problems, final.warnings)
    folder = tmp_path / f"zoo{outcomes[-1][0]}"
    assert len(outcomes) > 8  # every move, the manifest, the card and each removal was a kill point
    assert ("old", "old") in seen and ("new", "new") in seen and ("new", "old") in seen
    assert listing(folder) == new and verify(folder).ok


def test_packing_unchanged_staging_twice_gives_identical_bytes(tiny_zoo, tiny_zoo_copy):
    before = {p.relative_to(tiny_zoo_copy): p.read_bytes() for p in sorted(tiny_zoo_copy.rglob("*"))
              if p.is_file() and "staging" not in p.parts and p.name != ".nfnzoo.lock"}
    pack(tiny_zoo_copy)
    after = {p.relative_to(tiny_zoo_copy): p.read_bytes() for p in sorted(tiny_zoo_copy.rglob("*"))
             if p.is_file() and "staging" not in p.parts and p.name != ".nfnzoo.lock"}
    assert after == before  # same shards under the same names, same manifest and card


def test_the_next_pack_removes_an_interrupted_packs_leftovers(tiny_zoo_copy):
    shard = tiny_zoo_copy / read_manifest(tiny_zoo_copy)["configs"][CONFIG]["files"][0]["path"]
    leftover = shard.with_name("train-00000-of-00002-0123abcd.parquet")
    shutil.copyfile(shard, leftover)
    building = tiny_zoo_copy / "data" / f".{CONFIG}.building"
    building.mkdir()
    shutil.copyfile(shard, building / "train-00000-of-00001-deadbeef.parquet")
    report = verify(tiny_zoo_copy)
    assert report.ok and any(w.startswith(f"data/{CONFIG}/{leftover.name}: not listed") for w in report.warnings)
    pack(tiny_zoo_copy)
    assert not leftover.exists() and not building.exists()
    final = verify(tiny_zoo_copy)
    assert final.ok and not final.warnings


def test_publish_refuses_a_card_naming_other_shards_than_the_manifest(tiny_zoo, tiny_zoo_copy):
    from zoo.hub.publish import PublishError, publish

    card = (tiny_zoo_copy / "README.md").read_text()  # a pack killed between its manifest and its card
    pack(tiny_zoo_copy, max_shard_bytes=int(float(NEW_SHARD_MB) * 2**20))
    for old in listing(tiny_zoo)["files"]:
        shutil.copyfile(tiny_zoo / old, tiny_zoo_copy / old)
    (tiny_zoo_copy / "README.md").write_text(card)
    report = verify(tiny_zoo_copy)
    assert report.ok and any("the card names other shards" in w for w in report.warnings)
    with pytest.raises(PublishError, match="the card names other shards than manifest.json; re-run `nfnzoo pack"):
        publish(tiny_zoo_copy, "org/zoo", api=object())  # refused before the Hub is asked anything


def test_an_old_pack_with_plain_shard_names_verifies_and_loads(tiny_zoo_copy):
    manifest = read_manifest(tiny_zoo_copy)
    for entry in manifest["configs"][CONFIG]["files"]:  # as packs before the content tag named them
        plain = entry["path"].rsplit("-", 1)[0] + ".parquet"
        (tiny_zoo_copy / entry["path"]).rename(tiny_zoo_copy / plain)
        entry["path"] = plain
    from zoo.dataset.card import render_card
    from zoo.storage.integrity import dataset_hash_of

    manifest["configs"][CONFIG]["dataset_hash"] = dataset_hash_of(manifest["configs"][CONFIG]["files"])
    (tiny_zoo_copy / MANIFEST).write_text(__import__("json").dumps(manifest, indent=2, sort_keys=True))
    (tiny_zoo_copy / "README.md").write_text(render_card(manifest))
    assert verify(tiny_zoo_copy).ok
    assert len(read_metadata(tiny_zoo_copy, CONFIG, "train")) == manifest["configs"][CONFIG]["splits"]["train"]
    pack(tiny_zoo_copy)  # the next pack renames them: the plain ones are retired after the commit
    assert all("-of-00001-" in p.name for p in (tiny_zoo_copy / "data" / CONFIG).iterdir())
    assert verify(tiny_zoo_copy).ok


# --- a full disk: a real ENOSPC on a small tmpfs -------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True,
                            text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount: Path, leave: int) -> None:
    """Fills the tmpfs so that `leave` bytes stay free (tmpfs counts whole pages)."""
    stats = os.statvfs(mount)
    free = stats.f_bavail * stats.f_frsize
    (mount / "filler").write_bytes(b"\0" * max(0, free - leave))


def _pack_cli(folder: Path, shard_mb: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.cli", "pack", str(folder), "--shard-mb", shard_mb],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300)


def _new_shard_bytes(tiny_zoo: Path, tmp_path: Path, shard_mb: str) -> int:
    """Bytes (in whole tmpfs pages) of the shards a pack at `shard_mb` writes, made on a throwaway copy."""
    copy = Path(shutil.copytree(tiny_zoo, tmp_path / "sizes", copy_function=shutil.copyfile))
    pack(copy, max_shard_bytes=int(float(shard_mb) * 2**20))
    new = listing(copy)["files"]
    assert not set(new) & set(listing(tiny_zoo)["files"])  # no same-named shard frees space at the move
    return sum(-(-(copy / path).stat().st_size // 4096) * 4096 for path in new)


@pytest.mark.parametrize("room", ["shards", "nothing"])
def test_a_full_disk_leaves_the_old_pack_as_it_was(tiny_zoo, small_disk, tmp_path, room):
    shard_mb = "0.04"  # two rows a shard: every new shard differs from the old ones
    new_bytes = _new_shard_bytes(tiny_zoo, tmp_path, shard_mb)
    folder = Path(shutil.copytree(tiny_zoo, small_disk / "zoo", copy_function=shutil.copyfile))
    before = {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".nfnzoo.lock"}
    # room for the new shards and one page, not for the ~10 kB manifest; or for nothing but the lock's page
    _fill(small_disk, new_bytes + 4096 if room == "shards" else 4096)
    result = _pack_cli(folder, shard_mb)
    assert result.returncode == 1, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("nfnzoo pack: error: ") and "No space left on device" in line, line
    named = f"{folder}/manifest.json:" if room == "shards" else f"{folder}/data/.{CONFIG}.building/"
    assert named in line, line
    (small_disk / "filler").unlink()
    after = {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".nfnzoo.lock"}
    assert after == before  # nothing added, nothing lost: the new shards were taken back
    report = verify(folder)
    assert report.ok and not report.warnings, (report.problems, report.warnings)
