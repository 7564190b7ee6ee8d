"""Text that leaves the program: a file's hostile text reaches no card, terminal or page raw.

Real files through the real CLI (`python -m zoo.cli`, forked from a warm server:
`tests/forked_cli.py`): an NFN SIREN folder whose metadata sidecar gives one file a `status` holding
HTML, a bidi override (U+202E) and a terminal escape (ESC), imported with `nfnzoo import`; its
dataset card (README.md, which the Hub renders), `nfnzoo info` and `nfnzoo verify` are then read as
a user would see them. Every check has its negative control: the same commands on a clean folder.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

from nfn_siren_fixture import make_sirens
from zoo.validation.text import markdown_block, markdown_code, markdown_text, stored_text_problem, visible

ESC, RLO = "\x1b", "\u202e"
HOSTILE_STATUS = f"<img src=x onerror=alert(1)>{RLO}ko{ESC}[2J"
RAW = (ESC, RLO, "\x07", "\u034f", "\u3164")  # what must never reach a terminal or a card


def _cli(cli, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONWARNINGS": "ignore",
           "HF_HOME": str(cwd / "hf")}
    return cli.run(list(argv), cwd=cwd, env=env, timeout=120)


def _sirens(tmp_path: Path, status: str) -> Path:
    """A SIREN folder in the reference layout with our exporter's sidecar; net3's row has `status`."""
    source = tmp_path / "siren_mnist_wts"
    make_sirens(source, range(12))
    with open(source / "nfnzoo_metadata.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "epoch", "seed", "learning_rate", "psnr", "mse", "status"])
        for path in sorted(source.glob("*/*.pth")):
            writer.writerow([path.relative_to(source).as_posix(), 0, 0, 0.001, 30.0, 0.001,
                             status if path.name == "net3.pth" else "ok"])
    return source


def _raw(text: str) -> list[str]:
    return [character for character in RAW if character in text]


def _one_error_line(done: subprocess.CompletedProcess, command: str) -> str:
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"nfnzoo {command}: error: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def imported(cli, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    tmp_path = tmp_path_factory.mktemp("hostile_status")
    source = _sirens(tmp_path, HOSTILE_STATUS)
    return tmp_path, _cli(cli, "import", "nfn-sirens", str(source), "--out", str(tmp_path / "out"), cwd=tmp_path)


def test_a_sidecar_status_with_html_bidi_and_escape_is_refused_at_import_in_one_visible_line(imported):
    tmp_path, done = imported
    line = _one_error_line(done, "import")
    assert done.returncode == 1 and not _raw(line) and "nfnzoo_metadata.csv" in line, line
    assert "\\u202e" in line or "\\x1b" in line or "U+202E" in line, line  # the character named, made visible
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_status_with_html_bidi_and_escape_reaches_the_card_as_text(cli, tmp_path):
    """The card renders what a manifest holds (one written by an older version, or by hand): its
    HTML escaped and its invisible characters shown, never raw (the Hub renders the card)."""
    from zoo.dataset.card import render_card

    source = _sirens(tmp_path, "ok")
    out = tmp_path / "out"
    assert _cli(cli, "import", "nfn-sirens", str(source), "--out", str(out), cwd=tmp_path).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    config = next(iter(manifest["configs"].values()))
    assert "<img" not in render_card(manifest)  # the negative control: a clean status shows no markup
    config["status"] = {HOSTILE_STATUS: config["status"]["ok"]}
    card = render_card(manifest)
    assert not _raw(card) and "<img" not in card, "the card holds the status raw"
    assert "&lt;img src=x onerror=alert(1)>\\u202eko\\x1b[2J" in card  # shown, as text


def test_a_hand_edited_manifest_with_escapes_in_its_status_keys_fails_verify(cli, tmp_path):
    source = _sirens(tmp_path, "ok")
    out = tmp_path / "out"
    assert _cli(cli, "import", "nfn-sirens", str(source), "--out", str(out), cwd=tmp_path).returncode == 0
    clean = _cli(cli, "verify", str(out), cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr  # the negative control: the same folder, untouched, passes

    manifest = json.loads((out / "manifest.json").read_text())
    config = next(iter(manifest["configs"].values()))
    config["status"] = {f"ok{ESC}]0;owned{chr(7)}": config["status"]["ok"]}
    (out / "manifest.json").write_text(json.dumps(manifest))
    done = _cli(cli, "verify", str(out), cwd=tmp_path)
    line = _one_error_line(done, "verify")
    assert done.returncode == 1 and not _raw(line), line
    assert "status" in line and ("U+001B" in line or "U+0007" in line), line
    info = _cli(cli, "info", str(out), cwd=tmp_path)
    assert info.returncode == 0 and not _raw(info.stdout) and "ok\\x1b]0;owned\\x07" in info.stdout, info.stdout


def test_the_error_line_shows_an_escape_in_a_file_name_as_text(cli, tmp_path):
    hostile = tmp_path / f"zoo{ESC}[31m{RLO}gnp.exe\u034f"
    done = _cli(cli, "verify", str(hostile), cwd=tmp_path)
    line = _one_error_line(done, "verify")
    assert done.returncode == 1 and not _raw(line), line
    assert "zoo\\x1b[31m\\u202egnp.exe\\u034f" in line, line
    plain = _cli(cli, "verify", str(tmp_path / "plain-zoo"), cwd=tmp_path)  # the negative control: nothing to escape
    assert plain.returncode == 1 and str(tmp_path / "plain-zoo") in _one_error_line(plain, "verify")


@pytest.mark.parametrize("character", [ESC, RLO, "\u200b", "\u034f", "\u3164", "\u2800", "\ufe0f", "\U000e0100",
                                       "\x00", "\x9b", "\u2028"])
def test_one_rule_refuses_stored_and_shows_displayed(character):
    text = f"a{character}b"
    assert f"U+{ord(character):04X}" in stored_text_problem(text, 100)
    for shown in (visible(text), markdown_text(text), markdown_code(text), markdown_block(text)):
        assert character not in shown, shown
        assert "\\" in shown or (character.isspace() and shown == "a b"), shown  # a line break folds to a space
    assert stored_text_problem("a plain line\nand\ta tab, é ∈ ▁", 100) is None  # the negative control
    assert visible("é ∈ ▁ plain") == "é ∈ ▁ plain"


def test_a_usage_error_shows_an_escape_in_an_argument_as_text(cli, tmp_path):
    done = _cli(cli, "info", "zoo", f"--{ESC}[31mred{RLO}", cwd=tmp_path)
    last = done.stderr.splitlines()[-1]
    assert done.returncode == 2 and not _raw(done.stderr), done.stderr
    assert last == "nfnzoo: error: unrecognized arguments: --\\x1b[31mred\\u202e", last
    plain = _cli(cli, "info", "zoo", "--plain", cwd=tmp_path)  # the negative control
    assert plain.returncode == 2 and plain.stderr.splitlines()[-1] == "nfnzoo: error: unrecognized arguments: --plain"
