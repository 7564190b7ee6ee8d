"""Writers never follow links (`zoo.storage.nofollow`): real symbolic links, hard links and FIFOs
planted in a zoo folder, against the module and against the real CLI (`import`, `pack`, `generate`).

Each case checks that the victim outside the folder is untouched, the exit code, and the one line
naming the link; ordinary folders are the negative control.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from small_cnn_fixture import make_zoo
from zoo.storage import nofollow
from zoo.storage.atomic import write_text_atomic
from zoo.storage.lock import LOCK_FILE, FolderLock
from zoo.validation.inputs import InputError

CONFIG = "small-cnn-zoo-mnist"  # the small-cnn-zoo fixture's config
VICTIM_TEXT = "the victim's own bytes\n"
TIMEOUT_S = 120


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    return victim


def _link_message(path) -> str:
    return f"{path} is a symbolic link; nfnzoo never writes through links: remove it"


# --- the module -----------------------------------------------------------------------------------

def test_check_refuses_a_link_as_the_last_or_a_middle_component(tmp_path):
    root, victim = tmp_path / "root", tmp_path / "elsewhere"
    (root / "a").mkdir(parents=True)
    victim.mkdir()
    (root / "a" / "last").symlink_to(victim)
    with pytest.raises(nofollow.LinkRefused, match="is a symbolic link"):
        nofollow.check(root, root / "a" / "last")
    with pytest.raises(InputError, match=str(root / "a" / "last")):
        nofollow.check(root, root / "a" / "last" / "below" / "file.txt")  # a middle component
    assert nofollow.check(root, root / "a" / "new" / "file.txt") == root / "a" / "new" / "file.txt"  # control


def test_the_root_itself_may_be_a_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "named").symlink_to(real)
    nofollow.makedirs(tmp_path / "named", tmp_path / "named" / "data" / "x")
    assert (real / "data" / "x").is_dir()


def test_makedirs_and_atomic_writes_never_pass_a_link(tmp_path):
    root, victim = tmp_path / "root", tmp_path / "victim"
    root.mkdir()
    victim.mkdir()
    (root / "data").symlink_to(victim)
    with pytest.raises(nofollow.LinkRefused, match=str(root / "data")):
        nofollow.makedirs(root, root / "data" / "config")
    with pytest.raises(nofollow.LinkRefused):
        write_text_atomic(root / "data" / "manifest.json", "{}", root=root)
    (root / "card.md").symlink_to(_victim(tmp_path))
    with pytest.raises(nofollow.LinkRefused, match=str(root / "card.md")):
        write_text_atomic(root / "card.md", "new", root=root)
    assert list(victim.iterdir()) == [] and (tmp_path / "victim.txt").read_text() == VICTIM_TEXT
    write_text_atomic(root / "sub" / "ok.md", "fine", root=root)  # the negative control
    assert (root / "sub" / "ok.md").read_text() == "fine"


def test_atomic_writes_below_a_held_lock_refuse_links_without_being_told_the_root(tmp_path):
    root, victim = tmp_path / "board", tmp_path / "victim"
    root.mkdir()
    victim.mkdir()
    (root / "entries").symlink_to(victim)
    with FolderLock(root, "test"):
        with pytest.raises(nofollow.LinkRefused, match=str(root / "entries")):
            write_text_atomic(root / "entries" / "entry.json", "{}")
    write_text_atomic(root / "entries" / "entry.json", "{}")  # no lock held: a path alone is not confined
    assert (victim / "entry.json").exists()


def test_rmtree_refuses_a_link_and_never_descends_through_one(tmp_path):
    root, victim = tmp_path / "root", tmp_path / "victim"
    root.mkdir()
    victim.mkdir()
    (victim / "keep.parquet").write_bytes(b"keep")
    (root / "scratch").symlink_to(victim)
    with pytest.raises(nofollow.LinkRefused, match=str(root / "scratch")):
        nofollow.rmtree(root, root / "scratch")
    nofollow.rmtree(root, root / "scratch", ignore_errors=True)  # a cleanup leaves the link alone
    (root / "real" / "deeper").mkdir(parents=True)
    (root / "real" / "deeper" / "inside").symlink_to(victim)
    nofollow.rmtree(root, root / "real")
    assert not (root / "real").exists() and (victim / "keep.parquet").read_bytes() == b"keep"


def test_lock_file_rules(tmp_path):
    root = tmp_path / "zoo"
    root.mkdir()
    victim = _victim(tmp_path)
    lock = root / LOCK_FILE
    lock.symlink_to(victim)
    with pytest.raises(nofollow.LinkRefused, match=f"{lock} is a symbolic link"):
        FolderLock(root, "test").acquire()
    lock.unlink()
    os.link(victim, lock)
    with pytest.raises(nofollow.LinkRefused, match=f"{lock} has 2 hard links"):
        FolderLock(root, "test").acquire()
    lock.unlink()
    os.mkfifo(lock)
    with pytest.raises(nofollow.LinkRefused, match="not a regular file"):
        FolderLock(root, "test").acquire()  # refused at once: nothing blocks on the pipe
    lock.unlink()
    assert victim.read_text() == VICTIM_TEXT
    with FolderLock(root, "test"):  # the negative control: created, then an existing file reused
        assert lock.is_file() and '"command": "test"' in lock.read_text()
    with FolderLock(root, "again"):
        assert '"command": "again"' in lock.read_text()


def test_confine_is_one_rule_for_readers_and_writers(tmp_path):
    root, victim = tmp_path / "zoo", tmp_path / "victim"
    (root / "data" / "inside").mkdir(parents=True)
    victim.mkdir()
    (root / "data" / "out").symlink_to(victim)
    (root / "data" / "alias").symlink_to(root / "data" / "inside")
    for follow in (True, False):
        with pytest.raises(InputError, match="symbolic link"):
            nofollow.confine(root, "data/out/x.parquet", "files[0]", follow=follow)
        with pytest.raises(InputError, match="not a relative path"):
            nofollow.confine(root, "/etc/passwd", "files[0]", follow=follow)
        assert nofollow.confine(root, "data/inside/x.parquet", "files[0]", follow=follow) == \
            root / "data" / "inside" / "x.parquet"
    # a link that stays inside: a reader may follow it (a Hub snapshot is all links), a writer may not
    assert nofollow.confine(root, "data/alias/x.parquet", "f", follow=True) == root / "data" / "alias" / "x.parquet"
    with pytest.raises(nofollow.LinkRefused):
        nofollow.confine(root, "data/alias/x.parquet", "f", follow=False)


# --- the CLI --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("small_cnn_zoo") / "src"
    make_zoo(folder, runs=4, steps=(0, 86))
    return folder


def _run(cli, argv: list[str], tmp_path: Path) -> tuple[int, str]:
    working = tmp_path / "cwd"
    working.mkdir(exist_ok=True)
    home = tmp_path / "hf_home"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home),
           "RAY_AUTH_MODE": "disabled", "PYTHONWARNINGS": "ignore"}
    try:
        done = cli.run([str(a) for a in argv], cwd=working, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nfnzoo {argv[0]} did not answer within {TIMEOUT_S} s (blocked on a FIFO?)")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.returncode, done.stderr.strip()


def _one_line(stderr: str, command: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nfnzoo {command}: error: "), stderr[-2000:]
    return lines[0]


def _says(stderr: str, command: str, message: str) -> bool:
    """One error line ending with `message` (`import` may put its source's path before it)."""
    return _one_line(stderr, command).endswith(message)


def _planted_lock(out: Path, kind: str, victim: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_FILE
    if kind == "symlink":
        lock.symlink_to(Path("..") / victim.name if victim.parent == out.parent else victim)
    elif kind == "hardlink":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)
    return lock


LOCK_MESSAGES = {"symlink": "is a symbolic link; nfnzoo never writes through links: remove it",
                 "hardlink": "has 2 hard links; nfnzoo never writes through links",
                 "fifo": "is not a regular file (a pipe, socket or device)"}


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_import_refuses_a_planted_lock_file(kind, cli, source, tmp_path):
    victim = _victim(tmp_path)
    out = tmp_path / "OUT"
    lock = _planted_lock(out, kind, victim)
    code, stderr = _run(cli, ["import", "small-cnn-zoo", source, "--out", out], tmp_path)
    assert code == 1
    line = _one_line(stderr, "import")
    assert str(lock) in line and LOCK_MESSAGES[kind] in line, line
    assert victim.read_text() == VICTIM_TEXT
    assert not (out / "manifest.json").exists()


def test_pack_refuses_a_linked_lock_file(cli, tiny_zoo_copy, tmp_path):
    victim = _victim(tmp_path)
    lock = tiny_zoo_copy / LOCK_FILE
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim)
    code, stderr = _run(cli, ["pack", tiny_zoo_copy], tmp_path)
    assert code == 1 and _one_line(stderr, "pack") == f"nfnzoo pack: error: {_link_message(lock)}"
    assert victim.read_text() == VICTIM_TEXT


