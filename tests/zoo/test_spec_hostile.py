"""Hostile and broken specs: one-line errors, nothing written outside the output folder, no
unbounded work from a few bytes.

A spec's `name` becomes files under the output folder, so it is a safe name or an error;
`extends` reaches bundled specs and the spec's own folder tree only (unless
`--allow-extends-anywhere`); every YAML file is read within bounds (a "billion laughs" is
refused at once, a binary file is named, not quoted); the plan's size is bounded before it is
enumerated. Each case runs the real CLI (`zoo.cli.main`, or `python -m zoo.cli` where the old
behaviour was to never return) on real files.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hostile_names import HOSTILE

from zoo.cli import main

BASE = "extends: cnn-mnist\n"
LAUGHS = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
          + "".join(f"{x}: &{x} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
                    for p, x in zip("abcdefgh", "bcdefghi")))


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_error(code: int, err: str, *expected: str) -> None:
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfnzoo generate: error: "), err
    for text in expected:
        assert text in lines[0], (text, err)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder outside every output folder of the test, with a file that must survive."""
    folder = tmp_path / "victim-dir"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me\n")
    return folder


def _assert_untouched(victim: Path) -> None:
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
    assert (victim / "precious.txt").read_text() == "keep me\n"


# --- names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../victim-dir", "a/b", ".hidden", "x" * 200, "tab\tname", *HOSTILE.values()])
def test_a_spec_name_that_is_not_a_safe_file_name_is_refused(tmp_path, victim, capsys, name):
    spec = tmp_path / "specs" / "nested" / "evil.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text(BASE + f"name: {json.dumps(name)}\n")
    out = tmp_path / "out" / "zoo"
    before = sorted(tmp_path.rglob("*"))
    code, _, err = _run(["generate", str(spec), "--profile", "tiny", "--out", str(out), "--no-pack"], capsys)
    _one_line_error(code, err, str(spec), "name: ")
    assert "is not a valid name" in err or "character U+" in err, err  # the name rule, or the stored-text rule first
    _assert_untouched(victim)
    assert sorted(tmp_path.rglob("*")) == before, "nothing is written, inside --out or beside it"


def test_pack_refuses_a_staged_spec_whose_name_leads_outside(tiny_zoo_copy, tiny_zoo_spec, victim, capsys):
    """The issue's case: specs/*.json naming "../../../victim-dir" made pack rename and delete it."""
    saved = tiny_zoo_copy / "specs" / f"{tiny_zoo_spec.name}.json"
    data = json.loads(saved.read_text())
    data["name"] = os.path.relpath(victim, tiny_zoo_copy / "data")
    evil = tiny_zoo_copy / "specs" / "evil.json"
    evil.write_text(json.dumps(data))
    saved.unlink()
    before = {p: p.read_bytes() for p in (tiny_zoo_copy / "data").rglob("*") if p.is_file()}
    code, _, err = _run(["pack", str(tiny_zoo_copy)], capsys)
    assert code == 1, err
    assert err.strip().count("\n") == 0 and err.startswith("nfnzoo pack: error: "), err
    assert str(evil) in err and "is not a valid name" in err, err
    _assert_untouched(victim)
    assert {p: p.read_bytes() for p in (tiny_zoo_copy / "data").rglob("*") if p.is_file()} == before


def test_pack_refuses_a_staged_spec_whose_name_is_not_its_file_name(tiny_zoo_copy, tiny_zoo_spec, capsys):
    saved = tiny_zoo_copy / "specs" / f"{tiny_zoo_spec.name}.json"
    saved.rename(saved.with_name("other-name.json"))
    code, _, err = _run(["pack", str(tiny_zoo_copy)], capsys)
    assert code == 1 and "is not the file's name 'other-name'" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("content", [b"", b"{" * 100_000, b'{"name": 1e999}', b"\xff\xfe garbage"])
