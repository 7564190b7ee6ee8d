"""Separation (`leaderboards.separation`): which models a cell tells apart beyond seed noise."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from leaderboards.docs_pages import Rendered, rewrite
from leaderboards.separation import SeedScores, cell_separation, gap, separated_set


def _model(name, mean, spread):
    return SeedScores(name, (mean - spread, mean, mean + spread))  # sample SD = spread


def test_the_gap_is_in_pooled_seed_deviations():
    a, b = _model("a", 0.5, 0.01), _model("b", 0.46, 0.03)
    assert a.std == pytest.approx(0.01) and gap(a, b) == pytest.approx(0.04 / math.sqrt((0.01 ** 2 + 0.03 ** 2) / 2))
    assert gap(SeedScores("c", (0.3, 0.3)), SeedScores("d", (0.2, 0.2))) == math.inf  # no noise, different means
    assert gap(SeedScores("c", (0.3,)), SeedScores("d", (0.3,))) == 0.0


def test_four_spread_models_separate_and_a_cluster_does_not():
    spread = [_model(name, mean, 0.005) for name, mean in (("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6))]
    assert [m.model for m in separated_set(tuple(spread))] == ["a", "b", "c", "d"]
    cluster = [_model(name, 0.22 + 0.002 * i, 0.01) for i, name in enumerate("abcdefg")]  # within noise
    assert len(separated_set(tuple(cluster))) == 1


def test_a_noisy_model_between_two_does_not_hide_that_they_separate():
    """Negative control for reading the table's neighbour gaps: a noisy model n between a and c overlaps both, so
    no gap in the sorted table exceeds 2, yet a and c are separated."""
    a, n, c = _model("a", 0.60, 0.004), _model("n", 0.55, 0.05), _model("c", 0.50, 0.004)
    assert gap(a, c) > 2 and gap(a, n) < 2 and gap(n, c) < 2
    chosen = [m.model for m in separated_set((a, n, c))]
    assert chosen == ["a", "c"]


def test_the_set_is_a_largest_one_on_random_cells():
    """Against an independent search over every subset by bit mask (1,000 seeded cells of up to 9 models)."""
    rng = np.random.default_rng(0)
    for _ in range(1000):
        size = int(rng.integers(1, 10))
        models = tuple(SeedScores(f"m{i}", tuple(rng.normal(rng.uniform(0, 1), rng.uniform(0.001, 0.1), 3)))
                       for i in range(size))
        apart = [[gap(a, b) > 2 for b in models] for a in models]
        largest = max(bin(mask).count("1") for mask in range(1, 2 ** size)
                      if all(apart[i][j] for i, j in itertools.combinations(
                          [k for k in range(size) if mask >> k & 1], 2)))
        chosen = separated_set(models)
        assert len(chosen) == largest
        assert all(gap(a, b) > 2 for a, b in itertools.combinations(chosen, 2))


def test_a_cell_lists_best_first_with_each_gap():
    cell = cell_separation("c", "mse", False, [_model("worse", 0.5, 0.01), _model("better", 0.3, 0.01)])
    assert [m.model for m in cell.models] == ["better", "worse"]  # lower is better
    assert cell.gaps == (pytest.approx(20.0),) and cell.separated == ("better", "worse")


def test_the_region_takes_an_optional_without_and_refuses_other_keys():
    rendered = Rendered(boards=[], skipped=())
    text = "<!-- nfnzoo:separation suite=standard-v2 without=mlp,probegen -->\nold\n<!-- /nfnzoo:separation -->"
    body, _ = rewrite(text, "page.md", rendered)
    assert "No run of standard-v2 is on the board yet." in body and "old" not in body
    with pytest.raises(ValueError, match=r"page\.md:1: nfnzoo:separation takes \['suite', 'without'\]"):
        rewrite(text.replace("without=", "except="), "page.md", rendered)
    with pytest.raises(ValueError, match=r"page\.md:1: 'standard-v9' is no standard suite"):
        rewrite(text.replace("standard-v2", "standard-v9"), "page.md", rendered)


def test_a_name_left_out_must_be_a_model_of_the_suite():
    from leaderboards import OFFICIAL_ROOT
    from leaderboards.entries import load_entries
    from leaderboards.separation import separations

    entries = load_entries(OFFICIAL_ROOT)
    assert any(cell.models for cell in separations(entries, "standard-v2", frozenset({"mlp"})))
    with pytest.raises(ValueError, match=r"without: 'mpl' ran no cell of standard-v2; its models: .*mlp"):
        separations(entries, "standard-v2", frozenset({"mpl"}))
