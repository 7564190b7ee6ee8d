"""Generalization prediction on a real tiny transformer zoo (`tiny_transformer_zoo`): Transformer-NFN
and the fitted tree baselines through the harness, the paper's protocol preset (checkpoints at 3/4
of training, the threshold), the architecture fields filled from the zoo, the threshold suite and
its one-table rendering on a leaderboard."""

from __future__ import annotations

import math

import pytest

from benchmarks.harness import load_splits, run_benchmark, run_on_splits
from benchmarks.suite import GRAPH_TRANSFORMER_MODELS, PAPER_SCHEDULE_MODELS, SUITES, THRESHOLDS, TRANSFORMER_MODELS
from benchmarks.tasks import create_task
from benchmarks.tasks.learners import learning_rate_at
from leaderboards import render, submit
from zoo.loader import load_split
from zoo.validation.schema import SchemaError
from benchmarks.run_options import RunOptions

PAPER = {"preset": "transformer-nfn", "epochs": 2, "warmup_epochs": 1}
SMALL_NFN = {"channels": [2], "invariant_channels": 3, "encoder_hidden": 4}
SMALL_TREES = {"xgboost": {"max_rounds": 4, "min_child_weight": 1.0},
               "lightgbm": {"max_rounds": 6, "early_stopping_rounds": 3, "min_data_in_leaf": 2, "num_leaves": 4},
               "random_forest": {"max_trees": 6, "trees_per_step": 3, "early_stopping_trees": 3, "min_samples_leaf": 2}}


@pytest.fixture(scope="module")
def loaded(tiny_transformer_zoo):
    return load_splits(tiny_transformer_zoo, None)


def test_transformer_nfn_runs_with_the_papers_protocol_on_epoch_three_of_four(loaded, tmp_path):
    splits, dataset = loaded
    results = run_on_splits("generalization", "transformer_nfn", splits, dataset,
                            RunOptions([0, 1, 2], model_overrides=SMALL_NFN, task_overrides={**PAPER, "threshold": 0.0},
                                       progress=False),
                            tmp_path / "t.json")
    assert results["model_config"]["num_heads"] == 2 and results["model_config"]["residual"] is False  # from the zoo
    assert results["task_config"]["checkpoints"] == "fraction" and results["task_config"]["min_accuracy"] == 0.0
    assert results["task_config"]["loss"] == "bce" and results["task_config"]["lr_schedule"] == "warmup-cosine"
    test = splits["test"].metadata
    epoch_three = set(test[(test["epoch"] == 3) & (test["status"] == "ok") & ~test["is_best"]]["model_id"])
    predicted = {line.split(",")[1] for line in (tmp_path / "t.predictions.csv").read_text().splitlines()[1:]}
    assert predicted == epoch_three and len(epoch_three) == 4
    assert all(math.isfinite(seed["metrics"]["kendall_tau"]) for seed in results["per_seed"])
    assert results["num_params"] > 10_000


def test_a_threshold_drops_members_below_it(loaded, tmp_path):
    splits, dataset = loaded
    test = splits["test"].metadata
    accuracies = test[test["status"] == "ok"]["test_accuracy"]
    threshold = float(accuracies.median())
    kept = int((accuracies >= threshold).sum())
    assert 2 <= kept < len(accuracies)
    results = run_on_splits("generalization", "statnn", splits, dataset,
                            RunOptions([0], model_overrides={"hidden_sizes": [4]},
                                       task_overrides={**PAPER, "threshold": threshold, "epochs": 1,
                                                       "checkpoints": "all"}, progress=False))
    assert results["per_seed"][0]["ranking"]["num_targets"] == kept


