"""A suite table never lists a model above one that beats it in every cell both have.

Random rank tables with missing cells (the counterexamples the old "every cell first" rule fails,
shown by a negative control), the issue's own standard-v2 rows, a cyclic table, and the coverage
column: which cells a model can run and what the row shows for the others.
"""

from __future__ import annotations

import random
import statistics

import pytest

from benchmarks.standard import STANDARD_SUITES
from leaderboards.board import ranks as ranks_of
from leaderboards.cell_reads import cell_kinds, cell_reads
from leaderboards.suite_board import SuiteRow
from leaderboards.table_order import table_order, win_shares

V2 = STANDARD_SUITES.get("standard-v2")()


def _beats_everywhere(a, b) -> bool:
    """Written apart from `leaderboards.table_order.dominates`, so the test checks it too."""
    shared = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    return len(shared) > 0 and all(x < y for x, y in shared)


def _reach(table) -> list[list[bool]]:
    """Transitive closure of dominance (Floyd-Warshall)."""
    n = len(table)
    reach = [[_beats_everywhere(table[a], table[b]) for b in range(n)] for a in range(n)]
    for k in range(n):
        for a in range(n):
            for b in range(n):
                reach[a][b] = reach[a][b] or (reach[a][k] and reach[k][b])
    return reach


def _violations(order, table) -> list[tuple[int, int]]:
    """(dominator, dominated) pairs listed the wrong way round, other than two models of one cycle."""
    place = {row: position for position, row in enumerate(order)}
    reach = _reach(table)
    return [(a, b) for a in range(len(table)) for b in range(len(table))
            if _beats_everywhere(table[a], table[b]) and not reach[b][a] and place[a] > place[b]]


def _old_order(names, table) -> list[int]:
    """The rule this replaces: rows with every cell first, then mean rank, then name."""
    return sorted(range(len(table)), key=lambda row: (sum(r is None for r in table[row]),
                                                      statistics.fmean(r for r in table[row] if r is not None),
                                                      names[row]))


def _random_table(rng: random.Random):
    """Models with random subsets of cells (at least one each) and tied values, ranked per cell as the board ranks."""
    models, cells = rng.randint(2, 9), rng.randint(1, 5)
    present = [[rng.random() < 0.6 for _ in range(cells)] for _ in range(models)]
    for row in present:
        row[rng.randrange(cells)] = True
    table = [[None] * cells for _ in range(models)]
    for column in range(cells):
        entered = [row for row in range(models) if present[row][column]]
        values = [float(rng.randint(0, 6)) for _ in entered]
        for row, rank in zip(entered, ranks_of(values, higher_is_better=True)):
            table[row][column] = rank
    return [f"m{row}" for row in range(models)], [tuple(row) for row in table]


def test_no_random_table_lists_a_model_above_its_dominator_and_the_old_rule_does():
    rng = random.Random(59)
    old_failures = cyclic = 0
    for _ in range(3000):
        names, table = _random_table(rng)
        found = table_order(names, table)
        assert sorted(found.order) == list(range(len(table)))
        assert _violations(found.order, table) == [], (names, table, found)
        reach = _reach(table)
        expected = {frozenset(b for b in range(len(table)) if reach[a][b] and reach[b][a])
                    for a in range(len(table)) if reach[a][a]}
        assert {frozenset(cycle) for cycle in found.cycles} == expected
        for cycle in found.cycles:  # a cycle's models are listed together
            places = sorted(found.order.index(row) for row in cycle)
            assert places == list(range(places[0], places[0] + len(cycle)))
        cyclic += bool(found.cycles)
        old_failures += bool(_violations(_old_order(names, table), table))
    assert old_failures > 100  # negative control: the old rule lists dominated models first
    assert cyclic > 0  # dominance with missing cells can be cyclic, and the tables hold such cases


def test_the_issues_standard_v2_rows_put_magep_and_hnp_above_scalegmn_and_the_mlp():
    rows = {"scalegmn": (5, 6, 9, 7), "statnn": (9, 10, 3, 6), "mlp": (13, 13, 10, 8), "magep_nfn": (1, 1, 8, None),
            "hnp": (3, 3, 5, None), "xgboost": (11, 9, None, 1), "transformer_nfn": (None, None, None, 3)}
    names, table = list(rows), list(rows.values())
    listed = [names[row] for row in table_order(names, table).order]
    assert listed.index("magep_nfn") < listed.index("scalegmn") < listed.index("mlp")
    assert listed.index("hnp") < listed.index("scalegmn")
    assert listed.index("xgboost") < listed.index("transformer_nfn")  # it beats it in their one shared cell
    old = [names[row] for row in _old_order(names, table)]
    assert old.index("scalegmn") < old.index("magep_nfn")  # the misleading order the issue reports


def test_a_cycle_is_kept_together_and_named():
    # a beats b in c1, b beats c in c2, c beats a in c3; d is beaten by all three where they meet
    names = ["a", "b", "c", "d"]
    table = [(1, None, 2), (2, 1, None), (None, 2, 1), (3, 3, 3)]
    found = table_order(names, table)
    assert [sorted(names[row] for row in cycle) for cycle in found.cycles] == [["a", "b", "c"]]
    assert names[found.order[-1]] == "d" and _violations(found.order, table) == []


def test_win_share_counts_each_cell_alike_and_a_tie_as_half():
    # a: first of 3 in c1, tied first of 2 in c2 -> (1 + 0.5) / 2
    assert win_shares([(1, 1), (2, 1), (3, None)]) == pytest.approx([0.75, 0.5, 0.0])
    assert win_shares([(1,)]) == [0.5]  # alone in its cells: no evidence either way


@pytest.mark.parametrize("model, expected", [
    ("magep_nfn", (True, True, True, False)),  # feedforward weights only
    ("transformer_nfn", (False, False, False, True)),
    ("xgboost", (True, True, False, True)),  # fitted: INR classification trains by gradient steps
    ("statnn", (True, True, True, True)),
    ("nqpool", (None, None, None, None)),  # an outside model: the board does not import its code
])
def test_which_standard_v2_cells_a_model_can_run(model, expected):
    assert cell_reads(model, V2.cells, cell_kinds(V2.cells)) == expected


def test_the_coverage_column_counts_entered_over_runnable_cells():
    kinds = cell_kinds(V2.cells)
    assert kinds == ("feedforward", "feedforward", "feedforward", "transformer")

    def row(model, values):
        ranks = tuple(None if value is None else 1 for value in values)
        return SuiteRow(model, values, ranks, 1.0, cell_reads(model, V2.cells, kinds))

    ng_t = row("ng_t", (0.78, 0.75, None, None))  # reads the INR cell, has no entry there
    assert ng_t.coverage == "2/3" and [ng_t.shown(i) for i in (2, 3)] == ["—", "n/a"]
    assert row("transformer_nfn", (None, None, None, 0.68)).coverage == "1/1"
    assert row("scalegmn", (0.79, 0.82, 0.16, 0.57)).coverage == "4/4"
    outside = row("nqpool", (0.8, 0.8, None, None))
    assert outside.coverage == "2/?" and outside.shown(3) == "—"  # unknown, so never "n/a"
