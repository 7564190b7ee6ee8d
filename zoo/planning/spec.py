"""Zoo specs: the YAML data file that defines one published zoo config.

A spec names the family, the data set, the architecture and the hyperparameter search space.
The search space holds fixed values, grid axes, and sampled axes with their own seed.
A spec also names the training seeds, the epochs and checkpoint epochs, and the dataset splits.
Named profiles override any of these (``tiny`` for tests and the demo).

A grid axis is a list of values or a compact integer range.
A range is ``{range: [start, stop]}`` or ``{range: [start, stop, step]}``, half-open like Python's `range`.
So 70,000 image indices need not be a YAML list.
A search space can also be a union of grids (``grids``).
Each sub-grid names the same hyperparameters with its own values: Adam's learning rates are not SGD's.
Each is crossed with ``grid`` and the sampled draws.
The plan is the sub-grids' plans one after another.

Runs go to splits by seeded fractions.
Or they go by half-open ranges of one integer hyperparameter (``splits.by``).
Those are the classic fixed splits of data sets whose runs are their images.

Loading validates everything against the family, the base spec and every profile.
Each of these is a `SchemaError`: an unknown key, a wrong type, or a value outside its field's domain
(`zoo.validation.domains`).
So are a data set the family cannot load and an empty axis.
The error names the file (and profile), the key, what was expected and what was given.
The search space and its checks are in `zoo.planning.search_space`.

A spec is user input, so reading one is bounded.
Its files are found, read within bounds and extended (`extends`) in `zoo.planning.spec_files`.
The `name` must be a safe path component.
It names files under the output folder: `specs/<name>.json` and `data/<name>/`.
At most `MAX_PROFILES` profiles are merged.
The plan's size is bounded before anything is enumerated (`zoo.planning.search_space.check_plan_size`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from pathlib import Path
from typing import Any, Literal

from zoo.planning.spec_files import merge, read_spec_yaml, resolve_extends, resolve_spec_path
from zoo.validation.bounds import MAX_MEMBER_LAYERS, check_member
from zoo.validation.domains import Count, Fraction, Seed, Size, base_type
from zoo.validation.inputs import InputError, name_problem
from zoo.validation.schema import SchemaError, from_data, to_data, type_hints
# the search space lives in its own module; its names are part of this module's interface
from zoo.planning.search_space import (  # noqa: F401 (re-exported: part of this module's interface)
    GridRange,
    SampledAxis,
    SampledSpace,
    SearchSpace,
    axis_values,
    check_hyperparameters,
    check_plan_size,
)

SPLIT_NAMES = ("train", "validation", "test")
MAX_PROFILES = 64  # each profile is merged onto the base and validated; bundled specs have at most 7


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    name: str  # a data source the family loads (`Family.data_sources`), e.g. "mnist"
    validation_size: Count  # examples held out of the training data (seeded) for model selection
    seed: Seed = 0  # seeds the validation hold-out and the subsets below
    train_size: Size | None = None  # a seeded subset of the remaining training pool (small profiles)
    test_size: Size | None = None  # a seeded subset of the test split (small profiles)
    eval_train_size: Size = 10000  # training examples used to measure train loss/accuracy


@dataclasses.dataclass(frozen=True)
class TrainingSpec:
    epochs: Count
    batch_size: Size
    checkpoint_epochs: tuple[Count, ...]  # epoch 0 is the initialization
    eval_batch_size: Size = 2000
    # also keep the weights of the epoch with the best validation score, as one more planned
    # checkpoint per run (`zoo.planning.plan`: its slot's epoch is BEST_EPOCH; its row records the real epoch)
    keep_best: bool = False
    # drop each epoch's last partial batch (PyTorch's DataLoader(drop_last=True), as the Small
    # Transformer Zoo's reference trains); a pool smaller than one batch is refused
    drop_last: bool = False
    # how per-step draws (batch orders, crops, dropout masks) are made (`zoo.training.draws`):
    # counter-v1 on the training device for the whole population; torch-generator, per member on
    # the host, for every spec that names none (all zoos made before counter-v1)
    rng: Literal["torch-generator", "counter-v1"] = "torch-generator"
    # native: each library uses this processor's best instructions (bytes per instruction set); portable:
    # pinned to x86-64-v3 so the bytes are the same on any x86-64 server (`zoo.training.reproducibility`)
    reproducibility: Literal["native", "portable"] = "native"

    def validate(self, where: str, key: str) -> None:
        if not self.checkpoint_epochs:
            raise SchemaError(where, f"{key}.checkpoint_epochs", "empty; expected at least one epoch")
        bad = [e for e in self.checkpoint_epochs if not 0 <= e <= self.epochs]
        if bad:
            raise SchemaError(where, f"{key}.checkpoint_epochs", f"epochs {bad} are outside 0..{self.epochs}")
        if len(set(self.checkpoint_epochs)) != len(self.checkpoint_epochs):
            raise SchemaError(where, f"{key}.checkpoint_epochs", "contains duplicates")


@dataclasses.dataclass(frozen=True)
class IndexSplits:
    """Fixed splits by one integer hyperparameter: run -> the split whose [start, stop) holds its value."""

    key: str  # an integer hyperparameter of the family, e.g. image_index
    ranges: dict[str, tuple[int, ...]]  # split -> [start, stop), e.g. {train: [0, 45000], ...}

    def validate(self, where: str, key: str) -> None:
        if not self.ranges:
            raise SchemaError(where, f"{key}.ranges", "empty; expected split -> [start, stop]")
        for name, bounds in self.ranges.items():
            if name not in SPLIT_NAMES:
                raise SchemaError(where, f"{key}.ranges.{name}", f"unknown split; expected one of {list(SPLIT_NAMES)}")
            if len(bounds) != 2 or not bounds[0] < bounds[1]:
                raise SchemaError(where, f"{key}.ranges.{name}", f"expected [start, stop] with start < stop, "
                                                                 f"got {list(bounds)}")
        ordered = sorted((bounds[0], bounds[1], name) for name, bounds in self.ranges.items())
        for (_, stop, name), (start, _, other) in zip(ordered, ordered[1:]):
            if start < stop:
                raise SchemaError(where, f"{key}.ranges", f"{name} and {other} overlap; ranges are [start, stop), "
                                                          "stop excluded")

    def split_of(self, value: int) -> str | None:
        for name, (start, stop) in self.ranges.items():
            if start <= value < stop:
                return name
        return None

    def first_uncovered(self, values: typing.Sequence[int]) -> int | None:
        """The first of `values` (a list or a `range`) that no split holds, or None."""
        if not isinstance(values, range):
            return next((v for v in values if self.split_of(v) is None), None)
        if not values:
            return None
        # gaps between the sorted ranges, then the first range element in each gap
        edges = sorted(tuple(bounds) for bounds in self.ranges.values())
        gaps, low = [], values.start
        for start, stop in edges:
            if low < start:
                gaps.append((low, start))
            low = max(low, stop)
        gaps.append((low, values.stop))
        for low, high in gaps:
            first = values.start + max(0, -(-(low - values.start) // values.step)) * values.step
            if low <= first < min(high, values.stop):
                return first
        return None


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    seed: Seed = 0  # seeds the assignment of runs to splits by fractions
    fractions: dict[str, Fraction] | None = None  # e.g. {train: 0.7, validation: 0.1, test: 0.2}
    by: IndexSplits | None = None  # or fixed splits by an integer hyperparameter's ranges

    def validate(self, where: str, key: str) -> None:
        if (self.fractions is None) == (self.by is None):
            raise SchemaError(where, key or "splits", "give exactly one of fractions (seeded) or by (index ranges)")
        if self.fractions is None:
            return
        unknown = sorted(set(self.fractions) - set(SPLIT_NAMES))
        if unknown:
            raise SchemaError(where, f"{key}.fractions.{unknown[0]}",
                              f"unknown split; expected one of {list(SPLIT_NAMES)}")
        if any(f <= 0 for f in self.fractions.values()) or abs(sum(self.fractions.values()) - 1) > 1e-9:
            raise SchemaError(where, f"{key}.fractions",
                              f"expected positive fractions summing to 1, got {self.fractions}")


@dataclasses.dataclass(frozen=True)
class ZooSpec:
    name: str  # the dataset config name, e.g. "cnn-mnist"
    family: str  # a registered zoo family
    dataset: DatasetSpec
    architecture: dict[str, Any]  # validated by the family's Architecture dataclass
    search_space: SearchSpace
    seeds: tuple[Seed, ...]  # every configuration is trained once per seed
    training: TrainingSpec
    splits: SplitSpec
    description: str = ""
    profile: str | None = None  # the profile applied, recorded for the dataset card

    def validate(self, where: str, key: str) -> None:
        problem = name_problem(self.name)
        if problem is not None:  # it becomes specs/<name>.json and data/<name>/ in the output folder
            raise SchemaError(where, "name", problem)
        if not self.seeds:
            raise SchemaError(where, "seeds", "empty; expected at least one seed")
        check_plan_size(self.search_space, len(self.seeds), len(self.training.checkpoint_epochs)
                        + self.training.keep_best, where)
        # families validate their own parts; imported here, so that reading a spec file imports no torch
        from zoo.families.base import get_family

        try:
            family = get_family(self.family)
        except KeyError as error:
            raise SchemaError(where, "family", str(error)) from None
        from_data(family.Architecture, self.architecture, where, "architecture")
        check_member_size(family, self.architecture, where)
        sources = family.data_sources(self.architecture)
        if self.dataset.name not in sources:
            raise SchemaError(where, "dataset.name", f"unknown data set {self.dataset.name!r}; expected one of "
                                                     f"{sorted(sources)} (what family {self.family} loads "
                                                     "for this architecture)")
        check_hyperparameters(family.HParams, self.search_space, where)
        if self.splits.by is not None:
            _check_index_splits(family.HParams, self.search_space, self.splits.by, where)

    def to_data(self) -> dict:
        return to_data(self)

    def hash(self) -> str:
        """The content hash of the resolved spec.

        Some options are newer than older specs (`search_space.grids`, `LEGACY_TRAINING`).
        Left at their defaults, they are left out, so older specs' hashes stay.
        """
        data = self.to_data()
        if not data["search_space"]["grids"]:
            del data["search_space"]["grids"]
        data["training"] = hashed_training(data["training"])
        return content_hash(data)


# training options added after zoos were published, at the values every older spec had: left out
# of spec hashes and run ids at these values, so those zoos keep their hashes and run ids
LEGACY_TRAINING = {"keep_best": False, "drop_last": False, "rng": "torch-generator", "reproducibility": "native"}


def hashed_training(training: dict) -> dict:
    """A spec's `training` data as hashes see it: options at their `LEGACY_TRAINING` value left out."""
    return {key: value for key, value in training.items()
            if key not in LEGACY_TRAINING or LEGACY_TRAINING[key] != value}


