"""The hyperparameter search space of a spec, and its checks against a family's HParams.

A search space holds fixed values, grid axes, a union of sub-grids (``grids``) and sampled axes.
A grid axis is a list of values, or a compact integer range.
A range is ``{range: [start, stop]}`` or ``{range: [start, stop, step]}``, half-open like Python's `range`.
Sampled axes have their own seed.

`check_hyperparameters` checks every value the plan can give a hyperparameter.
Each must have the family's declared type and lie in its domain (`zoo.validation.domains`).
It checks fixed values and grid values themselves, and a range's first and last values.
It also checks a choice's values and both bounds of a uniform or log-uniform axis.
A draw is rounded to 6 significant digits, so it can land on either bound.

`check_plan_size` bounds the plan before anything is enumerated.
It computes the number of runs arithmetically.
That takes grid axis lengths, range lengths, sub-grids, the sampled count and the seeds.
Past `MAX_PLANNED_RUNS` it refuses the plan.
So a few bytes of spec are a one-line error rather than a plan that never finishes or exhausts memory.
Examples are `sampled.count: 1e12` and `range: [0, 9223372036854775807]`.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from zoo.validation.bounds import MAX_PLANNED_CHECKPOINTS, MAX_PLANNED_RUNS
from zoo.validation.domains import Seed, Size, base_type, domain_of
from zoo.validation.schema import DomainError, SchemaError, convert, type_hints

SAMPLED_DIGITS = 6  # significant digits a sampled value keeps


def _rounded(value: float) -> float:
    return float(f"{value:.{SAMPLED_DIGITS}g}")


@dataclasses.dataclass(frozen=True)
class SampledAxis:
    """One sampled hyperparameter: exactly one of the distributions is given."""

    choice: tuple[Any, ...] | None = None  # uniform over these values
    uniform: tuple[float, ...] | None = None  # [low, high]
    log_uniform: tuple[float, ...] | None = None  # [low, high], both > 0

    def validate(self, where: str, key: str) -> None:
        given = [name for name in ("choice", "uniform", "log_uniform") if getattr(self, name) is not None]
        if len(given) != 1:
            raise SchemaError(where, key, f"give exactly one of choice, uniform, log_uniform (got {given or 'none'})")
        values = getattr(self, given[0])
        if given[0] == "choice" and not values:
            raise SchemaError(where, f"{key}.choice", "empty axis; expected at least one value")
        if given[0] != "choice":
            if len(values) != 2 or not values[0] <= values[1]:
                raise SchemaError(where, f"{key}.{given[0]}",
                                  f"expected [low, high] with low <= high, got {list(values)}")
            if given[0] == "log_uniform" and values[0] <= 0:
                raise SchemaError(where, f"{key}.log_uniform", f"expected positive bounds, got {list(values)}")

    @property
    def distribution(self) -> str:
        return next(name for name in ("choice", "uniform", "log_uniform") if getattr(self, name) is not None)

    def sample(self, rng) -> Any:
        """Draws one value with a `numpy.random.Generator`."""
        if self.choice is not None:
            return self.choice[int(rng.integers(len(self.choice)))]
        if self.uniform is not None:
            return _rounded(rng.uniform(*self.uniform))
        low, high = self.log_uniform
        return _rounded(math.exp(rng.uniform(math.log(low), math.log(high))))


@dataclasses.dataclass(frozen=True)
class SampledSpace:
    seed: Seed  # seeds the draws, so planning is reproducible
    count: Size  # configurations drawn (crossed with every grid point)
    axes: dict[str, SampledAxis]

    def validate(self, where: str, key: str) -> None:
        if not self.axes:
            raise SchemaError(where, f"{key}.axes", "empty; expected at least one sampled axis")
        if self.count > MAX_PLANNED_RUNS:  # checked before any draw is made
            raise SchemaError(where, f"{key}.count", f"{self.count:,} configurations; a plan holds at most "
                                                     f"{MAX_PLANNED_RUNS:,} runs")


@dataclasses.dataclass(frozen=True)
class GridRange:
    """A grid axis of integers written compactly: ``{range: [start, stop]}`` or ``[start, stop, step]``."""

    range: tuple[Any, ...]  # Python's range(start, stop[, step]): stop excluded, step > 0

    def check(self, where: str, key: str) -> None:
        bounds = list(self.range)
        if not 2 <= len(bounds) <= 3 or any(isinstance(b, bool) or not isinstance(b, int) for b in bounds):
            raise SchemaError(where, f"{key}.range",
                              f"expected [start, stop] or [start, stop, step] integers, got {bounds}")
        if len(bounds) == 3 and bounds[2] < 1:
            raise SchemaError(where, f"{key}.range", f"expected a positive step, got {bounds[2]}")
        if not bounds[0] < bounds[1]:
            raise SchemaError(where, f"{key}.range", f"expected start < stop, got {bounds}")

    def values(self) -> range:
        return range(*self.range)

    def length(self) -> int:
        """len(self.values()), computed from the bounds (`len` of a range overflows past 2**63)."""
        start, stop, step = (*self.range, 1)[:3]
        return max(0, -(-(stop - start) // step))


def axis_values(values: tuple[Any, ...] | GridRange) -> typing.Sequence[Any]:
    """A grid axis's values in order (a `range` for a `GridRange`, without listing it)."""
    return values.values() if isinstance(values, GridRange) else values


