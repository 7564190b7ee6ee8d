"""The size of a spec's plan, counted from the spec without listing its runs (`nfnzoo generate --dry-run`).

`zoo.planning.plan.plan_runs` lists every run: a content hash each, repeated configurations trained once.
A dry run only needs how many runs there are and what their FLOPs add up to.
A plan may hold `MAX_PLANNED_RUNS` runs.
So here the plan is counted, in memory and time independent of its run count.

The search space's sections name disjoint hyperparameters (`SearchSpace.validate`).
So a run is a (grid point, sampled draw, seed) triple.
The distinct runs are the product of the distinct grid points, distinct draws and distinct seeds.
Values are compared as the plan types them: `1` for a float is `1.0`.

A grid is a product of axes.
Its distinct points are the product of each axis's distinct values.
A range's count of values comes from its bounds.
The union of sub-grids (`grids`) is their sum where no two overlap.
Where they do overlap, it is listed and deduplicated.

Sampled draws are made with the plan's own generator, in its order, up to `MAX_DEDUPLICATED_DRAWS`.
Repeated draws are counted once.
Past that limit, the rest are counted as drawn, in the proportions of the first ones.
The size then says it is not exact.

A run's FLOPs depend on a few hyperparameters (`Family.FLOPS_HPARAMS`).
Runs are grouped by their values, and the estimate evaluates `run_flops` once per group.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
from typing import Any, Iterable

import numpy as np

from zoo.validation.bounds import MAX_DEDUPLICATED_DRAWS
from zoo.validation.schema import convert, to_data, type_hints
from zoo.planning.search_space import GridRange, SearchSpace

Group = tuple[tuple[str, Any], ...]  # (hyperparameter, typed value) pairs, sorted by name


@dataclasses.dataclass(frozen=True)
class PlanSize:
    runs: int  # distinct runs
    checkpoints: int
    groups: dict[Group, int]  # the FLOPS_HPARAMS values of runs -> how many distinct runs have them
    # why the counts are upper bounds, or None when they are exact: past MAX_DEDUPLICATED_DRAWS
    # draws (or overlapping sub-grid points), repeats are not looked for
    inexact: str | None = None


class _Typed:
    """Values as the plan types them: a hyperparameter's value and its comparison key."""

    def __init__(self, hparams_cls: type, where: str):
        self.hints, self.where = type_hints(hparams_cls), where

    def __call__(self, name: str, value: Any) -> tuple[str, Any]:
        typed = to_data(convert(self.hints[name], value, self.where, name))
        return json.dumps(typed, sort_keys=True), typed


def _axis(typed: _Typed, name: str, values: Any) -> dict[str, Any] | int:
    """An axis's distinct values (key -> typed value), or, for a range, its length."""
    if isinstance(values, GridRange):
        return values.length()
    distinct: dict[str, Any] = {}
    for value in values:
        key, value = typed(name, value)
        distinct.setdefault(key, value)
    return distinct


def _box(typed: _Typed, axes: dict[str, Any], keys: Iterable[str]) -> collections.Counter:
    """A grid's distinct points grouped by their values of `keys`.

    The relevant axes are crossed; the others multiply the counts.
    """
    groups: collections.Counter = collections.Counter({(): 1})
    for name in sorted(axes):
        distinct = _axis(typed, name, axes[name])
        if name not in keys:
            count = distinct if isinstance(distinct, int) else len(distinct)
            groups = collections.Counter({group: n * count for group, n in groups.items()})
            continue
        values = (typed(name, v)[1] for v in axes[name].values()) if isinstance(distinct, int) else distinct.values()
        values = list(values)
        groups = collections.Counter({group + ((name, value),): n for group, n in groups.items() for value in values})
    return groups


def _value_sets(typed: _Typed, axes: dict[str, Any]) -> dict[str, Any]:
    return {name: values if isinstance(values, GridRange) else set(_axis(typed, name, values))
            for name, values in axes.items()}


