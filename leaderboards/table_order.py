"""The row order of a standard suite's table: no model is listed above one that beats it in every cell both
have.

Model A *dominates* model B when they share at least one cell and A ranks better (lower) in each of them.
Listing the rows with every cell first breaks this. A model that reads more cells is then listed above one
that beats it wherever they meet. So `table_order` lists the rows in three steps.

1. The dominance graph is split into strongly connected components. With every model in every cell,
   dominance is the strict Pareto order and has no cycle. With missing cells it can have one. A beats B in
   the one cell they share, B beats C in theirs, C beats A in theirs. No list puts each of these below its
   dominator. So a cycle's models stay together, ordered by the tie-break, and the table names them.

2. The components go in a topological order of the graph between them (Kahn's algorithm). Next comes the
   component whose best member has the best key, among those whose dominators are all listed.

3. The key is the higher win share, then the lower mean rank, then the name. A model's win share is a mean
   over its cells. In each cell it is the share of the other models it ranks above; a tie counts half. It
   uses only the cells the model has. So a cell its weight space cannot read counts neither for nor against
   it. A cell with few entries weighs the same as a full one.

Why the rule holds: each dominance edge between two components leads from an earlier component to a later
one. That is because a component is listed only after every component with an edge into it. So a model is
listed below every model that dominates it, except a member of its own cycle.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Sequence

Ranks = Sequence["int | None"]  # a model's rank in each cell (1 is best), None where it has no entry


@dataclasses.dataclass(frozen=True)
class TableOrder:
    order: tuple[int, ...]  # row indices, top first
    win_shares: tuple[float, ...]  # per row (input order)
    cycles: tuple[tuple[int, ...], ...]  # rows whose dominance is cyclic, each group top first


def dominates(a: Ranks, b: Ranks) -> bool:
    """Whether `a` ranks better than `b` in every cell both have, and they share at least one."""
    shared = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    return bool(shared) and all(x < y for x, y in shared)


def win_shares(table: Sequence[Ranks]) -> list[float]:
    """Each row's mean, over its cells, of the share of the cell's other rows it ranks above. A tie counts
    half. A row alone in every cell it has gets 0.5."""
    shares = []
    for index, ranks in enumerate(table):
        per_cell = []
        for column, rank in enumerate(ranks):
            others = [row[column] for other, row in enumerate(table) if other != index and row[column] is not None]
            if rank is not None and others:
                per_cell.append((sum(other > rank for other in others) + 0.5 * sum(other == rank for other in others))
                                / len(others))
        shares.append(statistics.fmean(per_cell) if per_cell else 0.5)
    return shares


def _components(edges: list[set[int]]) -> list[frozenset[int]]:
    """The strongly connected components of the graph `edges` (row -> rows it dominates)."""
    reach = []
    for start in range(len(edges)):
        seen, stack = {start}, [start]
        while stack:
            for successor in edges[stack.pop()] - seen:
                seen.add(successor)
                stack.append(successor)
        reach.append(seen)
    found: dict[frozenset[int], None] = {}
    for row in range(len(edges)):
        found.setdefault(frozenset(other for other in reach[row] if row in reach[other]), None)
    return list(found)


def table_order(names: Sequence[str], table: Sequence[Ranks]) -> TableOrder:
    """The rows of `table` (one per model, named `names`) in the order the module docstring gives."""
    shares = win_shares(table)
    means = [statistics.fmean(rank for rank in ranks if rank is not None) for ranks in table]
    key = {row: (-shares[row], means[row], names[row]) for row in range(len(table))}
    edges = [{b for b in range(len(table)) if b != a and dominates(table[a], table[b])} for a in range(len(table))]
    components = _components(edges)
    component_of = {row: number for number, members in enumerate(components) for row in members}
    dominators = [{component_of[a] for a in range(len(table)) for b in members if b in edges[a]} - {number}
                  for number, members in enumerate(components)]
    listed: list[int] = []
    order: list[int] = []
    while len(listed) < len(components):  # the graph between components has no cycle, so one is always ready
        ready = [number for number in range(len(components))
                 if number not in listed and dominators[number] <= set(listed)]
        chosen = min(ready, key=lambda number: min(key[row] for row in components[number]))
        listed.append(chosen)
        order += sorted(components[chosen], key=key.__getitem__)
    cycles = tuple(tuple(row for row in order if row in members) for members in components if len(members) > 1)
    return TableOrder(tuple(order), tuple(shares), tuple(sorted(cycles, key=lambda cycle: order.index(cycle[0]))))
