"""Issue 48, round 2 (zoo side): a hostile tester's cases, each through the real CLI on real files.

- `nfnzoo verify Z [--recompute 1]` sizes every architecture the manifest declares (the family's arithmetic
  `member_size` within `zoo.validation.bounds`) before anything builds one: an imported zoo whose
  `architectures.*.architecture` declares 2.3e12 parameters, and a generated zoo whose `spec.architecture`
  does, are refused in one line naming manifest.json and the key (under a memory limit, so a regression that
  builds the member fails the test, not the machine); the unedited zoo verifies (the negative control).
- `nfnzoo import ... --out Z` where Z/manifest.json is a folder or a FIFO: one line naming it and what it is
  (never a bare `FileNotFoundError`); into an empty Z the import succeeds (the control).
- `nfnzoo pack G` where G/specs/<name>.json is a link leading outside G: refused in one line; a regular spec (the
  control) packs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from memory_limit import GIB
from small_cnn_fixture import make_zoo as make_cnn_zoo

HUGE_CNN = {"channels": 16000, "num_conv_layers": 1000}  # 2.3e12 parameters, each width within MAX_LAYER_WIDTH


def _environment(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "hf"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home),
            "HF_HUB_CACHE": str(home / "hub"), "RAY_AUTH_MODE": "disabled", "PYTHONWARNINGS": "ignore"}


@pytest.fixture
def cli(cli, tmp_path):  # wraps the session's forked CLI (tests/conftest.py)
    """cli(*argv, limited=False) -> (exit code, stdout, stderr) of `nfnzoo ARGV`, run in an empty folder;
    `limited`: under a 2 GiB memory limit, asserting the command was not killed for memory."""
    working = tmp_path / "cwd"
    working.mkdir()

    def run(*argv: str, limited: bool = False) -> tuple[int | None, str, str]:
        if limited:
            result = cli.run_limited(list(argv), cwd=working, env=_environment(tmp_path), timeout=180,
                                        limit_bytes=2 * GIB)
            assert not result.oom_killed, result.describe()
            return result.returncode, result.stdout, result.stderr
        done = cli.run(list(argv), cwd=working, env=_environment(tmp_path), timeout=180)
        return done.returncode, done.stdout, done.stderr

    return run


def _error_lines(stderr: str, command: str) -> list[str]:
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert lines and all(line.startswith(f"nfnzoo {command}: error: ") or line.startswith("  ") for line in lines), \
        stderr[-3000:]
    return lines


@pytest.fixture
def imported_zoo(tmp_path, cli) -> Path:
    source = tmp_path / "mnist"
    make_cnn_zoo(source, runs=2, steps=(0, 86), split_file=False)
    out = tmp_path / "Z"
    code, _, stderr = cli("import", "small-cnn-zoo", str(source), "--out", str(out), "--config", "zz")
    assert code == 0, stderr
    return out


def _edit_manifest(folder: Path, edit) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.chmod(0o644)
    path.write_text(json.dumps(manifest))


# --- 2: verify sizes every declared architecture ---------------------------------------------------

def _verify_refuses(cli, folder: Path, extra: str, where: str) -> None:
    """`verify FOLDER` and `verify FOLDER --<extra> 1`, under a memory limit, each exit 1 with the line
    naming the manifest's key `where` and the member bound."""
    for argv in (["verify", str(folder)], ["verify", str(folder), f"--{extra}", "1"]):
        code, stdout, stderr = cli(*argv, limited=True)
        lines = _error_lines(stderr, "verify")
        wanted = f"{folder / 'manifest.json'}: {where}: architecture: declares a member"
        assert any(wanted in line and "MAX_MEMBER_PARAMETERS" in line for line in lines), (argv, stderr)
        assert code == 1, (argv, code, stderr)


def test_verify_refuses_an_imported_architecture_too_large_to_build(imported_zoo, cli):
    code, stdout, stderr = cli("verify", str(imported_zoo))
    assert code == 0, stderr  # the negative control: the import as written verifies

    keys = []

    def enlarge(manifest: dict) -> None:
        for key, described in manifest["configs"]["zz"]["architectures"].items():
            described["architecture"].update(HUGE_CNN)
            keys.append(key)

    _edit_manifest(imported_zoo, enlarge)
    _verify_refuses(cli, imported_zoo, "recompute", f"configs.zz.architectures.{keys[0]}")


