"""docs/reproducing.md runs: each block's `nfnzoo` lines, as the page writes them, through `zoo.cli.main` on a
small folder written in that release's own layout and spellings, in a fresh working folder with a fresh board.

The folders stand where the page's commands look for them (`cifar10/`, `cifar10_split.csv`, `siren_mnist_wts/`,
`mnist-inrs/` and its `mnist_splits.json`, `data/mnist_transformer/`), so no argument changes; only the Model
Zoos' placeholder `mnist_zoo` is replaced by the experiment folder's released name. The one edit is a budget
appended to each `bench run` (a later `--set` of a key wins, so every documented flag stays as written):

- `--set task.epochs=1` (and `task.warmup_epochs=0` where the preset warms up over more epochs than that): one
  epoch of the preset's training; the preset, split set, loss, batch size and model preset are all the page's.

That each command parses and names what exists is tests/test_reproducing_page.py; that the split sets hold the
papers' rows is tests/zoo/test_import_small_cnn_zoo.py and its siblings. This module checks that the commands
run to a result: the import's manifest, the results file with its metric, the board's accepted entry, the site.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "zoo"))  # the release-layout folder writers
try:
    import dwsnets_inr_fixture
    import model_zoos_fixture
    import nfn_siren_fixture
    import small_cnn_fixture
    import small_transformer_fixture
finally:
    sys.path.pop(0)

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reproducing.md"
BUDGET = ["--set", "task.epochs=1"]  # appended to every `bench run`; see the module docstring


def block_commands(heading: str, text: str | None = None) -> list[list[str]]:
    """The `nfnzoo` lines of the bash blocks under `## <heading>` (up to the next `## `), as argument lists."""
    text = PAGE.read_text() if text is None else text
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 4)
    section = text[start:end if end != -1 else len(text)]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("nfnzoo ")]


def run_commands(commands: list[list[str]], placeholders: dict[str, str], extra_budget: list[str] = ()) -> None:
    """Runs each command through the real CLI, the placeholders' paths replaced and a budget appended to `bench run`."""
    from zoo.cli import main

    for argv in commands:
        argv = [placeholders.get(token, token) for token in argv]
        if argv[:2] == ["bench", "run"]:
            argv = [*argv, *BUDGET, *extra_budget]
        import time; t0 = time.perf_counter()
        code = main(argv)
        print(f"TIMING {time.perf_counter()-t0:.1f}s {argv[:2]}", file=sys.__stderr__)
        assert code == 0, f"nfnzoo {shlex.join(argv)} exited {code}"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh working folder whose own board (`runs/leaderboard`, the default) starts empty."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NFNZOO_LEADERBOARD", raising=False)
    return tmp_path


def imported(folder: Path) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["configs"], folder
    return manifest


def scored(path: Path, metric: str) -> dict:
    """The results file, holding a finite `metric` for its seed."""
    results = json.loads(path.read_text())
    text = json.dumps(results)
    assert f'"{metric}"' in text, (path, sorted(results))
    return results


def board_entries(workdir: Path, task: str, model: str) -> list[Path]:
    return sorted((workdir / "runs" / "leaderboard" / "entries" / task).glob(f"*/{model}-*.json"))


def test_the_small_cnn_zoo_blocks_run(workdir):
    """Both Small CNN Zoo blocks (NFN's HNP and STATNN; Monomial-NFN's and ScaleGMN's split sets) on a CIFAR-10-GS
    folder as the tarball unpacks it, beside the NFN repository's `cifar10_split.csv`."""
    heading = "Predicting generalization on the Small CNN Zoo"
    commands = block_commands(heading)
    assert [argv[:2] for argv in commands] == [
        ["import", "small-cnn-zoo"], ["verify", "zoos/small-cnn-zoo"], ["info", "zoos/small-cnn-zoo"],
        ["bench", "run"], ["bench", "run"], ["leaderboard", "submit"], ["leaderboard", "submit"],
        ["leaderboard", "render"], ["bench", "run"], ["bench", "run"]]
    small_cnn_fixture.make_zoo(workdir / "cifar10", runs=24, steps=(0, 86), dataset="cifar10", split_file=False)
    small_cnn_fixture.write_split_file(workdir, 48, name="cifar10_split.csv")
    run_commands(commands, {})
    assert "cifar10_split.csv" in json.dumps(imported(workdir / "zoos" / "small-cnn-zoo"))
    for name, model, splits in [("hnp-nfn", "hnp", "nfn"), ("statnn-nfn", "statnn", "nfn"),
                                ("monomial-relu", "monomial_nfn", "monomial-nfn-relu"),
                                ("ng-gnn-tanh", "ng_gnn", "scalegmn-tanh")]:
        results = scored(workdir / "results" / f"{name}.json", "kendall_tau")
        assert results["task_config"]["splits"] == splits and results["task_config"]["loss"] == "bce", name
    for model in ("hnp", "statnn"):
        assert board_entries(workdir, "generalization", model), model
    assert (workdir / "site" / "index.html").is_file()


