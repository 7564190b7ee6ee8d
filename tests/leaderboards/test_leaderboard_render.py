"""Rendering: ranked Markdown tables per task and dataset, plots and an index."""

from __future__ import annotations

import json

import pytest

from leaderboards import render, submit
from leaderboards.renderer import EMPTY


@pytest.fixture
def board(root, write_results, local_dataset, hashes):
    """Three entries on the known dataset and one on a local one."""
    submit(write_results(model="statnn", taus=(0.80, 0.82, 0.84), rmse=0.05), root)
    submit(write_results(model="mlp", taus=(0.40, 0.45, 0.50), rmse=0.02), root)  # better rmse, worse tau
    submit(write_results(model="hnp", taus=(0.90, 0.91, 0.92), rmse=0.04), root)
    submit(write_results(model="statnn", dataset_hash=hashes["local"], dataset_path=str(local_dataset)), root)
    return root


def table_rows(markdown: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")]
            for line in markdown.splitlines() if line.startswith("| ") and not line.startswith("| Rank")]


def test_tables_are_ranked_by_the_main_metric(board, tmp_path, hashes):
    text = render(board, tmp_path / "site")
    assert "Ranked by `kendall_tau` (higher is better)" in text
    known_section, local_section = text.split("## ")[1:3]
    assert "org/cnn-zoo — config `cnn-mnist`" in known_section and hashes["known"][:12] in known_section
    assert "cnn-local" in local_section
    rows = table_rows(known_section)
    assert [(row[0], row[1]) for row in rows] == [("1", "hnp"), ("2", "statnn"), ("3", "mlp")]
    assert rows[0][2] == "0.9100 ± 0.0100"  # kendall_tau mean ± sample std
    # params, train time and peak memory per seed, hardware, version, seeds, re-scored, claims, code
    assert rows[1][5:-1] == ["23,937", "3.0", "512", "cpu", "nfnzoo 0.1.0", "3", "no", "not recorded", "—"]
    assert len(table_rows(local_section)) == 1


def test_files_written(board, tmp_path):
    out = tmp_path / "site"
    text = render(board, out)
    assert sorted(p.name for p in out.iterdir()) == [
        "generalization-params.png", "generalization-time.png", "generalization.html", "generalization.md",
        "generalization.png", "index.html", "index.md", "site.css", "site.js"]  # no verified entry: no predictions plot
    assert (out / "generalization.md").read_text() == text
    assert "![generalization: kendall_tau per entry](generalization.png)" in text
    assert "![generalization: kendall_tau against parameters](generalization-params.png)" in text
    assert (out / "generalization.png").read_bytes()[:4] == b"\x89PNG"
    index = (out / "index.md").read_text()
    assert "- [generalization](generalization.md): 4 entries on 2 dataset(s)" in index


def test_an_empty_board(root, tmp_path):
    assert render(root, tmp_path / "site").strip() == EMPTY
    assert EMPTY in (tmp_path / "site" / "index.md").read_text()


def test_a_malformed_entry_is_an_error_naming_it(board, tmp_path):
    entry = next((board / "entries").rglob("*.json"))
    data = json.loads(entry.read_text())
    del data["submission"]["content_hash"]
    entry.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"{entry.name}: submission.content_hash: missing"):
        render(board, tmp_path / "site")


def test_each_protocol_is_ranked_apart_and_described(root, write_results, make_data, tmp_path):
    ranking = {"kendall_tau_ceiling": 0.95, "distinct_targets": 40.0, "tied_pair_fraction": 0.0975, "num_targets": 80.0}
    relu = make_data(model="hnp", taus=(0.90, 0.91, 0.92))
    relu["task_config"].update(checkpoints="final", subset={"activation": "relu"})
    for entry in relu["per_seed"]:
        entry["ranking"] = dict(ranking)
    submit(write_results(relu, name="hnp-relu"), root)
    submit(write_results(model="statnn", taus=(0.80, 0.82, 0.84)), root)  # an old file: every checkpoint, all rows
    text = render(root, tmp_path / "site")
    section = text.split("\n## ")[1]
    assert "### Protocol 1" in section and "### Protocol 2" in section
    whole, subset = section.split("### Protocol ")[1:3]
    # each is ranked first in its own table: the ReLU subset's tau is not compared with the whole zoo's
    assert [row[:2] for row in table_rows(whole)] == [["1", "statnn"]]
    assert [row[:2] for row in table_rows(subset)] == [["1", "hnp"]]
    assert ("Protocol: checkpoints: all stored epochs; subset: all rows; augmentation: none; "
            "loss: MSE (standardized).") in whole
    # [ ] escaped: no link
    assert "Protocol: checkpoints: each run's final epoch; subset: activation ∈ \\['relu'\\]" in subset
    assert ("Test targets: 40 distinct values, 9.8% of pairs tied; the best tau-b of tie-free predictions "
            "is 0.9500.") in subset
    assert "Test targets" not in whole  # an old file records no ceiling; none is made up


def test_one_protocol_has_one_table_with_its_line(board, tmp_path):
    text = render(board, tmp_path / "site")
    assert "### Protocol" not in text
    assert text.count("Protocol: checkpoints: all stored epochs") == 2  # one per dataset's table