def _grid_axis(values: Any) -> Any:
    """A grid axis as written (a list, or a mapping with one key `range`) -> a tuple or a GridRange.

    Anything else is left as it is, for `SearchSpace.validate` to report.
    """
    if isinstance(values, list):
        return tuple(values)
    if isinstance(values, dict) and set(values) == {"range"} and isinstance(values["range"], (list, tuple)):
        return GridRange(tuple(values["range"]))
    return values


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    fixed: dict[str, Any] = dataclasses.field(default_factory=dict)  # same value for every run
    # full cross product; an axis is a list of values, or {range: [start, stop(, step)]} (a GridRange).
    # Typed Any and checked in `validate`: a Union type would swallow the range's own error message.
    grid: dict[str, Any] = dataclasses.field(default_factory=dict)
    sampled: SampledSpace | None = None  # random configurations, crossed with the grid
    # a union of grids: each sub-grid (axes as in `grid`, all naming the same hyperparameters) is
    # crossed with `grid` and the sampled draws, for values that depend on each other (optimizer ->
    # its learning rates). Typed Any per axis, like `grid`.
    grids: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", {name: _grid_axis(values) for name, values in self.grid.items()})
        object.__setattr__(self, "grids", tuple(
            {name: _grid_axis(values) for name, values in subgrid.items()} if isinstance(subgrid, dict) else subgrid
            for subgrid in self.grids))

    def validate(self, where: str, key: str) -> None:
        _check_axes(self.grid, where, f"{key}.grid")
        for i, subgrid in enumerate(self.grids):
            if not isinstance(subgrid, dict) or not subgrid:
                raise SchemaError(where, f"{key}.grids[{i}]", f"expected a non-empty mapping of hyperparameter -> "
                                                              f"values, got {subgrid!r}")
            _check_axes(subgrid, where, f"{key}.grids[{i}]")
            if set(subgrid) != set(self.grids[0]):
                raise SchemaError(where, f"{key}.grids[{i}]", f"names {sorted(subgrid)}; every sub-grid must name "
                                                              f"the same hyperparameters as grids[0]: "
                                                              f"{sorted(self.grids[0])}")
        names = [list(self.fixed), list(self.grid), list(self.sampled.axes) if self.sampled else []]
        seen: dict[str, str] = {}
        for section, section_names in zip(("fixed", "grid", "sampled.axes"), names):
            for name in section_names:
                if name in seen:
                    raise SchemaError(where, f"{key}.{section}.{name}", f"also set in {key}.{seen[name]}; set it once")
                seen[name] = section
        for i, subgrid in enumerate(self.grids):
            for name in subgrid:
                if name in seen:
                    raise SchemaError(where, f"{key}.grids[{i}].{name}", f"also set in {key}.{seen[name]}; "
                                                                          "set it once")

    def names(self) -> set[str]:
        grids = set(self.grids[0]) if self.grids else set()
        return set(self.fixed) | set(self.grid) | (set(self.sampled.axes) if self.sampled else set()) | grids


def _axis_length(values: Any) -> int:
    return values.length() if isinstance(values, GridRange) else len(values)