@pytest.mark.parametrize("model", sorted(SMALL_TREES))
def test_the_tree_baselines_are_fitted_through_the_same_harness(tiny_transformer_zoo, model, tmp_path):
    out = tmp_path / f"{model}.json"
    results = run_benchmark("generalization", model, tiny_transformer_zoo, None,
                            RunOptions([0, 1, 2], model_overrides=SMALL_TREES[model],
                                       task_overrides={"checkpoints": "all"}, progress=False),
                            out)
    selection = results["per_seed"][0]["selection"]
    assert ("rounds" in selection or "trees" in selection) and "validation_kendall_tau" in selection
    assert results["num_params"] > 0  # tree nodes
    ids = set(load_split(tiny_transformer_zoo, None, "test").metadata.query("status == 'ok'")["model_id"])
    rows = (tmp_path / f"{model}.predictions.csv").read_text().splitlines()[1:]
    assert {line.split(",")[1] for line in rows} == ids and len(rows) == 3 * len(ids)
    assert all(0 <= float(line.split(",")[3]) <= 1.2 for line in rows)  # predicted accuracies, not logits


def test_a_conflicting_architecture_field_is_refused(loaded):
    splits, dataset = loaded
    with pytest.raises(ValueError, match="num_heads=4, but the zoo's members have num_heads=2"):
        run_on_splits("generalization", "transformer_nfn", splits, dataset,
                      RunOptions([0], model_overrides={"num_heads": 4}, task_overrides=PAPER, progress=False))


def test_the_protocol_preset_alias_and_schedule():
    task = create_task("generalization", preset="transformer-nfn", threshold=0.4)
    assert task.config.min_accuracy == 0.4 and task.config.batch_size == 16 and task.config.epochs == 100
    assert create_task("generalization", preset="transformer-nfn", epochs=10).config.lr == 1e-3
    with pytest.raises(SchemaError, match="threshold: is another name for min_accuracy"):
        create_task("generalization", threshold=0.4, min_accuracy=0.2)
    with pytest.raises(SchemaError, match="preset: expected one of"):
        create_task("generalization", preset="nope")
    rates = [learning_rate_at(e, 1e-3, 100, "warmup-cosine", 10, 1e-5) for e in range(1, 101)]
    assert rates[0] == pytest.approx(1e-4) and rates[9] == pytest.approx(1e-3) and rates[10] == pytest.approx(1e-3)
    assert rates[-1] == pytest.approx(1e-5 + (1e-3 - 1e-5) * (1 + math.cos(math.pi * 89 / 90)) / 2)
    assert all(a >= b for a, b in zip(rates[10:], rates[11:]))


def test_a_fraction_that_is_no_whole_epoch_is_refused(loaded):
    splits, _ = loaded
    with pytest.raises(ValueError, match="fraction 0.6 of the runs' last epochs \\[4\\] is not a whole epoch"):
        create_task("generalization", checkpoints="fraction", checkpoint_fraction=0.6, epochs=1).run(
            splits, "statnn", {"hidden_sizes": [4]}, seed=0)