def test_verify_refuses_a_generated_spec_architecture_too_large_to_build(tiny_zoo_copy, cli):
    manifest = json.loads((tiny_zoo_copy / "manifest.json").read_text())
    (name,) = manifest["configs"]
    _edit_manifest(tiny_zoo_copy, lambda m: m["configs"][name]["spec"]["architecture"].update(HUGE_CNN))
    _verify_refuses(cli, tiny_zoo_copy, "retrain", f"configs.{name}.spec")


def test_verify_names_an_architecture_the_family_cannot_size(imported_zoo, cli):
    def corrupt(manifest: dict) -> None:
        for described in manifest["configs"]["zz"]["architectures"].values():
            described["architecture"]["channels"] = "sixteen"

    _edit_manifest(imported_zoo, corrupt)
    code, _, stderr = cli("verify", str(imported_zoo))
    lines = _error_lines(stderr, "verify")
    assert any("manifest.json: configs.zz.architectures." in line and "channels" in line for line in lines), stderr
    assert code == 1


# --- 7: import into a folder whose manifest.json is not a file -------------------------------------

@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_import_over_a_manifest_that_is_not_a_file_is_one_line(kind, tmp_path, cli):
    source = tmp_path / "mnist"
    make_cnn_zoo(source, runs=2, steps=(0, 86), split_file=False)
    out = tmp_path / "Z"
    out.mkdir()
    code, _, stderr = cli("import", "small-cnn-zoo", str(source), "--out", str(out), "--config", "zz")
    assert code == 0, stderr  # the control: an import into the folder
    (out / "manifest.json").unlink()
    if kind == "folder":
        (out / "manifest.json").mkdir()
    else:
        os.mkfifo(out / "manifest.json")
    code, _, stderr = cli("import", "small-cnn-zoo", str(source), "--out", str(out), "--config", "zz2")
    lines = _error_lines(stderr, "import")
    assert len(lines) == 1, stderr
    assert f"{out / 'manifest.json'}: " in lines[0], lines[0]
    assert ("a folder" if kind == "folder" else "a FIFO") in lines[0] or "not a regular file" in lines[0], lines[0]
    assert "FileNotFoundError" not in lines[0] and lines[0] != "nfnzoo import: error: FileNotFoundError"
    assert code == 1
    assert not (out / "data" / "zz2").exists()


def test_an_error_with_no_message_is_never_a_bare_class_name(tmp_path):
    from zoo.imports.archive import import_from
    from zoo.validation.inputs import InputError

    source = tmp_path / "src"
    source.mkdir()

    def failing(folder, out):
        raise FileNotFoundError()

    with pytest.raises(InputError) as error:
        import_from(failing, source, tmp_path / "out")
    assert str(error.value).startswith(f"{source}: ") and "FileNotFoundError" in str(error.value)

    def with_message(folder, out):
        raise FileNotFoundError(f"{folder}/x.json: gone")

    with pytest.raises(InputError, match="x.json: gone"):
        import_from(with_message, source, tmp_path / "out")


# --- 9: pack reads saved specs with the readers' rule ----------------------------------------------

def _staged_copy(tiny_zoo: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "G"
    shutil.copytree(tiny_zoo, folder, copy_function=shutil.copyfile,
                    ignore=shutil.ignore_patterns("data", "manifest.json", "README.md"))
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def test_pack_refuses_a_saved_spec_linked_outside_the_folder(tiny_zoo, tmp_path, cli):
    folder = _staged_copy(tiny_zoo, tmp_path)
    (spec,) = (folder / "specs").glob("*.json")
    outside = tmp_path / "outside" / "copy.json"
    outside.parent.mkdir()
    shutil.copyfile(spec, outside)
    spec.unlink()
    spec.symlink_to(outside)
    code, _, stderr = cli("pack", str(folder))
    lines = _error_lines(stderr, "pack")
    assert len(lines) == 1 and f"{spec}: specs/{spec.name} leads outside {folder}" in lines[0], stderr
    assert code == 1
    assert not (folder / "manifest.json").exists()

    spec.unlink()
    shutil.copyfile(outside, spec)  # the control: the same spec as a regular file packs
    code, _, stderr = cli("pack", str(folder))
    assert code == 0, stderr
    assert (folder / "manifest.json").is_file()


def test_pack_refuses_a_specs_folder_linked_outside(tiny_zoo, tmp_path, cli):
    folder = _staged_copy(tiny_zoo, tmp_path)
    moved = shutil.move(folder / "specs", tmp_path / "elsewhere")
    (folder / "specs").symlink_to(moved)
    code, _, stderr = cli("pack", str(folder))
    lines = _error_lines(stderr, "pack")
    assert len(lines) == 1 and "leads outside" in lines[0], stderr
    assert code == 1