def test_generate_refuses_a_linked_lock_file(cli, tmp_path):
    victim = _victim(tmp_path)
    out = tmp_path / "OUT"
    lock = _planted_lock(out, "symlink", victim)
    code, stderr = _run(cli, ["generate", "cnn-mnist", "--profile", "tiny", "--out", out], tmp_path)
    assert code == 1 and _one_line(stderr, "generate") == f"nfnzoo generate: error: {_link_message(lock)}"
    assert victim.read_text() == VICTIM_TEXT


def _dataset_listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_import_never_moves_shards_into_or_deletes_from_a_linked_config_folder(cli, source, tmp_path):
    """`OUT/data/<config>` a link to another dataset's folder: refused before a shard moves or a file goes."""
    other = tmp_path / "other-dataset" / "data" / CONFIG
    other.mkdir(parents=True)
    (other / "train-00000-of-00001-deadbeef.parquet").write_bytes(b"another dataset's shard")
    (other / "notes.txt").write_text("kept")
    before = _dataset_listing(other.parent.parent)
    out = tmp_path / "OUT"
    (out / "data").mkdir(parents=True)
    (out / "data" / CONFIG).symlink_to(other)
    code, stderr = _run(cli, ["import", "small-cnn-zoo", source, "--out", out], tmp_path)
    assert code == 1
    assert _says(stderr, "import", _link_message(out / "data" / CONFIG)), stderr
    assert _dataset_listing(other.parent.parent) == before
    assert not (out / "manifest.json").exists()