def test_the_threshold_suite_renders_as_one_table(tiny_transformer_zoo, tmp_path):
    suite = SUITES.get("transformer-generalization")()
    assert len(suite.entries) == len(THRESHOLDS) * (len(TRANSFORMER_MODELS) + len(PAPER_SCHEDULE_MODELS)) + \
        len(GRAPH_TRANSFORMER_MODELS) == 47
    for model in PAPER_SCHEDULE_MODELS:
        paper = [e for e in suite.entries if e.name.startswith(f"{model}-paper-")]
        configs = [create_task("generalization", **e.task_overrides).config for e in paper]
        assert [(c.min_accuracy, c.epochs, c.warmup_epochs) for c in configs] == [(t, 100, 10) for t in THRESHOLDS]
    board = tmp_path / "board"
    for threshold in (0.0, 0.11):  # the tiny zoo's members are near chance
        out = tmp_path / f"statnn-t{threshold}.json"
        run_benchmark("generalization", "statnn", tiny_transformer_zoo, None,
                      RunOptions([0, 1, 2], model_overrides={"hidden_sizes": [4]},
                                 task_overrides={**PAPER, "epochs": 1, "threshold": threshold, "checkpoints": "all"},
                                 progress=False),
                      out)
        submit(out, board, tiny_transformer_zoo)
    page = render(board, tmp_path / "site")
    assert "kendall_tau by threshold" in page
    assert "| Model | threshold 0 | threshold 0.11 |" in page
    row = next(line for line in page.splitlines() if line.startswith("| statnn | "))
    assert row.count("±") == 2
    # a second training schedule of the same model is a row of its own, named by what differs
    out = tmp_path / "statnn-2-epochs-t0.json"
    run_benchmark("generalization", "statnn", tiny_transformer_zoo, None,
                  RunOptions([0, 1, 2], model_overrides={"hidden_sizes": [4]},
                             task_overrides={**PAPER, "epochs": 2, "threshold": 0.0, "checkpoints": "all"},
                             progress=False),
                  out)
    submit(out, board)
    page = render(board, tmp_path / "site").splitlines()
    sweep_rows = [line for line in page if line.startswith("| statnn")]
    assert [line.split(" | ")[0] for line in sweep_rows] == ["| statnn (epochs 1)", "| statnn (epochs 2)"]
    assert sweep_rows[1].count("±") == 1 and sweep_rows[1].endswith("| — |")
    # and so is it in the ranked table of threshold 0, where both schedules ran
    ranked = [line.split(" | ")[1] for line in page if line.startswith("| ") and " | statnn" in line]
    assert sorted(ranked) == ["statnn", "statnn (epochs 1)", "statnn (epochs 2)"]  # threshold 0.11: one config


def test_a_suite_override_that_merges_two_entries_is_refused(tiny_transformer_zoo, tmp_path):
    from benchmarks.suite import run_suite

    with pytest.raises(ValueError, match="mlp-t0 and mlp-t0.2 would be the same run under two names"):
        run_suite("transformer-generalization", tiny_transformer_zoo, tmp_path,
                  RunOptions([0], task_overrides={"threshold": 0.5}), only=["mlp"])


def test_an_entry_the_data_cannot_serve_is_recorded_as_skipped(tiny_transformer_zoo, tmp_path):
    from benchmarks.suite import run_suite

    rows = run_suite("transformer-generalization", tiny_transformer_zoo, tmp_path,
                     RunOptions([0], task_overrides={"epochs": 1, "checkpoints": "all"}),
                     only=["statnn-t0", "statnn-t0.8"])
    assert [entry.name for entry, _ in rows] == ["statnn-t0"]  # no member of the tiny zoo reaches 0.8
    assert "no checkpoints left after dropping test_accuracy below min_accuracy 0.8" in \
        (tmp_path / "statnn-t0.8.skipped").read_text()


def test_a_graph_metanetwork_reads_the_zoos_transformers_with_their_head_count_from_the_zoo(tiny_transformer_zoo,
                                                                                           tmp_path):
    """GMN (ScaleGMN's permutation mode) on the members' neural graphs: the harness fills the
    members' head count and residuals in from the zoo's architecture; a contradicting one is refused."""
    import json

    out = tmp_path / "gmn.json"
    model = {"preset": "transformer-generalization-budget", "hidden_dim": 8}
    run_benchmark("generalization", "scalegmn", tiny_transformer_zoo, None,
                  RunOptions([0], model_overrides=model, task_overrides={**PAPER, "epochs": 1, "checkpoints": "all"},
                             progress=False),
                  out)
    result = json.loads(out.read_text())
    assert result["model_config"]["num_heads"] == 2 and result["model_config"]["residual"] is False
    assert result["model_config"]["mode"] == "permutation" and math.isfinite(result["summary"]["kendall_tau"]["mean"])
    with pytest.raises(ValueError, match="num_heads"):
        run_benchmark("generalization", "scalegmn", tiny_transformer_zoo, None,
                      RunOptions([0], model_overrides={**model, "num_heads": 4},
                                 task_overrides={**PAPER, "epochs": 1, "checkpoints": "all"}, progress=False),
                      tmp_path / "four.json")
