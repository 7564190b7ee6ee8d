"""`nfnzoo leaderboard submit` and `nfnzoo leaderboard render`, through the real CLI."""

from __future__ import annotations

from importlib.metadata import entry_points

from zoo.cli import main


def test_the_leaderboard_command_is_an_entry_point():
    entries = {entry.name: entry.value for entry in entry_points(group="nfnzoo.commands")}
    assert entries["leaderboard"] == "leaderboards.commands:register"


def test_submit_and_render(root, write_results, local_dataset, hashes, tmp_path, capsys):
    path = write_results(dataset_hash=hashes["local"], dataset_path="moved")
    assert main(["leaderboard", "submit", str(path), "--root", str(root), "--dataset", str(local_dataset)]) == 0
    out = capsys.readouterr().out
    assert "registered dataset 'cnn-local'" in out and "source: regenerated from spec cnn-mnist (tiny)" in out
    assert "accepted statnn-" in out

    assert main(["leaderboard", "render", "--root", str(root), "--out", str(tmp_path / "site")]) == 0
    printed = capsys.readouterr().out
    assert "| 1 | statnn | 0.8200 ± 0.0200 |" in printed
    assert (tmp_path / "site" / "index.md").exists()


def test_a_rejection_exits_1_listing_the_problems(root, write_results, make_data, capsys):
    data = make_data(seeds=(0, 1), taus=(0.5, 0.6))
    data["model"] = "no/slashes"
    assert main(["leaderboard", "submit", str(write_results(data)), "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert "rejected (2 problems)" in err
    assert "  - at least 3 seeds" in err and "  - model name 'no/slashes'" in err
