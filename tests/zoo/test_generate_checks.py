"""`nfnzoo generate` refuses nonsense options and unwritable output folders before Ray starts."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from zoo.cli import build_parser, main
from zoo.storage.folder import check_writable

NFNZOO = Path(sys.executable).parent / "nfnzoo"


def _generate_parser() -> argparse.ArgumentParser:
    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return subparsers.choices["generate"]


def test_every_generate_option_has_a_help_text():
    undocumented = [a.dest for a in _generate_parser()._actions
                    if not isinstance(a, argparse._HelpAction) and not (a.help and a.help != argparse.SUPPRESS)]
    assert not undocumented


@pytest.mark.parametrize("option, value, message", [
    ("--num-cpus", "0", "argument --num-cpus: must be at least 1, got 0"),  # Ray took 0 for "all"
    ("--num-cpus", "-3", "argument --num-cpus: must be at least 1, got -3"),
    ("--runs-per-trial", "0", "argument --runs-per-trial: must be at least 1, got 0"),
    ("--max-failures", "-1", "argument --max-failures: must be at least 0, got -1"),
    ("--population-size", "0", "argument --population-size: must be at least 1, got 0"),
    ("--shard-mb", "0", "argument --shard-mb: must be a positive number, got 0"),
    ("--shard-mb", "nan", "argument --shard-mb: must be a positive number, got nan"),
    ("--num-cpus", "two", "argument --num-cpus: expected an integer, got 'two'"),
])
def test_nonsense_numbers_are_a_one_line_usage_error(option, value, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["generate", "cnn-mnist", "--profile", "tiny", "--out", str(tmp_path / "out"), option, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"nfnzoo generate: error: {message}", err
    assert not (tmp_path / "out").exists()


def test_check_writable_makes_the_folder_and_names_a_file_in_the_way(tmp_path):
    assert check_writable(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()
    assert not list((tmp_path / "a" / "b").iterdir())  # the probe is gone
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=f"cannot write to {tmp_path / 'file' / 'out'}: it is below "
                                         f"{tmp_path / 'file'}, which is a file, not a folder"):
        check_writable(tmp_path / "file" / "out")
    with pytest.raises(ValueError, match="it is a file, not a folder"):
        check_writable(tmp_path / "file")


def test_generate_below_a_regular_file_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code = main(["generate", "cnn-mnist", "--profile", "tiny", "--out", str(tmp_path / "file" / "zoo")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.strip() == (f"nfnzoo generate: error: cannot write to {tmp_path / 'file' / 'zoo'}: it is below "
                           f"{tmp_path / 'file'}, which is a file, not a folder")


@pytest.fixture
def shared_folder():
    """A folder an unprivileged user can reach (pytest's tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="nfnzoo-unwritable-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755)
    shutil.rmtree(folder)


def _run_unprivileged(args: list[str]) -> tuple[int, str]:
    """(exit code, stderr) of the CLI run by a user whom permission bits stop.

    Not root: a subprocess. As root (for whom permission bits do not count): a forked child
    that drops to `nobody` and calls `main` in-process, so it needs no access to the
    interpreter, which may live under root's private home.
    """
    if os.geteuid() != 0:
        result = subprocess.run([str(NFNZOO), *args], capture_output=True, text=True, timeout=300,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
        return result.returncode, result.stderr
    try:
        import pwd

        nobody = pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        pytest.skip("running as root without a `nobody` user: permission bits cannot stop a write")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            os.close(read_end)
            signal.alarm(120)  # should the check ever let it through to Ray: end, do not hang
            sys.stderr = open(write_end, "w")  # no `with`: the child exits below
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            code = main(args)
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as stream:
        output = stream.read()
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), output


@pytest.mark.parametrize("read_only", [".", "staging", "data"])
def test_unwritable_output_folders_are_named_before_ray_starts(shared_folder, read_only):
    out = shared_folder / "zoo"
    for part in ("staging", "data", "specs"):
        (out / part).mkdir(parents=True)
    for path in (out, *out.iterdir()):
        path.chmod(0o777)  # world-writable: writable by the unprivileged user too...
    blocked = (out / read_only).resolve()
    # ...but this
    blocked.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    code, err = _run_unprivileged(["generate", "cnn-mnist", "--profile", "tiny", "--out", str(out), "--num-cpus", "1"])
    assert code == 1, err
    assert err.strip() == f"nfnzoo generate: error: cannot write to {blocked}: Permission denied"
    assert not list((out / "specs").iterdir()) and not list((out / "staging").iterdir())  # checked first


def test_pack_into_a_read_only_data_folder_is_named(shared_folder, tiny_zoo):
    out = Path(shutil.copytree(tiny_zoo, shared_folder / "zoo", copy_function=shutil.copyfile))
    for path in [out, *out.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    (out / "data").chmod(0o555)
    code, err = _run_unprivileged(["pack", str(out)])
    assert code == 1, err
    assert err.strip() == f"nfnzoo pack: error: cannot write to {out / 'data'}: Permission denied"
