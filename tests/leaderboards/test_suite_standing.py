"""A suite run says exactly what the board shows: "stand-in" only for a cell that is not ranked.

A standard-v2 folder written by hand (no training: the board checks the files): cells on the pinned
hash are ranked everywhere (`suite.json`, `table.md`, `leaderboard submit`, `suites.md`); a cell on
other bytes is the only one called a stand-in.
"""

import json
import re
from pathlib import Path

import pytest

from benchmarks.standard import STANDARD_SUITES, _write_manifest, standard_table
from leaderboards.datasets import KnownDataset, register_dataset
from leaderboards.renderer import render
from zoo.cli import main
from zoo.validation.schema import to_data

SUITE = STANDARD_SUITES.get("standard-v2")()
RELU, TANH = SUITE.cells[:2]  # both on cnn-mnist-suite-v2
OTHER = "2" * 64  # the same zoo regenerated elsewhere: other bytes


def _folder(tmp_path: Path, make_data, hashes: dict[str, str]) -> Path:
    """A suite folder of an outside model ("nqpool") whose cells read `hashes` {cell name: dataset hash}."""
    from benchmarks.tasks import create_task

    folder = tmp_path / "std"
    folder.mkdir()
    for cell in (RELU, TANH):
        if cell.name in hashes:
            data = make_data(model="nqpool", dataset_hash=hashes[cell.name], seeds=cell.seeds)
            data["task_config"] = to_data(create_task(cell.task, **cell.task_overrides).config)
            (folder / f"{cell.name}.json").write_text(json.dumps(data))
    _write_manifest(SUITE, "mlp", "nqpool", folder, {RELU.zoo.name: "zoos/cnn"}, {})  # shown as nqpool
    return folder


def _board(tmp_path: Path) -> Path:
    """An author's copy of the official board's records of the zoo: the pinned one and a regenerated one."""
    root = tmp_path / "board"
    root.mkdir()
    for name, digest in (("cnn-mnist-suite-v2", RELU.zoo.dataset_hash), ("my-cnn-mnist-suite-v2", OTHER)):
        register_dataset(root, KnownDataset(name=name, config="cnn-mnist", dataset_hash=digest, family="cnn",
                                            source=RELU.zoo.source))
    return root


@pytest.mark.parametrize("case, hashes, stand_ins", [
    ("both cells on the pinned bytes", {RELU.name: RELU.zoo.dataset_hash, TANH.name: TANH.zoo.dataset_hash}, []),
    ("tanh on other bytes", {RELU.name: RELU.zoo.dataset_hash, TANH.name: OTHER}, [TANH.name]),
    ("relu alone, pinned", {RELU.name: RELU.zoo.dataset_hash}, []),
])
def test_stand_in_is_said_only_of_an_unranked_cell_everywhere(tmp_path, make_data, capsys, case, hashes, stand_ins):
    folder = _folder(tmp_path, make_data, hashes)
    manifest = json.loads((folder / "suite.json").read_text())
    cells = {c["cell"]: c for c in manifest["cells"]}
    assert manifest["stand_in"] == bool(stand_ins), case
    for name in hashes:
        assert (cells[name]["stand_in"], cells[name]["ranked"]) == (name in stand_ins, name not in stand_ins)
    assert not any(c["stand_in"] or c["ranked"] for c in manifest["cells"] if c["status"] != "ran")
    table = (folder / "table.md").read_text()
    assert table == standard_table(manifest)
    assert f"{len(hashes) - len(stand_ins)} of {len(hashes)} run cells on the pinned zoos, ranked" in table
    for name in hashes:
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        assert ("stand-in" in row) == (name in stand_ins) and ("(pinned): ranked" in row) == (name not in stand_ins)
    assert ("stand-in" in table) == bool(stand_ins)

    root = _board(tmp_path)
    assert main(["leaderboard", "submit", str(folder), "--root", str(root)]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert ("stand-in" in printed) == bool(stand_ins), printed
    for name in hashes:
        line = next(line for line in printed.splitlines() if line.startswith(f"  {name} ("))
        assert ("ranked in standard-v2's table" in line) == (name not in stand_ins), line
        assert ("a stand-in, not ranked" in line) == (name in stand_ins), line

    render(root, tmp_path / "site")  # the rendered board: the same cells ranked, the same one apart
    page = (tmp_path / "site" / "suites.md").read_text()
    sections = re.split(r"^## ", page, flags=re.MULTILINE)[1:]
    ranked = next(s for s in sections if s.startswith("standard-v2\n"))
    row = next(line for line in ranked.splitlines() if line.startswith("| nqpool |"))
    columns = [c.name for c in SUITE.cells]
    shown = row.split(" | ")[1:1 + len(columns)]
    for name in hashes:
        assert (shown[columns.index(name)] != "—") == (name not in stand_ins), (name, row)
    assert any(s.startswith("standard-v2 on stand-in zoos") for s in sections) == bool(stand_ins)


def test_a_cell_the_board_shows_in_no_table_is_said_so(tmp_path, make_data, capsys):
    """Other bytes of another recipe (a zoo that does not hold the pinned zoo's runs): in no suite table, and
    the submit says that, not "stand-in" (negative control of the rule above)."""
    folder = _folder(tmp_path, make_data, {RELU.name: "3" * 64})
    root = _board(tmp_path)
    register_dataset(root, KnownDataset(name="tiny-cnn", config="cnn-mnist", dataset_hash="3" * 64, family="cnn",
                                        source="regenerated from spec cnn-mnist (tiny)"))
    assert main(["leaderboard", "submit", str(folder), "--root", str(root)]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"  {RELU.name} (dataset 333333333333 ≠ pinned 391f00067b9d): in none of its tables" in printed
    assert "stand-in" not in printed and "ranked in" not in printed
    render(root, tmp_path / "site")
    assert not (tmp_path / "site" / "suites.md").exists()