def test_the_nfn_sirens_block_runs(workdir):
    """NP on the NFN SIRENs' nfn split: a `siren_mnist_wts` folder of `randinit_smaller_<label>s/net<index>.pth`
    files, indices on both sides of the papers' split points (45,000 and 50,000) so every split has members."""
    commands = block_commands("INR classification on the NFN SIRENs")
    assert [argv[:2] for argv in commands] == [["import", "nfn-sirens"], ["bench", "run"], ["leaderboard", "submit"]]
    nfn_siren_fixture.make_sirens(workdir / "siren_mnist_wts", [*range(12), *range(45000, 45004), *range(50000, 50006)])
    run_commands(commands, {})
    imported(workdir / "zoos" / "nfn-sirens")
    results = scored(workdir / "results" / "np-sirens.json", "accuracy")
    assert results["task_config"]["splits"] == "nfn"
    assert board_entries(workdir, "inr-classification", "np")


def test_the_dwsnets_block_runs(workdir):
    """Neural Graphs' GNN on the DWSNets MNIST INRs: folders spelled as released (`mnist_png_training_<label>_<id>`,
    `mnist_png_testing_<label>_<id>`) and DWSNets' `mnist_splits.json` (paths from its working folder, labels as
    strings, a `val` split)."""
    commands = block_commands("INR classification on the DWSNets INRs")
    assert [argv[:2] for argv in commands] == [["import", "dwsnets-inrs"], ["bench", "run"], ["leaderboard", "submit"]]
    written = dwsnets_inr_fixture.make_mnist_inrs(workdir / "mnist-inrs", {"train": list(range(12)),
                                                                          "test": list(range(6))}, spelling="release")
    assert all("_training_" in path or "_testing_" in path for path in written)
    train = sorted(path for path in written if "_training_" in path)
    splits = {"train": train[3:], "val": train[:3], "test": sorted(path for path in written if "_testing_" in path)}
    dwsnets_inr_fixture.write_splits(workdir / "mnist_splits.json", splits,
                                     {path: label for path, (label, _) in written.items()}, "dataset/mnist-inrs/")
    run_commands(commands, {})
    imported(workdir / "zoos" / "dwsnets-mnist")
    results = scored(workdir / "results" / "ng-gnn-dwsnets.json", "accuracy")
    assert results["task_config"]["splits"] == "dwsnets"
    assert board_entries(workdir, "inr-classification", "ng_gnn")


def test_the_transformer_nfn_block_runs(workdir):
    """Transformer-NFN on the Small Transformer Zoo: `data/mnist_transformer` as the Transformer-NFN README
    unpacks it, its metadata's best rows holding the training run's path (`mnist/<model_dir>/mnist/<file>`),
    as the release's generate_metadata.py writes them. The preset warms up for 10 epochs: none in one epoch."""
    commands = block_commands("Transformer-NFN on the Small Transformer Zoo")
    assert [argv[:2] for argv in commands] == [["import", "small-transformer-zoo"], ["bench", "run"],
                                               ["leaderboard", "submit"]]
    frame = small_transformer_fixture.make_zoo(workdir / "data" / "mnist_transformer", runs=24, best_paths="release")
    assert frame["ckpt_file"].str.fullmatch(r"mnist/model_\w+/mnist/\w+_best1_\d+\.pt").sum() == 24
    run_commands(commands, {}, ["--set", "task.warmup_epochs=0"])
    imported(workdir / "zoos" / "small-transformer-zoo")
    results = scored(workdir / "results" / "transformer-nfn.json", "kendall_tau")
    assert results["task_config"]["splits"] == "transformer-nfn" and results["task_config"]["checkpoints"] == "all"
    assert board_entries(workdir, "generalization", "transformer_nfn")


def test_the_model_zoos_block_runs(workdir):
    """STATNN on the Model Zoos' split: a Ray Tune experiment folder as Zenodo ships it, named as released."""
    commands = block_commands("The Model Zoos")
    assert [argv[:2] for argv in commands] == [["import", "model-zoos"], ["bench", "run"]]
    root = model_zoos_fixture.make_experiment(workdir, trials=10)
    run_commands(commands, {"mnist_zoo": root.name})
    imported(workdir / "zoos" / "model-zoos-mnist")
    results = scored(workdir / "results" / "statnn-model-zoos.json", "kendall_tau")
    assert results["task_config"]["splits"] == "model-zoos"
