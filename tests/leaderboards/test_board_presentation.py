"""What an author sees on the board: no machine's local path anywhere in the board's files or on a
page (a dataset's source says how anyone gets its bytes), ties shown as ties, the model's version and
the code at its commit, named protocol tables, and stand-in suite runs on `suites.md`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.standard import STANDARD_SUITES
from benchmarks.tasks import create_task
from leaderboards import OFFICIAL_ROOT, render, submit
from leaderboards.board import build_board, code_link, ranks
from leaderboards.datasets import (DATASETS_FILE, KnownDataset, load_datasets, register_dataset, source_problem,
                                   zoo_source)
from leaderboards.entries import load_entries
from leaderboards.pinned import same_runs
from leaderboards.suite_board import suite_boards
from zoo.validation.schema import SchemaError, to_data

# an absolute path of a Unix home, a user's or a scratch folder, a Windows drive, or the `local:` sources of old boards
ABSOLUTE = re.compile(rb"(?<![\w.~-])/(?:work|home|root|tmp|Users|mnt|scratch|data|private|var/folders)/"
                      rb"|\blocal:/|\b[A-Z]:\\{1,2}[A-Za-z]")


def _text(path: Path) -> bytes:
    """A file's text: a Parquet file's string cells (its compressed pages would match by chance), else its bytes."""
    if path.suffix != ".parquet":
        return path.read_bytes()
    table = pq.read_table(path)
    cells = [str(value) for column in table.columns if pa.types.is_string(column.type) or
             pa.types.is_large_string(column.type) for value in column.to_pylist()]
    return "\n".join(cells + [str(table.schema.metadata or "")]).encode()


def absolute_paths(folder: Path) -> list[str]:
    """`file: match` for every absolute path in any file under `folder` (text, JSON, Parquet's strings)."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            found += [f"{path.relative_to(folder)}: {match.group().decode(errors='replace')}"
                      for match in ABSOLUTE.finditer(_text(path))]
    return found


def test_no_file_of_the_official_board_holds_an_absolute_path(tmp_path):
    assert absolute_paths(OFFICIAL_ROOT) == []
    # negative control: the same check flags a path planted in a copy of the board's datasets.json
    copy = tmp_path / "board"
    copy.mkdir()
    records = json.loads((OFFICIAL_ROOT / DATASETS_FILE).read_text())
    records["datasets"][0]["source"] = "local:/work/main/runs/cnn-mnist-bench"
    (copy / DATASETS_FILE).write_text(json.dumps(records))
    (copy / "notes.md").write_text("read from /home/me/zoo, or C:\\zoos\\cnn")
    pq.write_table(pa.table({"model_id": ["m1"], "path": ["/tmp/zoo/m1"]}), copy / "x.test.parquet")
    assert absolute_paths(copy) == ["datasets.json: local:/", "notes.md: /home/", "notes.md: C:\\z",
                                    "x.test.parquet: /tmp/"]


def test_every_official_source_is_one_of_the_forms():
    assert {record.source.split(" (")[0].split(":")[0] for record in load_datasets(OFFICIAL_ROOT).values()} == {
        "regenerated from spec cnn-mnist-v1", "regenerated from spec cnn-mnist",
        "regenerated from spec transformer-mnist",
        "regenerated from spec transformer-agnews", "regenerated from spec inr-mnist", "track"}


@pytest.mark.parametrize("source", ["org/zoo@" + "0" * 40, "regenerated from spec cnn-mnist (tiny)",
                                    "imported from https://github.com/org/repo", "track:norga",
                                    "https://example.org/zoo"])
def test_the_source_forms_are_accepted(source):
    assert source_problem(source) is None


@pytest.mark.parametrize("source", ["local:/work/main/runs/cnn-mnist-bench", "/home/me/zoo", "runs/cnn-mnist-bench",
                                    "org/zoo", "~/zoo", "C:\\zoos\\cnn", "file:///tmp/zoo",
                                    "regenerated from spec ../x (tiny)"])
