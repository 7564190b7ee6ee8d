"""`nfnzoo import FORMAT ARCHIVE`: a zoo as downloaded (.zip, .tar.xz) imports as its folder does; a hostile
archive (a member that climbs out, an absolute path, a link) is one line naming the member, and nothing is
written, inside or beside the output folder."""

from __future__ import annotations

import tarfile
import zipfile

import pytest

from small_cnn_fixture import make_zoo
from zoo.cli import main
from zoo.storage.folder import read_manifest


def _zip(folder, path, top="mnist"):
    with zipfile.ZipFile(path, "w") as handle:
        for file in sorted(folder.iterdir()):
            handle.write(file, f"{top}/{file.name}")
        handle.writestr("__MACOSX/._mnist", b"")  # what macOS's archiver adds beside the top folder
    return path


def _leftovers(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("archives")
    make_zoo(root / "mnist", runs=4, steps=(0, 86))
    return root / "mnist"


def test_a_zip_and_a_tar_xz_import_as_their_folder(source, tmp_path, capsys):
    assert main(["import", "small-cnn-zoo", str(source), "--out", str(tmp_path / "folder")]) == 0
    archive = _zip(source, tmp_path / "mnist.zip")
    assert main(["import", "small-cnn-zoo", str(archive), "--out", str(tmp_path / "zipped")]) == 0
    tarred = tmp_path / "mnist.tar.xz"
    with tarfile.open(tarred, "w:xz") as handle:
        handle.add(source, arcname="mnist")
    assert main(["import", "small-cnn-zoo", str(tarred), "--out", str(tmp_path / "tarred")]) == 0
    hashes = {name: read_manifest(tmp_path / name)["configs"]["small-cnn-zoo-mnist"]["dataset_hash"]
              for name in ("folder", "zipped", "tarred")}
    assert len(set(hashes.values())) == 1, hashes
    assert _leftovers(tmp_path) == []  # the scratch folders are gone


@pytest.mark.parametrize("member, said", [("../escape.txt", "a path that leaves the folder"),
                                          ("/etc/escape.txt", "an absolute path"),
                                          ("mnist/link", "a link or special file")])
def test_a_hostile_member_is_one_line_and_nothing_is_written(source, tmp_path, capsys, member, said):
    archive = tmp_path / "hostile.zip"
    _zip(source, archive)
    with zipfile.ZipFile(archive, "a") as handle:
        info = zipfile.ZipInfo(member)
        if member.endswith("link"):
            info.external_attr = (0o120777 << 16)  # a symbolic link, its target the data
            handle.writestr(info, "../../outside")
        else:
            handle.writestr(info, b"x")
    out = tmp_path / "out"
    assert main(["import", "small-cnn-zoo", str(archive), "--out", str(out)]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and said in error and "hostile.zip" in error, error
    assert not out.exists() and _leftovers(tmp_path) == [] and not (tmp_path.parent / "escape.txt").exists()


def test_a_tar_link_member_is_refused(source, tmp_path, capsys):
    archive = tmp_path / "links.tar.gz"
    with tarfile.open(archive, "w:gz") as handle:
        handle.add(source, arcname="mnist")
        link = tarfile.TarInfo("mnist/layout.csv.link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        handle.addfile(link)
    assert main(["import", "small-cnn-zoo", str(archive), "--out", str(tmp_path / "out")]) == 1
    assert "mnist/layout.csv.link" in capsys.readouterr().err
    assert _leftovers(tmp_path) == []


def test_an_error_inside_the_archive_names_the_archive_not_the_scratch_folder(source, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    for file in source.iterdir():
        (broken / file.name).write_bytes(file.read_bytes())
    (broken / "weights.npy").write_bytes((broken / "weights.npy").read_bytes()[:-100])  # truncated
    archive = _zip(broken, tmp_path / "broken.zip")
    assert main(["import", "small-cnn-zoo", str(archive), "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert f"{archive}/mnist/weights.npy" in error and ".unpack-" not in error, error
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_file_that_is_not_an_archive_is_one_line(tmp_path, capsys):
    fake = tmp_path / "zoo.zip"
    fake.write_bytes(b"not a zip")
    assert main(["import", "small-cnn-zoo", str(fake), "--out", str(tmp_path / "out")]) == 1
    assert "not a readable archive" in capsys.readouterr().err
