"""docs/reproducing.md runs: each block's `nfnzoo` lines (and the two the prose gives in code spans), as the page
writes them, through `zoo.cli.main` on a small folder written in that release's own layout and spellings, in a
fresh working folder with a fresh board.

Each folder stands where the page's commands look for it (`cifar10/` beside `cifar10_split.csv`,
`siren_mnist_wts/`, `mnist-inrs/` beside `mnist_splits.json`, `data/mnist_transformer/`,
`tune_zoo_mnist_hyperparameter_10_fixed_seeds/`), so no argument is changed. The one edit is a budget appended
to each `bench run`; a later `--set` of a key wins, so every documented flag (seeds, presets, split sets, model
presets) stays as written and is what runs:

- `--set task.epochs=1`: one epoch of training instead of the preset's or the task's 10 to 142. The epochs run
  the same code (train, then score the validation split and keep the best epoch), so one proves the command runs.
- `--set task.warmup_epochs=0` on the Transformer-NFN preset only: its warm-up is 10 epochs, more than one.

The three documented seeds are kept: the board refuses an entry with fewer. The models run at their documented
presets; the folders are small instead (tens of members), which keeps the module at about 25 s of CPU, 15 s of
it the Small CNN Zoo test (marked slow).

That each command parses and names what exists is tests/test_reproducing_page.py; that the split sets hold the
papers' rows is in tests/zoo/test_import_*.py. This module checks that the commands run to a result: the
import's manifest, the results file with its metric for every seed, the board's accepted entry, the site.
"""

from __future__ import annotations

import json
import math
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
BUDGET = ["--set", "task.epochs=1"]  # appended to every `bench run`; why it is safe: the module docstring
NO_WARMUP = ["--set", "task.warmup_epochs=0"]  # the transformer-nfn preset's 10 warm-up epochs, in a 1-epoch run


def section(heading: str, text: str | None = None) -> str:
    """The page's text under `## <heading>`, up to the next `## `."""
    text = PAGE.read_text() if text is None else text
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 4)
    return text[start:end if end != -1 else len(text)]


def block_commands(heading: str, text: str | None = None) -> list[list[str]]:
    """The `nfnzoo` lines of the section's bash blocks, as argument lists."""
    blocks = re.findall(r"```bash\n(.*?)```", section(heading, text), flags=re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("nfnzoo ")]


def inline_commands(heading: str) -> list[list[str]]:
    """The `nfnzoo ...` code spans of the section's prose (a span may wrap a line), as argument lists."""
    prose = re.sub(r"```bash\n.*?```", "", section(heading), flags=re.S)
    return [shlex.split(" ".join(span.split()))[1:] for span in re.findall(r"`(nfnzoo [^`]+)`", prose)]


def run_commands(commands: list[list[str]], extra_budget: list[str] = ()) -> None:
    """Runs each command through the real CLI, `BUDGET` (and `extra_budget`) appended to every `bench run`."""
    from zoo.cli import main

    for argv in commands:
        if argv[:2] == ["bench", "run"]:
            argv = [*argv, *BUDGET, *extra_budget]
        code = main(argv)
        assert code == 0, f"`nfnzoo {shlex.join(argv)}` exited {code} (its error is in the captured stderr)"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh working folder, whose own board (`runs/leaderboard`, the default root) starts empty. `main` puts
    the working folder on `sys.path` (for `--model pkg.module:Class`); the path is restored afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NFNZOO_LEADERBOARD", raising=False)
    return tmp_path


def check_imported(folder: Path, split_sets: set[str]) -> dict:
    """The import's manifest: one config, complete, recording (at least) `split_sets`; returns the config."""
    configs = json.loads((folder / "manifest.json").read_text())["configs"]
    assert len(configs) == 1, (folder, sorted(configs))
    config = next(iter(configs.values()))
    assert config["complete"] and split_sets <= set(config["split_sets"]), (folder, sorted(config["split_sets"]))
    return config


def check_scored(path: Path, metric: str) -> dict:
    """The results file: `metric` finite for each of the documented seeds and in the summary."""
    results = json.loads(path.read_text())
    assert results["seeds"] == [0, 1, 2], path
    assert all(math.isfinite(seed["metrics"][metric]) for seed in results["per_seed"]), path
    assert math.isfinite(results["summary"][metric]["mean"]), path
    return results