def test_a_path_is_refused_as_a_source(source, tmp_path):
    assert "never a path" in source_problem(source)
    record = KnownDataset(name="zoo", config="cnn-mnist", dataset_hash="2" * 64, family="cnn", source=source)
    with pytest.raises(SchemaError, match="source"):
        register_dataset(tmp_path, record)
    assert not (tmp_path / DATASETS_FILE).exists()
    (tmp_path / DATASETS_FILE).write_text(json.dumps({"datasets": [to_data(record)]}))  # a hand-edited board
    with pytest.raises(SchemaError, match=r"datasets\[0\]\.source"):
        load_datasets(tmp_path)


def _zoo(folder: Path, entry: dict) -> Path:
    """A folder with a manifest.json of `nfnzoo pack`'s structure (no shards) and `entry`'s keys."""
    folder.mkdir(parents=True)
    config = {"dataset_hash": "3" * 64, "family": "cnn", "splits": {}, "spec_hash": "3" * 20,
              "architectures": {}, "planned_checkpoints": 1, "packed_checkpoints": 1, "complete": True,
              "columns": [], "files": [], **entry}
    (folder / "manifest.json").write_text(json.dumps({"package_version": "0.1.0", "configs": {"cnn-mnist": config}}))
    return folder


def test_a_zoos_source_comes_from_its_manifest_or_its_hub_snapshot(tmp_path):
    generated = _zoo(tmp_path / "runs" / "zoo", {"spec": {"name": "cnn-mnist", "profile": "bench"}})
    assert zoo_source(generated, "cnn-mnist") == "regenerated from spec cnn-mnist (bench)"
    full = _zoo(tmp_path / "full", {"spec": {"name": "inr-mnist"}})
    assert zoo_source(full, "cnn-mnist") == "regenerated from spec inr-mnist (full)"
    imported = _zoo(tmp_path / "imported", {"spec": {"name": "x"}, "imported": {"url": "https://example.org/zoo"}})
    assert zoo_source(imported, "cnn-mnist") == "imported from https://example.org/zoo"
    commit = "c" * 40
    snapshot = _zoo(tmp_path / "hub" / "datasets--org--zoo" / "snapshots" / commit, {"spec": {}})
    assert zoo_source(snapshot, "cnn-mnist") == f"org/zoo@{commit}"
    nothing = _zoo(tmp_path / "bare", {"spec": {}})
    with pytest.raises(ValueError, match="records neither the spec"):
        zoo_source(nothing, "cnn-mnist")


def test_ties_at_the_shown_precision_share_the_better_rank():
    assert ranks([0.82, 0.820003, 0.81, 0.83], True) == [2, 2, 4, 1]
    assert ranks([0.05, 0.04999, 0.06], False) == [1, 1, 3]  # lower is better
    assert ranks([0.82, 0.8201], True) == [2, 1]  # negative control: apart at the 4th decimal


def _rank_cells(root: Path) -> list[tuple[str, str]]:
    table = build_board(root)[0].sections[0].tables[0]
    return [(row.cells["Rank"], row.entry.results.model) for row in table.rows]


def test_entries_with_equal_shown_scores_are_shown_as_ties(root, write_results, tmp_path):
    submit(write_results(model="statnn", taus=(0.80, 0.82, 0.84)), root)
    submit(write_results(model="mlp", taus=(0.80001, 0.82, 0.84)), root)  # mean 0.820003: 0.8200 as shown
    submit(write_results(model="hnp", taus=(0.79, 0.81, 0.83)), root)
    assert sorted(_rank_cells(root)) == [("1=", "mlp"), ("1=", "statnn"), ("3", "hnp")]
    assert "| 1= | mlp |" in render(root, tmp_path / "site")
    other = tmp_path / "other"
    shutil.copytree(root, other, ignore=shutil.ignore_patterns("entries"))
    submit(write_results(model="statnn", taus=(0.80, 0.82, 0.84)), other)
    submit(write_results(model="mlp", taus=(0.8003, 0.82, 0.84)), other)  # 0.8201 as shown: not a tie
    assert _rank_cells(other) == [("1", "mlp"), ("2", "statnn")]


