"""Budgets (`leaderboards.budgets`): some models' runs on one dataset, each beside the training budget it ran."""

from __future__ import annotations

import statistics

import pytest

from leaderboards.budgets import budget_rows, budgets_markdown, parse_subset
from leaderboards.docs_pages import _read_board, board_state, rewrite

V2_CNN = "391f00067b9d"  # cnn-mnist-suite-v2 on the official board


@pytest.fixture(scope="module")
def official():
    from leaderboards import OFFICIAL_ROOT

    return _read_board(str(OFFICIAL_ROOT), board_state(OFFICIAL_ROOT))


def test_every_entry_of_the_models_on_the_subset_is_a_row_with_its_own_numbers(official):
    models = ["scalegmn", "statnn"]
    metric, rows = budget_rows(official.entries, "generalization", V2_CNN, models, {"activation": "relu"})
    expected = {entry.submission.id: entry for _, entry in official.entries
                if entry.results.model in models and entry.results.dataset.dataset_hash.startswith(V2_CNN)
                and entry.results.task_config["subset"] == {"activation": "relu"}}
    assert metric == "kendall_tau" and len(expected) >= 4  # the cell's and the 4x runs of each at least
    assert sorted(row.entry for row in rows) == sorted(expected)
    for row in rows:
        results = expected[row.entry].results
        assert row.mean == pytest.approx(results.summary["kendall_tau"].mean)  # the entry's own summary
        assert row.std == pytest.approx(statistics.stdev(s.metrics["kendall_tau"] for s in results.per_seed))
        assert row.training[0] == results.task_config["epochs"] and row.params == results.num_params
    assert [row.model for row in rows] == sorted((row.model for row in rows), key=models.index)
    epochs = [row.training[0] for row in rows if row.model == "scalegmn"]
    assert epochs == sorted(epochs)
    # the tanh subset's runs are other rows, none of these
    _, tanh = budget_rows(official.entries, "generalization", V2_CNN, models, {"activation": "tanh"})
    assert tanh and not {row.entry for row in tanh} & set(expected)


def test_the_region_renders_from_the_board_and_names_a_model_without_an_entry(official):
    text = (f"<!-- nfnzoo:budgets task=generalization dataset={V2_CNN} models=statnn,no_such_model "
            "subset=activation:relu -->\nold\n<!-- /nfnzoo:budgets -->")
    body, shown = rewrite(text, "page.md", official)
    assert "old" not in body and shown == set()
    assert "| statnn | 23,937 | 10 | 8 | 0.001 | 0 |" in body  # the cell's own budget
    assert body.rstrip().endswith("No entry yet: no\\_such\\_model.\n<!-- /nfnzoo:budgets -->".rstrip())


def test_bad_regions_are_refused_naming_the_page_and_line(official):
    good = f"<!-- nfnzoo:budgets task=generalization dataset={V2_CNN} models=statnn -->\n<!-- /nfnzoo:budgets -->"
    rewrite(good, "page.md", official)  # no subset: every run of the model on the dataset
    for bad, message in ((good.replace("models=", "model="), r"takes \['dataset', 'models', 'subset', 'task'\]"),
                         (good.replace(V2_CNN, "0000000000ab"), "is not a dataset of task generalization"),
                         (good.replace("models=statnn", "models=,"), "models: expected one or more model names"),
                         (good.replace("models=statnn", "models=statnn subset=relu"),
                          r"subset: expected COLUMN:VALUE \(e\.g\. activation:relu\), got 'relu'")):
        with pytest.raises(ValueError, match=rf"page\.md:1: .*{message}"):
            rewrite(bad, "page.md", official)


def test_a_subset_is_matched_whole():
    assert parse_subset("activation:relu,width:8", "here") == {"activation": "relu", "width": "8"}
    assert parse_subset("", "here") == {}
    assert "No entry yet: a, b." in budgets_markdown("kendall_tau", [], ["a", "b"])