def check_on_board(task: str, model: str) -> None:
    """The default board holds an accepted entry of `model` for `task`."""
    assert list((Path("runs") / "leaderboard" / "entries" / task).glob(f"*/{model}-*.json")), (task, model)


@pytest.mark.slow  # six trainings of three seeds and four symmetry checks: about 15 s of CPU, the module's most
def test_the_small_cnn_zoo_blocks_run(workdir):
    """Both Small CNN Zoo blocks (NFN's HNP and STATNN to the board and the site; Monomial-NFN's and ScaleGMN's
    split sets) on a CIFAR-10-GS folder as the tarball unpacks it, beside the NFN repository's split file."""
    commands = block_commands("Predicting generalization on the Small CNN Zoo")
    assert [argv[:2] for argv in commands] == [
        ["import", "small-cnn-zoo"], ["verify", "zoos/small-cnn-zoo"], ["info", "zoos/small-cnn-zoo"],
        ["bench", "run"], ["bench", "run"], ["leaderboard", "submit"], ["leaderboard", "submit"],
        ["leaderboard", "render"], ["bench", "run"], ["bench", "run"]]
    _, metrics = small_cnn_fixture.make_zoo(workdir / "cifar10", runs=24, steps=(0, 86), dataset="cifar10",
                                            split_file=False)
    small_cnn_fixture.write_split_file(workdir, len(metrics), name="cifar10_split.csv")
    inline = inline_commands("Predicting generalization on the Small CNN Zoo")
    assert inline == [["verify", "zoos/small-cnn-zoo", "--recompute", "20"]]
    run_commands(commands + inline)  # on CIFAR-10-GS the re-scoring is skipped, as the page says, and verify passes
    config = check_imported(workdir / "zoos" / "small-cnn-zoo", {"nfn", "monomial-nfn-relu", "scalegmn-tanh"})
    assert "cifar10_split.csv" in config["imported"]["files"]  # the split file the page names was the one read
    for name, splits in [("hnp-nfn", "nfn"), ("statnn-nfn", "nfn"), ("monomial-relu", "monomial-nfn-relu"),
                         ("ng-gnn-tanh", "scalegmn-tanh")]:
        config = check_scored(workdir / "results" / f"{name}.json", "kendall_tau")["task_config"]
        assert (config["splits"], config["loss"], config["batch_size"]) == (splits, "bce", 8), name
    check_on_board("generalization", "hnp")
    check_on_board("generalization", "statnn")
    assert (workdir / "site" / "index.html").is_file()


def test_the_nfn_sirens_block_runs(workdir):
    """NP on the NFN SIRENs' nfn split: `siren_mnist_wts/randinit_smaller_<label>s/net<index>.pth`, indices on
    both sides of the papers' split points (45,000 and 50,000) so that every split has members."""
    commands = block_commands("INR classification on the NFN SIRENs")
    assert [argv[:2] for argv in commands] == [["import", "nfn-sirens"], ["bench", "run"], ["leaderboard", "submit"]]
    nfn_siren_fixture.make_sirens(workdir / "siren_mnist_wts",
                                  [*range(12), *range(45000, 45004), *range(50000, 50006)])
    run_commands(commands)
    check_imported(workdir / "zoos" / "nfn-sirens", {"nfn"})
    assert check_scored(workdir / "results" / "np-sirens.json", "accuracy")["task_config"]["splits"] == "nfn"
    check_on_board("inr-classification", "np")


def test_the_nfn_sirens_cifar_import_with_its_extra_fits_runs(workdir):
    """The SIRENs section's CIFAR-10 import with its 20 extra fits (`randinit_smaller_aug<i>_<label>s`, three-channel
    SIRENs) records the `nfn-aug` split set the page then names. Its `bench run` is the block's above with that
    split set, so it is not run again here (NP on three-channel SIRENs is the slowest run of the page)."""
    inline = inline_commands("INR classification on the NFN SIRENs")
    assert inline == [["import", "nfn-sirens", "siren_cifar_wts", "--out", "zoos/nfn-cifar", "--augmentations", "20"]]
    source = workdir / "siren_cifar_wts"
    nfn_siren_fixture.make_sirens(source, [*range(4), 45000, 50000], out=3)
    for fit in range(20):
        nfn_siren_fixture.make_sirens(source, [fit % 4], fit=f"aug{fit}", seed=fit + 1, out=3)
    run_commands(inline)
    check_imported(workdir / "zoos" / "nfn-cifar", {"nfn", "nfn-aug"})