def test_the_version_is_labelled_and_the_code_links_its_commit(root, write_results):
    submit(write_results(model="statnn"), root, code_url="https://github.com/org/mynfn", code_commit="0123abcd4567")
    row = build_board(root)[0].sections[0].tables[0].rows[0]
    assert row.cells["Version"] == "nfnzoo 0.1.0"  # the results record no model version: nfnzoo's, said so
    assert (row.cells["Code"], row.values["Code"]) == ("0123abcd", "https://github.com/org/mynfn/tree/0123abcd4567")
    assert code_link("https://github.com/org/mynfn/tree/v1", "0123abcd") == "https://github.com/org/mynfn/tree/v1"
    assert code_link("https://github.com/org/mynfn", None) == "https://github.com/org/mynfn"


def _cell_results(write_results, make_data, cell, dataset_hash: str, model: str) -> Path:
    data = make_data(model=model, dataset_hash=dataset_hash, seeds=cell.seeds)
    data["task_config"] = to_data(create_task(cell.task, **cell.task_overrides).config)
    return write_results(data, name=f"{model}-{cell.name}.json")


def test_a_stand_in_suite_run_is_named_and_written_to_suites_md(root, write_results, make_data, tmp_path):
    """An author's own board never registered the pinned cnn-mnist-bench: a standard-v1 run on their
    regenerated zoo is shown as a stand-in table naming the dataset and its hash (said to be unchecked),
    in suites.md, and its task page names each protocol's table."""
    suite = STANDARD_SUITES.get("standard-v1")()
    regenerated = "2" * 64
    register_dataset(root, KnownDataset(name="my-cnn-mnist-bench", config="cnn-mnist", dataset_hash=regenerated,
                                        family="cnn", source="regenerated from spec cnn-mnist-v1 (bench)"))
    for cell in suite.cells[:2]:  # cnn-generalization-relu and -tanh
        submit(_cell_results(write_results, make_data, cell, regenerated, "statnn"), root)
    out = tmp_path / "site"
    pages = render(root, out)
    text = (out / "suites.md").read_text()
    assert "standard-v1 on stand-in zoos (my-cnn-mnist-bench 222222222222)" in text
    assert "could not check" in text and "dataset my-cnn-mnist-bench 222222222222, pinned 6e211693486a" in text
    assert "[standard suites](suites.md)" in (out / "index.md").read_text() and (out / "suites.html").exists()
    assert "## my-cnn-mnist-bench — config `cnn-mnist` (dataset `222222222222`)" in pages
    assert "Source: regenerated from spec cnn-mnist-v1 (bench)." in pages
    headings = re.findall(r"^### (.*)$", pages, re.MULTILINE)
    assert headings == ["Protocol 1: subset: activation ∈ \\['relu'\\]",  # Markdown-escaped brackets
                        "Protocol 2: subset: activation ∈ \\['tanh'\\]"]
    assert "Protocol 2</h3>" not in (out / "generalization.html").read_text()
    # negative control: where the board holds the pinned zoo and the runs differ, nothing is a stand-in
    entries = [entry for _, entry in load_entries(root)]
    assert suite_boards(entries, lambda run, pinned: False) == []
    unchecked = suite_boards(entries, same_runs(root))  # not standard-v2's: its zoo is another recipe
    assert [(board.suite, board.stand_in, board.checked) for board in unchecked] == [("standard-v1", True, False)]
    checked = suite_boards(entries, lambda run, pinned: True)  # a verdict for any pinned zoo: v2's CNN cells too,
    assert [(board.suite, board.stand_in, board.checked) for board in checked] == [  # which v3 shares
        ("standard-v1", True, True), ("standard-v2", True, True), ("standard-v3", True, True)]