def test_a_broken_staged_spec_is_a_one_line_error_naming_it(tiny_zoo_copy, capsys, content):
    broken = tiny_zoo_copy / "specs" / "broken.json"
    broken.write_bytes(content)
    code, _, err = _run(["pack", str(tiny_zoo_copy)], capsys)
    assert code == 1 and str(broken) in err and err.count("\n") == 1, err


# --- YAML bounds --------------------------------------------------------------------------------

def test_a_billion_laughs_spec_is_refused_at_once(tmp_path, capsys):
    spec = tmp_path / "laughs.yaml"
    spec.write_text(LAUGHS)
    assert len(spec.read_bytes()) < 600
    start = time.monotonic()
    code, _, err = _run(["generate", str(spec), "--dry-run", "--out", str(tmp_path / "out")], capsys)
    assert time.monotonic() - start < 10
    _one_line_error(code, err, str(spec), "expands to more than")


def test_a_billion_laughs_behind_extends_is_refused_at_once(tmp_path, capsys):
    (tmp_path / "laughs.yaml").write_text(LAUGHS)
    spec = tmp_path / "spec.yaml"
    spec.write_text("extends: laughs.yaml\nname: fine\n")
    code, _, err = _run(["generate", str(spec), "--dry-run", "--out", str(tmp_path / "out")], capsys)
    _one_line_error(code, err, f"{spec}: extends: ", "laughs.yaml", "expands to more than")


def test_a_recursive_alias_is_refused(tmp_path, capsys):
    spec = tmp_path / "loop.yaml"
    spec.write_text("a: &a [1, *a]\n")
    code, _, err = _run(["generate", str(spec), "--dry-run", "--out", str(tmp_path / "out")], capsys)
    _one_line_error(code, err, str(spec), "recursive alias")


# --- extends ------------------------------------------------------------------------------------

SECRET = "api_token: s3cr3t-do-not-print"


@pytest.mark.parametrize("target, content, expected", [
    ("binary.bin", b"\x00\x01\xff\xfe" + SECRET.encode() + b"\x80" * 64, "not a text file"),
    ("notes.txt", f"{SECRET}\n  : : [unbalanced\n".encode(), "not valid YAML"),
    ("list.yaml", f"- {SECRET}\n".encode(), "expected a mapping at the top level"),
    ("script.py", f"import os\n{SECRET} = {{\n".encode(), "not valid YAML"),
])
def test_extends_pointing_at_a_non_spec_file_names_it_without_quoting_it(tmp_path, capsys, target, content, expected):
    (tmp_path / target).write_bytes(content)
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"extends: {target}\nname: fine\n")
    code, _, err = _run(["generate", str(spec), "--dry-run", "--out", str(tmp_path / "out")], capsys)
    _one_line_error(code, err, f"{spec}: extends: ", expected)
    assert "s3cr3t" not in err


@pytest.fixture
def outside_base(tmp_path: Path) -> Path:
    """A valid base spec outside the folder of the spec that extends it."""
    base = tmp_path / "elsewhere" / "base.yaml"
    base.parent.mkdir()
    base.write_text(BASE + "name: base-spec\n")
    return base


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "symlinked-folder"])
def test_extends_outside_the_spec_folder_needs_the_flag(tmp_path, capsys, outside_base, how):
    folder = tmp_path / "project"
    folder.mkdir()
    if how == "dotdot":
        target = "../elsewhere/base.yaml"
    elif how == "absolute":
        target = str(outside_base)
    elif how == "symlink":
        (folder / "base.yaml").symlink_to(outside_base)
        target = "base.yaml"
    else:
        (folder / "bases").symlink_to(outside_base.parent, target_is_directory=True)
        target = "bases/base.yaml"
    spec = folder / "spec.yaml"
    spec.write_text(f"extends: {target}\nname: mine\n")
    code, _, err = _run(["generate", str(spec), "--profile", "tiny", "--dry-run", "--out", str(tmp_path / "o")],
                        capsys)
    _one_line_error(code, err, f"{spec}: extends: ", "leads outside", "--allow-extends-anywhere")
    code, out, err = _run(["generate", str(spec), "--profile", "tiny", "--dry-run", "--out", str(tmp_path / "o"),
                           "--allow-extends-anywhere"], capsys)
    assert code == 0, err
    assert out.startswith("mine (tiny): 8 runs"), out


