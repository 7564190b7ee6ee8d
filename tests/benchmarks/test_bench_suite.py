"""`nfnzoo bench suite`: the cnn-generalization matrix, resumability, the tau table, errors."""

from __future__ import annotations

import json

import pytest

from benchmarks.suite import FEEDFORWARD_MODELS, GRAPH_MODELS, SUITES, TREE_MODELS
from zoo.cli import main


def test_the_cnn_suite_covers_every_feedforward_model_on_both_subsets_and_the_scaled_test():
    suite = SUITES.get("cnn-generalization")()
    names = [e.name for e in suite.entries]
    assert len(names) == len(set(names))
    for model in FEEDFORWARD_MODELS:
        for activation in ("relu", "tanh"):
            entry = next(e for e in suite.entries if e.name == f"{model}-{activation}")
            assert entry.task_overrides["subset"] == {"activation": activation}
            assert entry.task_overrides["loss"] == "bce" and entry.task_overrides["checkpoints"] == "final"
            if "group" in entry.model_overrides:
                assert entry.model_overrides["group"] == {"relu": "scale", "tanh": "sign"}[activation]
    for model in TREE_MODELS:  # the tree baselines too: every registered model that reads any weight space
        for activation in ("relu", "tanh"):
            entry = next(e for e in suite.entries if e.name == f"{model}-{activation}")
            assert entry.task_overrides["subset"] == {"activation": activation} and entry.model_overrides == {}
    for model in GRAPH_MODELS:  # issue 35's graph metanetworks and probing, at their budget presets
        for activation in ("relu", "tanh"):
            entry = next(e for e in suite.entries if e.name == f"{model}-{activation}")
            assert entry.task_overrides["subset"] == {"activation": activation}
            assert entry.model_overrides["preset"] == "generalization-budget"
    assert next(e for e in suite.entries if e.name == "scalegmn-tanh").model_overrides["mode"] == "sign"
    assert next(e for e in suite.entries if e.name == "scalegmn-relu").model_overrides["mode"] == "scale"
    gmn = [e for e in suite.entries if e.name.startswith("scalegmn-permutation-")]
    assert [e.model_overrides["mode"] for e in gmn] == ["permutation", "permutation"] and len(gmn) == 2
    scaled = [e for e in suite.entries if e.name.endswith("scaled-test")]
    assert {e.model for e in scaled} == {"monomial_nfn", "hnp", *GRAPH_MODELS}
    for entry in scaled:
        assert entry.task_overrides["augment_splits"] == ["test"]
        assert entry.task_overrides["augment_scale_range"] == [1.0, 1000.0]
        assert entry.task_overrides["augment_keep_original"] is False


def test_suite_runs_resumes_and_prints_the_table(tiny_zoo, tmp_path, capsys):
    out = tmp_path / "suite"
    argv = ["bench", "suite", "cnn-generalization", "--data", str(tiny_zoo), "--out", str(out), "--seeds", "0,1",
            "--only", "statnn-tanh,mlp-tanh", "--set", "task.epochs=1", "--set", "task.checkpoints=all",
            "--set", "task.subset={}"]  # 6 runs: too few for a per-activation split; --set wins over the entry
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert (out / "statnn-tanh.json").exists() and (out / "mlp-tanh.json").exists()
    results = json.loads((out / "statnn-tanh.json").read_text())
    assert results["task_config"]["subset"] == {}  # the --set override, not the entry's
    assert results["task_config"]["epochs"] == 1 and results["task_config"]["loss"] == "bce"
    assert results["seeds"] == [0, 1]
    table = (out / "table.md").read_text()
    assert "| statnn-tanh | statnn | tanh |" in table and "| mlp-tanh | mlp | tanh |" in table
    assert table in printed.out
    stamp = (out / "statnn-tanh.json").stat().st_mtime_ns
    assert main(argv) == 0  # resumed: nothing left to run, the files are kept as they are
    assert "2 entries, 2 already in" in capsys.readouterr().err
    assert (out / "statnn-tanh.json").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("extra, message", [
    (["--only", "nothing"], "matches no entry of suite 'cnn-generalization'"),
    (["--set", "model.channels=[2]"], "expected task.KEY=VALUE"),
    (["--set", "task.epochs=0"], "epochs"),
])
def test_suite_user_errors_exit_1_before_training(tiny_zoo, tmp_path, capsys, extra, message):
    argv = ["bench", "suite", "cnn-generalization", "--data", str(tiny_zoo), "--out", str(tmp_path / "s"), *extra]
    assert main(argv) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_an_unknown_suite_lists_the_known_ones(tiny_zoo, tmp_path, capsys):
    assert main(["bench", "suite", "nope", "--data", str(tiny_zoo), "--out", str(tmp_path / "s")]) == 1
    assert "cnn-generalization" in capsys.readouterr().err


def test_only_picks_an_entry_by_its_own_name_before_a_models_entries():
    """`--only np` in the INR suite is the plain NP entry, not NP with augmentation too."""
    from benchmarks.suite import select_entries

    inr = SUITES.get("inr-classification")()
    assert [e.name for e in select_entries(inr, ["np"])] == ["np"]
    assert [e.name for e in select_entries(inr, ["np", "np-aug1"])] == ["np", "np-aug1"]
    transformer = SUITES.get("transformer-generalization")()
    sweep = select_entries(transformer, ["transformer-nfn"])  # a model name there picks its whole sweep
    assert [e.name for e in sweep] == [f"transformer_nfn-t{t:g}" for t in (0, 0.2, 0.4, 0.6, 0.8)] + \
        [f"transformer_nfn-paper-t{t:g}" for t in (0, 0.2, 0.4, 0.6, 0.8)]
    assert len(select_entries(transformer, None)) == len(transformer.entries)


def test_the_augmentation_suite_gives_every_view_count_the_same_optimizer_steps():
    """Each entry sees (K + 1) views of every training SIREN for E / (K + 1) epochs: the steps of
    E plain epochs, so only the augmentation differs (the NFN paper's comparison)."""
    from benchmarks.suite import AUGMENTATION_EPOCHS
    from benchmarks.tasks import create_task

    suite = SUITES.get("inr-augmentation")()
    assert suite.task == "inr-classification"
    views = sorted(e.task_overrides["augment_copies"] for e in suite.entries)
    assert views[0] == 0 and len(views) == len(set(views)) >= 3  # a plain baseline and several K
    for entry in suite.entries:
        config = create_task(suite.task, **entry.task_overrides).config
        assert entry.model == "np" and config.augment_copies == int(entry.name.removeprefix("np-k"))
        assert config.epochs * (config.augment_copies + 1) == AUGMENTATION_EPOCHS
        assert config.batch_size == 32 and config.warmup_steps == 1_000  # the budget preset's, shared by all