def _disjoint(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether two sub-grids share no point: some axis has no value in common.

    Ranges are compared by their spans, conservatively.
    """
    for name, a in first.items():
        b = second[name]
        if isinstance(a, set) and isinstance(b, set):
            if not a & b:
                return True
        elif isinstance(a, GridRange) and isinstance(b, GridRange):
            ra, rb = a.values(), b.values()
            if ra.stop <= rb.start or rb.stop <= ra.start:
                return True
        else:
            listed, span = (a, b.values()) if isinstance(a, set) else (b, a.values())
            if not any(isinstance(v := json.loads(key), int) and not isinstance(v, bool) and v in span
                       for key in listed):
                return True
    return False


def _grid_groups(typed: _Typed, space: SearchSpace, keys: tuple[str, ...]) -> tuple[collections.Counter, bool]:
    """Distinct grid points by group, and whether the count is exact.

    The points are the union of the grid crossed with each sub-grid.
    """
    main = _box(typed, space.grid, keys)
    if not space.grids:
        return main, True
    sets = [_value_sets(typed, subgrid) for subgrid in space.grids]
    overlapping = any(not _disjoint(sets[i], sets[j]) for i in range(len(sets)) for j in range(i))
    union: collections.Counter = collections.Counter()
    if not overlapping:
        for subgrid in space.grids:
            union.update(_box(typed, subgrid, keys))
    else:
        union, exact = _listed_union(typed, space.grids, keys)
        if not exact:
            return _cross(main, union), False
    return _cross(main, union), True


def _listed_union(typed: _Typed, subgrids: tuple[dict, ...], keys: tuple[str, ...]) -> tuple[collections.Counter, bool]:
    """Overlapping sub-grids' distinct points, listed one by one up to MAX_DEDUPLICATED_DRAWS.

    Past that they are summed without de-duplication, so the count is not exact.
    """
    total = sum(math.prod(v.length() if isinstance(v, GridRange) else len(v) for v in s.values()) for s in subgrids)
    union: collections.Counter = collections.Counter()
    if total > MAX_DEDUPLICATED_DRAWS:
        for subgrid in subgrids:
            union.update(_box(typed, subgrid, keys))
        return union, False
    seen: set[tuple] = set()
    for subgrid in subgrids:
        names = sorted(subgrid)
        for point in itertools.product(*(list(subgrid[n].values()) if isinstance(subgrid[n], GridRange)
                                         else subgrid[n] for n in names)):
            pairs = [(name, typed(name, value)) for name, value in zip(names, point)]
            key = tuple((name, k) for name, (k, _) in pairs)
            if key in seen:
                continue
            seen.add(key)
            union[tuple((name, v) for name, (_, v) in pairs if name in keys)] += 1
    return union, True


def _cross(first: collections.Counter, second: collections.Counter) -> collections.Counter:
    return collections.Counter({tuple(sorted(a + b)): m * n for a, m in first.items() for b, n in second.items()})


def _draw_groups(typed: _Typed, space: SearchSpace, keys: tuple[str, ...]) -> tuple[collections.Counter, int, int]:
    """Distinct sampled draws by group, with the plan's generator and order (`zoo.planning.plan.configurations`).

    Returns (groups, draws asked for, draws made).
    """
    sampled = space.sampled
    if sampled is None:
        return collections.Counter({(): 1}), 1, 1
    rng = np.random.default_rng(sampled.seed)
    names = sorted(sampled.axes)
    axes = [sampled.axes[name] for name in names]
    known: dict[tuple[str, int], tuple[str, Any]] = {}  # a choice's value (by identity) -> its key and typed value

    def typed_value(name: str, value: Any) -> tuple[Any, Any]:
        if type(value) is float:  # a uniform draw, or a float choice: already typed
            return json.dumps(value), value
        cached = known.get((name, id(value)))
        if cached is None:
            cached = known[(name, id(value))] = typed(name, value)
        return cached

    made = min(sampled.count, MAX_DEDUPLICATED_DRAWS)
    seen: set[tuple] = set()
    groups: collections.Counter = collections.Counter()
    for _ in range(made):
        pairs = [typed_value(name, axis.sample(rng)) for name, axis in zip(names, axes)]
        key = tuple(k for k, _ in pairs)
        if key in seen:
            continue
        seen.add(key)
        groups[tuple((name, v) for name, (_, v) in zip(names, pairs) if name in keys)] += 1
    if made < sampled.count:  # the rest counted as drawn, in the proportions of the first ones
        scale = sampled.count / made
        groups = collections.Counter({group: round(n * scale) for group, n in groups.items()})
    return groups, sampled.count, made


def plan_size(spec, keys: tuple[str, ...] = ()) -> PlanSize:
    """The spec's distinct runs and checkpoints, and its runs grouped by their values of `keys`.

    `keys` are hyperparameters; see the module docstring.
    """
    from zoo.families import get_family

    typed = _Typed(get_family(spec.family).HParams, f"spec {spec.name}")
    space = spec.search_space
    fixed = tuple((name, typed(name, value)[1]) for name, value in space.fixed.items() if name in keys)
    grid, grid_exact = _grid_groups(typed, space, keys)
    draws, asked, made = _draw_groups(typed, space, keys)
    seeds = len(set(spec.seeds))
    groups = collections.Counter()
    for group, count in _cross(collections.Counter({fixed: seeds}), _cross(grid, draws)).items():
        groups[group] += count
    runs = sum(groups.values())
    per_run = len(spec.training.checkpoint_epochs) + spec.training.keep_best
    inexact = None
    if made < asked:
        inexact = (f"the first {made:,} of {asked:,} sampled draws are de-duplicated, the rest counted as drawn "
                   "(zoo.validation.bounds.MAX_DEDUPLICATED_DRAWS)")
    elif not grid_exact:
        inexact = (f"overlapping sub-grids of more than {MAX_DEDUPLICATED_DRAWS:,} points are counted without "
                   "removing their common points (zoo.validation.bounds.MAX_DEDUPLICATED_DRAWS)")
    return PlanSize(runs, runs * per_run, dict(groups), inexact)