def test_import_refuses_a_linked_shard_beside_the_config_and_a_linked_data_folder(cli, source, tmp_path):
    victim = _victim(tmp_path)
    out = tmp_path / "OUT"
    (out / "data" / CONFIG).mkdir(parents=True)
    planted = out / "data" / CONFIG / "train-00000-of-00009-00000000.parquet"
    planted.symlink_to(victim)  # an unlisted "leftover" the commit would otherwise remove
    code, stderr = _run(cli, ["import", "small-cnn-zoo", source, "--out", out], tmp_path)
    assert code == 1 and _says(stderr, "import", _link_message(planted)), stderr
    assert victim.read_text() == VICTIM_TEXT and planted.is_symlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out2 = tmp_path / "OUT2"
    out2.mkdir()
    (out2 / "data").symlink_to(elsewhere)
    code, stderr = _run(cli, ["import", "small-cnn-zoo", source, "--out", out2], tmp_path)
    assert code == 1 and _link_message(out2 / "data") in _one_line(stderr, "import")
    assert list(elsewhere.iterdir()) == []


def test_import_into_an_ordinary_folder_still_works(cli, source, tmp_path):
    """The negative control: the same import into a plain folder (twice: the second replaces the first)."""
    out = tmp_path / "OUT"
    for _ in range(2):
        code, stderr = _run(cli, ["import", "small-cnn-zoo", source, "--out", out], tmp_path)
        assert code == 0, stderr
    assert (out / "manifest.json").is_file() and any((out / "data" / CONFIG).glob("*.parquet"))