def test_the_dwsnets_block_runs(workdir):
    """Neural Graphs' GNN on the DWSNets MNIST INRs: folders spelled as released (`mnist_png_training_<label>_<id>`,
    `mnist_png_testing_<label>_<id>`) and DWSNets' `mnist_splits.json` (paths from its own working folder,
    labels as strings, a `val` split)."""
    commands = block_commands("INR classification on the DWSNets INRs")
    assert [argv[:2] for argv in commands] == [["import", "dwsnets-inrs"], ["bench", "run"], ["leaderboard", "submit"]]
    written = dwsnets_inr_fixture.make_mnist_inrs(workdir / "mnist-inrs", {"train": list(range(12)),
                                                                          "test": list(range(6))}, spelling="release")
    train = sorted(path for path in written if path.startswith("mnist_png_training_"))
    test = sorted(path for path in written if path.startswith("mnist_png_testing_"))
    assert len(train) + len(test) == len(written)
    splits = {"train": train[3:], "val": train[:3], "test": test}
    dwsnets_inr_fixture.write_splits(workdir / "mnist_splits.json", splits,
                                     {path: label for path, (label, _) in written.items()}, "dataset/mnist-inrs/")
    run_commands(commands)
    check_imported(workdir / "zoos" / "dwsnets-mnist", {"dwsnets"})
    assert check_scored(workdir / "results" / "ng-gnn-dwsnets.json", "accuracy")["task_config"]["splits"] == "dwsnets"
    check_on_board("inr-classification", "ng_gnn")


def test_the_transformer_nfn_block_runs(workdir):
    """Transformer-NFN on the Small Transformer Zoo: `data/mnist_transformer` as the Transformer-NFN README
    unpacks it, its metadata's best rows holding the training run's path, `mnist/<model_dir>/mnist/<file>`, as
    the release's generate_metadata.py writes them (not where the file lies)."""
    commands = block_commands("Transformer-NFN on the Small Transformer Zoo")
    assert [argv[:2] for argv in commands] == [["import", "small-transformer-zoo"], ["bench", "run"],
                                               ["leaderboard", "submit"]]
    frame = small_transformer_fixture.make_zoo(workdir / "data" / "mnist_transformer", runs=24, best_paths="release")
    assert frame["ckpt_file"].str.fullmatch(r"mnist/model_\w+/mnist/\w+_best1_\d+\.pt").sum() == 24
    run_commands(commands, NO_WARMUP)
    check_imported(workdir / "zoos" / "small-transformer-zoo", {"transformer-nfn"})
    config = check_scored(workdir / "results" / "transformer-nfn.json", "kendall_tau")["task_config"]
    assert (config["splits"], config["checkpoints"]) == ("transformer-nfn", "all")
    check_on_board("generalization", "transformer_nfn")


def test_the_model_zoos_block_runs(workdir):
    """STATNN on the Model Zoos' split: a Ray Tune experiment folder as the Zenodo zoo unpacks, named as released."""
    commands = block_commands("The Model Zoos")
    assert [argv[:2] for argv in commands] == [["import", "model-zoos"], ["bench", "run"]]
    model_zoos_fixture.make_experiment(workdir, trials=10)
    run_commands(commands)
    check_imported(workdir / "zoos" / "model-zoos-mnist", {"model-zoos"})
    assert check_scored(workdir / "results" / "statnn-model-zoos.json", "kendall_tau")["task_config"]["splits"] == (
        "model-zoos")


def test_a_command_that_fails_on_its_folder_is_caught(workdir):
    """The negative control: the Model Zoos block as the page once had it, naming the folder `mnist_zoo`. The
    importer takes the data set from the released name, so the documented import fails, and the runner says which."""
    text = PAGE.read_text()
    assert text.count(model_zoos_fixture.EXPERIMENT) == 1
    commands = block_commands("The Model Zoos", text.replace(model_zoos_fixture.EXPERIMENT, "mnist_zoo"))
    root = model_zoos_fixture.make_experiment(workdir, trials=10)
    root.rename(workdir / "mnist_zoo")
    with pytest.raises(AssertionError, match=r"`nfnzoo import model-zoos mnist_zoo .*` exited 1"):
        run_commands(commands)