def test_extends_inside_the_spec_folder_tree_and_bundled_specs_need_no_flag(tmp_path, capsys):
    (tmp_path / "bases" / "deeper").mkdir(parents=True)
    (tmp_path / "bases" / "deeper" / "base.yaml").write_text(BASE + "name: base-spec\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("extends: bases/deeper/base.yaml\nname: mine\n")
    code, out, err = _run(["generate", str(spec), "--profile", "tiny", "--dry-run", "--out", str(tmp_path / "o")],
                          capsys)
    assert code == 0 and out.startswith("mine (tiny): 8 runs"), err


def test_extends_of_a_device_is_refused_even_with_the_flag(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("extends: /dev/zero\nname: mine\n")
    code, _, err = _run(["generate", str(spec), "--dry-run", "--out", str(tmp_path / "o"), "--allow-extends-anywhere"],
                        capsys)
    _one_line_error(code, err, f"{spec}: extends: ")


def test_an_extends_cycle_is_still_an_error(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nname: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nname: b\n")
    code, _, err = _run(["generate", str(tmp_path / "a.yaml"), "--dry-run", "--out", str(tmp_path / "o")], capsys)
    _one_line_error(code, err, "extends itself")


# --- counts -------------------------------------------------------------------------------------

def _dry_run(cli, spec: Path, tmp_path: Path):
    """`nfnzoo generate --dry-run` in a fresh process (tests/forked_cli.py), killed past its timeout: before
    the bound, these never returned."""
    return cli.run(["generate", str(spec), "--dry-run", "--out", str(tmp_path / "out")], cwd=tmp_path,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=60)


@pytest.mark.parametrize("body, key", [
    (BASE + "name: big\nsearch_space:\n  sampled:\n    count: 1000000000000\n", "search_space.sampled.count"),
    (BASE + "name: big\nseeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\nsearch_space:\n  sampled:\n    count: 5000000\n",
     "search_space: plans 50,000,000 runs"),
    ("extends: inr-mnist\nname: big\nsearch_space:\n  grid:\n    image_index: {range: [0, 9223372036854775807]}\n",
     "search_space: plans 9,223,372,036,854,775,807 runs"),
])
def test_a_plan_too_large_to_enumerate_is_refused_before_enumerating(cli, tmp_path, body, key):
    spec = tmp_path / "big.yaml"
    spec.write_text(body)
    result = _dry_run(cli, spec, tmp_path)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{spec}: {key}" in lines[0] and "at most 10,000,000" in lines[0], result.stderr


@pytest.mark.parametrize("value, key", [("9" * 400, "training.epochs"), ("-" + "9" * 400, "dataset.seed")])
def test_a_huge_integer_in_a_spec_is_a_one_line_error_naming_its_key(tmp_path, capsys, value, key):
    spec = tmp_path / "huge.yaml"
    section, field = key.split(".")
    spec.write_text(BASE + f"name: huge\n{section}:\n  {field}: {value}\n")
    code, _, err = _run(["generate", str(spec), "--dry-run", "--out", str(tmp_path / "o")], capsys)
    _one_line_error(code, err, f"{spec}: {key}: ")
    assert len(err) < 400, err


def test_save_spec_never_builds_a_path_from_an_unchecked_name(tmp_path, tiny_zoo_spec, victim):
    """A spec built in code (no validation) with a hostile name: save_spec refuses it, writes nothing."""
    import dataclasses

    from zoo.storage.folder import save_spec
    from zoo.validation.inputs import InputError

    hostile = dataclasses.replace(tiny_zoo_spec, name=os.path.relpath(victim / "precious", tmp_path / "out" / "specs"))
    with pytest.raises(InputError, match="spec name: .* is not a valid name"):
        save_spec(hostile, tmp_path / "out")
    _assert_untouched(victim)
    assert not (tmp_path / "out").exists()