def check_plan_size(space: SearchSpace, seeds: int, checkpoints_per_run: int, where: str) -> None:
    """Checks the plan's size (runs before de-duplication) from the spec's numbers alone.

    It must be within `MAX_PLANNED_RUNS` runs and `MAX_PLANNED_CHECKPOINTS` checkpoints, else a `SchemaError`.
    """
    grid = math.prod(_axis_length(values) for values in space.grid.values())
    subgrids = sum(math.prod(_axis_length(values) for values in subgrid.values()) for subgrid in space.grids) \
        if space.grids else 1
    sampled = space.sampled.count if space.sampled is not None else 1
    runs = grid * subgrids * sampled * seeds
    checkpoints = runs * checkpoints_per_run
    if runs > MAX_PLANNED_RUNS or checkpoints > MAX_PLANNED_CHECKPOINTS:
        factors = [f"grid {grid:,}"] if space.grid else []
        factors += [f"grids {subgrids:,}"] if space.grids else []
        factors += [f"sampled.count {sampled:,}"] if space.sampled is not None else []
        factors += [f"seeds {seeds:,}"]
        total = f"{runs:,}" if runs < 10**30 else f"about 10^{len(str(runs)) - 1}"
        raise SchemaError(where, "search_space", f"plans {total} runs ({' x '.join(factors)}) of "
                                                 f"{checkpoints_per_run:,} checkpoints each; at most "
                                                 f"{MAX_PLANNED_RUNS:,} runs and {MAX_PLANNED_CHECKPOINTS:,} "
                                                 "checkpoints")


def _check_axes(axes: dict[str, Any], where: str, key: str) -> None:
    """Each grid axis is a non-empty list of values or a valid GridRange."""
    for name, values in axes.items():
        if isinstance(values, GridRange):
            values.check(where, f"{key}.{name}")
        elif not isinstance(values, tuple):
            raise SchemaError(where, f"{key}.{name}", "expected a list of values or {range: [start, stop]} "
                                                      f"or {{range: [start, stop, step]}}, got {values!r}")
        elif not values:
            raise SchemaError(where, f"{key}.{name}", "empty axis; expected at least one value")


def check_hyperparameters(hparams_cls: type, space: SearchSpace, where: str) -> None:
    """Every hyperparameter of the family is set once.

    Every value the plan can give it has its declared type and lies in its domain.
    """
    hints = type_hints(hparams_cls)
    required = {f.name for f in dataclasses.fields(hparams_cls)}
    for name in sorted(space.names() - required):
        raise SchemaError(where, f"search_space: {name}", f"unknown hyperparameter; expected one of {sorted(required)}")
    for name in sorted(required - space.names()):
        raise SchemaError(where, f"search_space: {name}",
                          "hyperparameter not set; give it in fixed, grid, grids or sampled.axes")
    for name, value in space.fixed.items():
        convert(hints[name], value, where, f"search_space.fixed.{name}")
    sections = [("search_space.grid", space.grid)]
    sections += [(f"search_space.grids[{i}]", subgrid) for i, subgrid in enumerate(space.grids)]
    for section, axes in sections:
        for name, values in axes.items():
            if isinstance(values, GridRange):
                _check_range(hints[name], values, where, f"{section}.{name}")
                continue
            for i, value in enumerate(values):
                convert(hints[name], value, where, f"{section}.{name}[{i}]")
    if space.sampled:
        for name, axis in space.sampled.axes.items():
            _check_sampled(hints[name], axis, where, f"search_space.sampled.axes.{name}")


def _name(hint: Any) -> str:
    tp = base_type(hint)
    return getattr(tp, "__name__", str(tp)) if typing.get_origin(tp) is None else str(tp)


def _check_range(hint: Any, axis: GridRange, where: str, key: str) -> None:
    """An integer hyperparameter, whose domain holds the range's first and last values (and so all)."""
    if base_type(hint) is not int:
        raise SchemaError(where, key, f"a range axis needs an integer hyperparameter; {key.rsplit('.', 1)[-1]} "
                                      f"is {_name(hint)}")
    values = axis.values()
    for position, value in (("first", values[0]), ("last", values[-1])):
        try:
            convert(hint, value, where, f"{key}.range")
        except DomainError as error:
            raise DomainError(where, error.key, f"{error.reason} (the range's {position} value)") from None


def _check_sampled(hint: Any, axis: SampledAxis, where: str, key: str) -> None:
    """A choice's values, or both bounds of a uniform / log-uniform axis, as values of the hyperparameter.

    A rounded draw can equal a bound, so bounds are also checked as they round.
    """
    distribution = axis.distribution
    if distribution != "choice" and base_type(hint) is not float:
        raise SchemaError(where, f"{key}.{distribution}", f"a {distribution} axis draws real numbers; "
                                                          f"{key.rsplit('.', 1)[-1]} is {_name(hint)} "
                                                          "(use choice)")
    for i, value in enumerate(getattr(axis, distribution)):
        convert(hint, value, where, f"{key}.{distribution}[{i}]")
        domain = domain_of(hint)
        if distribution != "choice" and domain is not None and _rounded(value) not in domain:
            raise DomainError(where, f"{key}.{distribution}[{i}]",
                              f"expected {domain}, got {value!r}, which a draw rounds to {_rounded(value)!r} "
                              f"({SAMPLED_DIGITS} significant digits)")