def test_pack_without_a_manifest_refuses_a_linked_config_folder(cli, tiny_zoo_copy, tmp_path):
    """A received folder (specs and staging, no manifest) whose data/<config> leads to another dataset."""
    other = tmp_path / "other-dataset" / "data" / "cnn-mnist"
    other.mkdir(parents=True)
    (other / "train-00000-of-00001-deadbeef.parquet").write_bytes(b"another dataset's shard")
    before = _dataset_listing(other.parent.parent)
    (tiny_zoo_copy / "manifest.json").unlink()
    (tiny_zoo_copy / "README.md").unlink()
    shutil.rmtree(tiny_zoo_copy / "data" / "cnn-mnist")
    (tiny_zoo_copy / "data" / "cnn-mnist").symlink_to(other)
    code, stderr = _run(cli, ["pack", tiny_zoo_copy], tmp_path)
    link = tiny_zoo_copy / "data" / "cnn-mnist"
    assert code == 1 and _one_line(stderr, "pack") == f"nfnzoo pack: error: {_link_message(link)}"
    assert _dataset_listing(other.parent.parent) == before
    assert not (tiny_zoo_copy / "manifest.json").exists()


@pytest.mark.parametrize("case", ["file", "below-a-file", "cannot-be-created"])
def test_out_that_cannot_be_a_folder_is_one_line(case, cli, source, tmp_path):
    (tmp_path / "file").write_text("a file")
    out = {"file": tmp_path / "file", "below-a-file": tmp_path / "file" / "zoo",
           "cannot-be-created": tmp_path / ("n" * 300) / "zoo"}[case]
    expected = {"file": f"cannot write to {out}: it is a file, not a folder",
                "below-a-file": f"cannot write to {out}: it is below {tmp_path / 'file'}, which is a "
                                "file, not a folder",
                "cannot-be-created": "File name too long"}[case]  # the CLI shortens a line naming a 300-letter path
    for argv in (["import", "small-cnn-zoo", source, "--out", out],
                 ["generate", "cnn-mnist", "--profile", "tiny", "--out", out]):
        code, stderr = _run(cli, argv, tmp_path)
        assert code == 1 and _says(stderr, argv[0], expected) and "cannot write to" in stderr, stderr
    assert (tmp_path / "file").read_text() == "a file"


@pytest.mark.parametrize("part", ["staging", "specs"])
def test_generate_refuses_a_linked_staging_or_specs_folder(part, cli, tmp_path):
    """Refused before Ray starts: nothing is staged or saved in the folder the link leads to."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "OUT"
    out.mkdir()
    (out / part).symlink_to(elsewhere)
    code, stderr = _run(cli, ["generate", "cnn-mnist", "--profile", "tiny", "--out", out], tmp_path)
    assert code == 1 and _one_line(stderr, "generate") == f"nfnzoo generate: error: {_link_message(out / part)}"
    assert list(elsewhere.iterdir()) == []


def test_pack_refuses_a_linked_staging_folder(cli, tiny_zoo_copy, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.move(tiny_zoo_copy / "staging", elsewhere)
    before = _dataset_listing(elsewhere)
    (tiny_zoo_copy / "staging").symlink_to(elsewhere)
    manifest = (tiny_zoo_copy / "manifest.json").read_bytes()
    code, stderr = _run(cli, ["pack", tiny_zoo_copy], tmp_path)
    link = tiny_zoo_copy / "staging"
    assert code == 1 and _one_line(stderr, "pack") == f"nfnzoo pack: error: {_link_message(link)}"
    assert _dataset_listing(elsewhere) == before and (tiny_zoo_copy / "manifest.json").read_bytes() == manifest


def test_export_refuses_a_link_planted_at_its_temporary_name(tiny_zoo, tmp_path):
    """`nfnzoo export small-cnn-zoo` writes temporaries beside its output: a link there is refused, the victim kept."""
    from zoo.imports.small_cnn_zoo_export import export_zoo
    from zoo.storage.nofollow import LinkRefused

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    out = tmp_path / "export"
    out.mkdir()
    (out / ".layout.csv.tmp").symlink_to(victim)
    with pytest.raises(LinkRefused, match=r"\.layout\.csv\.tmp is a symbolic link"):
        export_zoo(tiny_zoo, out)
    assert victim.read_text() == "keep me\n"
    (out / ".layout.csv.tmp").unlink()
    export_zoo(tiny_zoo, out)  # the negative control: without the link the export writes its files
    assert (out / "layout.csv").is_file() and not (out / "layout.csv").is_symlink()