def content_hash(data: Any, length: int = 20) -> str:
    """A stable hex digest of JSON-able data (sorted keys, no whitespace)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def check_member_size(family, architecture: dict, where: str) -> None:
    """Checks the member `architecture` declares against `zoo.validation.bounds`, before anything builds it.

    The member is sized arithmetically (`Family.member_size`): layers, each width, parameters.
    """
    size = family.member_size(architecture)
    if not 0 < size.layers <= MAX_MEMBER_LAYERS:
        raise SchemaError(where, "architecture", f"declares {size.layers:,} layers; at most {MAX_MEMBER_LAYERS:,} "
                                                 "(zoo.validation.bounds.MAX_MEMBER_LAYERS)")
    try:
        check_member(f"{where}: architecture", size.parameters, size.widths)
    except InputError as error:
        raise SchemaError(where, "architecture", str(error).removeprefix(f"{where}: architecture: ")) from None


def _check_index_splits(hparams_cls: type, space: SearchSpace, by: IndexSplits, where: str) -> None:
    """The split key is an integer hyperparameter, and every value the plan can give it has a split."""
    hints = type_hints(hparams_cls)
    if by.key not in hints or base_type(hints[by.key]) is not int:
        integers = sorted(name for name, hint in hints.items() if base_type(hint) is int)
        raise SchemaError(where, "splits.by.key", f"expected an integer hyperparameter (one of {integers}), "
                                                  f"got {by.key!r}")
    if by.key in space.fixed:
        planned, section = [space.fixed[by.key]], f"search_space.fixed.{by.key}"
    elif by.key in space.grid:
        planned, section = axis_values(space.grid[by.key]), f"search_space.grid.{by.key}"
    elif space.grids and by.key in space.grids[0]:
        for i, subgrid in enumerate(space.grids):
            uncovered = by.first_uncovered(axis_values(subgrid[by.key]))
            if uncovered is not None:
                raise SchemaError(where, "splits.by.ranges", f"{by.key}={uncovered} (from search_space.grids[{i}]."
                                                             f"{by.key}) falls in no split; ranges are [start, stop): "
                                                             f"{to_data(by.ranges)}")
        return
    else:
        axis = space.sampled.axes[by.key]
        if axis.choice is None:
            raise SchemaError(where, f"search_space.sampled.axes.{by.key}",
                              "a split key must take listed values (fixed, grid or choice)")
        planned, section = axis.choice, f"search_space.sampled.axes.{by.key}"
    uncovered = by.first_uncovered(planned)
    if uncovered is not None:
        raise SchemaError(where, "splits.by.ranges", f"{by.key}={uncovered} (from {section}) falls in no split; "
                                                     f"ranges are [start, stop): {to_data(by.ranges)}")


def load_spec(path: str | Path, profile: str | None = None, *, allow_outside_extends: bool = False) -> ZooSpec:
    """Reads and validates a spec file, applying the named profile.

    The base spec and every profile are validated, whichever profile is asked for.
    A profile that overrides a key must not hide an error in the base.
    Nor may one profile's error wait until someone selects it.
    `extends` may name a file outside the spec's folder tree only with `allow_outside_extends`.
    """
    path = resolve_spec_path(path)
    where = str(path)
    raw = read_spec_yaml(path, where)
    raw = resolve_extends(raw, path, where, path.parent, allow_outside_extends)
    profiles = raw.pop("profiles", None) or {}
    if not isinstance(profiles, dict):
        raise SchemaError(where, "profiles", "expected a mapping of profile name -> overrides")
    if len(profiles) > MAX_PROFILES:
        raise SchemaError(where, "profiles", f"{len(profiles):,} profiles; at most {MAX_PROFILES}")
    for name in profiles:
        problem = name_problem(name)
        if problem is not None:
            raise SchemaError(where, "profiles", f"profile {problem}")
    if "profile" in raw:
        raise SchemaError(where, "profile", "is set by load_spec(profile=...), not in the file")
    if profile is not None and profile not in profiles:
        raise SchemaError(where, "profiles",
                          f"no profile {ascii(profile)[:80]}; available: {sorted(map(str, profiles))}")
    specs = {None: from_data(ZooSpec, raw, where)}
    for name, overrides in profiles.items():
        if not isinstance(overrides, dict):
            raise SchemaError(where, f"profiles.{name}", f"expected a mapping of overrides, got "
                                                         f"{type(overrides).__name__}")
        specs[name] = from_data(ZooSpec, {**merge(raw, overrides), "profile": name}, f"{where} (profile {name})")
    return specs[profile]


def spec_from_data(data: dict, where: str = "<spec>") -> ZooSpec:
    """Rebuilds a resolved spec (as stored in a manifest) and validates it."""
    return from_data(ZooSpec, data, where)
