"""Value domains (`zoo.validation.domains`): every field's range is checked when a spec loads.

A value outside its domain is a `SchemaError` naming the file, the key path, the domain and the
value, wherever the value is written: fixed, a grid list, a range's ends, a sub-grid, a choice,
a sampled bound, the architecture, the dataset or the training section. The family tests are
parametrized over the registry, so a new family gets them for free.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path
from typing import Callable

import pytest
import yaml

from zoo.cli import main
from zoo.validation.domains import Domain, Probability, base_type, domain_of
from zoo.families import create_family, list_families
from zoo.storage.record import arrow_schema
from zoo.validation.schema import DomainError, SchemaError, type_hints
from zoo.planning.spec import load_spec
from zoo.planning.spec_files import SPECS_DIR

AXES = "search_space.sampled.axes"


def raw_spec(name: str) -> dict:
    return yaml.safe_load((SPECS_DIR / f"{name}.yaml").read_text())


def write(folder: Path, raw: dict, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def mutated(name: str, mutate: Callable[[dict], None]) -> dict:
    raw = raw_spec(name)
    mutate(raw)
    return raw


def _set(*keys, value) -> Callable[[dict], None]:
    def mutate(raw: dict) -> None:
        node = raw
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return mutate


def _move_to(section: str, name: str, value) -> Callable[[dict], None]:
    """Takes hyperparameter `name` out of wherever the spec sets it and puts `value` in `section`."""
    def mutate(raw: dict) -> None:
        _unset(raw["search_space"], name)
        raw["search_space"].setdefault(section, {})[name] = value

    return mutate


def _unset(space: dict, name: str) -> None:
    for section in ("fixed", "grid"):
        (space.get(section) or {}).pop(name, None)
    if space.get("sampled"):
        space["sampled"]["axes"].pop(name, None)
    for subgrid in space.get("grids") or []:
        subgrid.pop(name, None)


def _bundled_spec_of(family: str) -> str:
    """The first bundled spec of `family` that extends nothing."""
    for path in sorted(SPECS_DIR.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        if raw.get("family") == family and "extends" not in raw:
            return path.stem
    raise AssertionError(f"no bundled spec of family {family}")


def _outside(domain: Domain, tp: type):
    """A value of type `tp` just outside `domain`."""
    if domain.low is not None:
        value = domain.low if domain.low_open else domain.low - 1
    elif domain.high is not None:
        value = domain.high if domain.high_open else domain.high + 1
    else:
        return math.nan
    return int(value) if tp is int else float(value)


def _domain_fields(cls: type) -> list[tuple[str, Domain, type]]:
    hints = type_hints(cls)
    return [(f.name, domain_of(hints[f.name]), base_type(hints[f.name])) for f in dataclasses.fields(cls)
            if domain_of(hints[f.name]) is not None]


def assert_rejected(path: Path, key: str, expected: str, profile: str | None = None) -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        load_spec(path, profile)
    assert str(caught.value) == f"{path}: {key}: {expected}"
    return caught.value


# --- the cases, and each place a value can be written ---------------------------------

def _cnn(mutate) -> Callable[[], dict]:
    return lambda: mutated("cnn-mnist", mutate)


def _inr(mutate) -> Callable[[], dict]:
    return lambda: mutated("inr-mnist", mutate)


def _transformer(mutate) -> Callable[[], dict]:
    return lambda: mutated("transformer-mnist", mutate)


VIOLATIONS = {
    "sampled uniform upper bound (the issue's case)": (
        _cnn(_set("search_space", "sampled", "axes", "dropout", value={"uniform": [0.0, 1.7]})),
        f"{AXES}.dropout.uniform[1]", "expected a probability in [0, 1), got 1.7"),
    "sampled bound on the open end of the domain": (
        _cnn(_set("search_space", "sampled", "axes", "dropout", value={"uniform": [0.0, 1.0]})),
        f"{AXES}.dropout.uniform[1]", "expected a probability in [0, 1), got 1.0"),
    "sampled bound that a draw rounds onto the open end": (
        _cnn(_set("search_space", "sampled", "axes", "dropout", value={"uniform": [0.0, 0.99999999]})),
        f"{AXES}.dropout.uniform[1]",
        "expected a probability in [0, 1), got 0.99999999, which a draw rounds to 1.0 (6 significant digits)"),
    "sampled lower bound": (
        _cnn(_set("search_space", "sampled", "axes", "train_fraction", value={"uniform": [0.0, 0.5]})),
        f"{AXES}.train_fraction.uniform[0]", "expected a fraction in (0, 1], got 0.0"),
    "sampled log-uniform bound": (
        _cnn(_set("search_space", "sampled", "axes", "dropout", value={"log_uniform": [0.1, 2.0]})),
        f"{AXES}.dropout.log_uniform[1]", "expected a probability in [0, 1), got 2.0"),
    "choice value": (
        _cnn(_set("search_space", "sampled", "axes", "learning_rate", value={"choice": [0.01, -0.01]})),
        f"{AXES}.learning_rate.choice[1]", "expected a learning rate (> 0), got -0.01"),
    "fixed value": (
        _cnn(_move_to("fixed", "l2", -1e-4)), "search_space.fixed.l2",
        "expected a non-negative coefficient (>= 0), got -0.0001"),
    "grid value": (
        _cnn(_move_to("grid", "init_std", [0.1, 0.0])), "search_space.grid.init_std[1]",
        "expected a positive number (> 0), got 0.0"),
    "sub-grid value": (
        _transformer(_set("search_space", "grids", 1, "init_std", value=[0.1, -0.2])),
        "search_space.grids[1].init_std[1]", "expected a positive number (> 0), got -0.2"),
    "integer grid value": (
        _transformer(_move_to("grid", "warmup_epochs", [10, -1])), "search_space.grid.warmup_epochs[1]",
        "expected a non-negative integer (>= 0), got -1"),
    "range start": (
        _inr(_set("search_space", "grid", "image_index", value={"range": [-5, 10]})),
        "search_space.grid.image_index.range", "expected an index (>= 0), got -5 (the range's first value)"),
    "infinite value": (
        _transformer(_move_to("fixed", "final_learning_rate", math.inf)), "search_space.fixed.final_learning_rate",
        "expected a learning rate (>= 0), got inf"),
    "not a number": (
        _transformer(_set("architecture", "pixel_mean", value=math.nan)), "architecture.pixel_mean",
        "expected a number (finite), got nan"),
    "architecture field (the issue's case)": (
        _cnn(_set("architecture", "channels", value=-4)), "architecture.channels",
        "expected a positive integer (>= 1), got -4"),
    "architecture class count": (
        _cnn(_set("architecture", "num_classes", value=1)), "architecture.num_classes",
        "expected a class count (>= 2), got 1"),
    "architecture divisor that would divide by zero": (
        _transformer(_set("architecture", "patch_size", value=0)), "architecture.patch_size",
        "expected a positive integer (>= 1), got 0"),
    "dataset validation size": (
        _cnn(_set("dataset", "validation_size", value=-1)), "dataset.validation_size",
        "expected a non-negative integer (>= 0), got -1"),
    "dataset optional size": (
        _cnn(_set("dataset", "train_size", value=0)), "dataset.train_size",
        "expected a positive integer (>= 1), got 0"),
    "dataset test size": (
        _cnn(_set("dataset", "test_size", value=-10)), "dataset.test_size",
        "expected a positive integer (>= 1), got -10"),
    "dataset eval train size": (
        _cnn(_set("dataset", "eval_train_size", value=0)), "dataset.eval_train_size",
        "expected a positive integer (>= 1), got 0"),
    "dataset seed": (
        _cnn(_set("dataset", "seed", value=-3)), "dataset.seed", "expected a seed (>= 0), got -3"),
    "training epochs": (
        _cnn(_set("training", "epochs", value=-1)), "training.epochs",
        "expected a non-negative integer (>= 0), got -1"),
    "training batch size": (
        _cnn(_set("training", "batch_size", value=0)), "training.batch_size",
        "expected a positive integer (>= 1), got 0"),
    "training eval batch size": (
        _cnn(_set("training", "eval_batch_size", value=-5)), "training.eval_batch_size",
        "expected a positive integer (>= 1), got -5"),
    "training checkpoint epoch": (
        _cnn(_set("training", "checkpoint_epochs", value=[-1, 0])), "training.checkpoint_epochs[0]",
        "expected a non-negative integer (>= 0), got -1"),
    "training seed": (
        _cnn(_set("seeds", value=[0, -1])), "seeds[1]", "expected a seed (>= 0), got -1"),
    "sampled seed": (
        _cnn(_set("search_space", "sampled", "seed", value=-1)), "search_space.sampled.seed",
        "expected a seed (>= 0), got -1"),
    "split fraction": (
        _cnn(_set("splits", "fractions", value={"train": 0.0, "validation": 0.5, "test": 0.5})),
        "splits.fractions.train", "expected a fraction in (0, 1], got 0.0"),
}


@pytest.mark.parametrize("build, key, expected", VIOLATIONS.values(), ids=VIOLATIONS.keys())
def test_a_value_outside_its_domain_is_rejected_naming_file_key_domain_and_value(tmp_path, build, key, expected):
    error = assert_rejected(write(tmp_path, build()), key, expected)
    assert isinstance(error, DomainError)


def test_a_uniform_axis_needs_a_real_hyperparameter(tmp_path):
    def mutate(raw: dict) -> None:
        _unset(raw["search_space"], "image_index")
        raw["search_space"]["sampled"] = {"seed": 0, "count": 2, "axes": {"image_index": {"uniform": [0, 10]}}}
        raw["splits"] = {"fractions": {"train": 0.5, "test": 0.5}}

    path = write(tmp_path, mutated("inr-mnist", mutate))
    assert_rejected(path, f"{AXES}.image_index.uniform", "a uniform axis draws real numbers; image_index is int "
                                                        "(use choice)")


def test_the_range_end_is_checked_not_its_stop(tmp_path):
    path = write(tmp_path, mutated("inr-mnist", _set("search_space", "grid", "image_index", value={"range": [-9, 0]})))
    assert_rejected(path, "search_space.grid.image_index.range", "expected an index (>= 0), got -9 (the range's "
                                                                 "first value)")
    # a range whose values all lie in the domain loads, though its stop is one past them
    load_spec(write(tmp_path, mutated("inr-mnist", _set("search_space", "grid", "image_index",
                                                        value={"range": [0, 70000, 7]}))))


# --- over the family registry ----------------------------------------------------------------

def _architecture_cases() -> list:
    return [pytest.param(family, name, domain, tp, id=f"{family}.{name}")
            for family in list_families()
            for name, domain, tp in _domain_fields(create_family(family).Architecture)]


def _hyperparameter_cases() -> list:
    return [pytest.param(family, name, domain, tp, id=f"{family}.{name}")
            for family in list_families()
            for name, domain, tp in _domain_fields(create_family(family).HParams)]


@pytest.mark.parametrize("family", list_families())
def test_every_numeric_field_of_every_family_declares_a_domain(family):
    for cls in (create_family(family).Architecture, create_family(family).HParams):
        hints = type_hints(cls)
        undeclared = [name for name, hint in hints.items()
                      if base_type(hint) in (int, float) and domain_of(hint) is None]
        assert undeclared == [], f"{cls.__name__}: give {undeclared} a domain (zoo.validation.domains)"


@pytest.mark.parametrize("family, name, domain, tp", _architecture_cases())
def test_each_architecture_field_outside_its_domain_is_rejected(tmp_path, family, name, domain, tp):
    value = _outside(domain, tp)
    raw = mutated(_bundled_spec_of(family), _set("architecture", name, value=value))
    assert_rejected(write(tmp_path, raw), f"architecture.{name}", f"expected {domain}, got {value!r}")


@pytest.mark.parametrize("family, name, domain, tp", _hyperparameter_cases())
@pytest.mark.parametrize("section", ["fixed", "grid"])
def test_each_hyperparameter_outside_its_domain_is_rejected(tmp_path, family, name, domain, tp, section):
    value = _outside(domain, tp)
    raw = mutated(_bundled_spec_of(family), _move_to(section, name, value if section == "fixed" else [value]))
    if "by" in raw["splits"] and raw["splits"]["by"]["key"] == name:  # the split key itself: split by fractions
        raw["splits"] = {"fractions": {"train": 1.0}}
    key = f"search_space.{section}.{name}" + ("[0]" if section == "grid" else "")
    assert_rejected(write(tmp_path, raw), key, f"expected {domain}, got {value!r}")


@pytest.mark.parametrize("family", list_families())
def test_an_unknown_data_set_is_rejected_listing_what_the_family_loads(tmp_path, family):
    name = _bundled_spec_of(family)
    raw = mutated(name, _set("dataset", "name", value="mnistt"))
    known = sorted(create_family(family).data_sources(raw["architecture"]))
    assert known, f"family {family} loads no data set"
    assert raw_spec(name)["dataset"]["name"] in known
    assert_rejected(write(tmp_path, raw), "dataset.name", f"unknown data set 'mnistt'; expected one of {known} "
                                                          f"(what family {family} loads for this architecture)")


def test_every_loadable_data_set_has_planning_sizes():
    """A name a family accepts must also be one the planner (`nfnzoo generate --dry-run`) can size."""
    from zoo.data.images import SOURCE_INFO, image_source_names
    from zoo.data.text import SOURCE_SIZES, TEXT_SOURCES

    assert set(image_source_names()) == set(SOURCE_INFO)
    assert set(TEXT_SOURCES.names()) == set(SOURCE_SIZES)


def test_the_transformers_data_sets_follow_its_input():
    family = create_family("transformer")
    images = family.data_sources(load_spec("transformer-mnist").architecture)
    texts = family.data_sources(load_spec("transformer-agnews").architecture)
    assert "mnist" in images and "ag_news" not in images
    assert texts == ["ag_news", "ag_news_7600"]


# --- the mechanism -----------------------------------------------------------------------------

def test_domains_hide_from_plain_type_hints_and_the_arrow_schema():
    family = create_family("cnn")
    assert typing.get_type_hints(family.HParams)["dropout"] is float
    assert type_hints(family.HParams)["dropout"] == Probability
    assert str(arrow_schema(family.HParams, family.METRICS).field("dropout").type) == "double"


@pytest.mark.parametrize("value, inside", [(0.0, True), (0.999, True), (1.0, False), (-0.0001, False),
                                           (math.nan, False), (True, False), ("0.5", False)])
def test_a_probability_is_in_zero_to_one_open_at_one(value, inside):
    assert (value in domain_of(Probability)) is inside


# --- through the command line ------------------------------------------------------------------

CLI_CASES = {
    "dropout above one": ("cnn-mnist",
                          _set("search_space", "sampled", "axes", "dropout", value={"uniform": [0.0, 1.7]}),
                          None,
                          "search_space.sampled.axes.dropout.uniform[1]: expected a probability in [0, 1), got 1.7"),
    "negative channels": ("cnn-mnist", _set("architecture", "channels", value=-4), None,
                          "architecture.channels: expected a positive integer (>= 1), got -4"),
    "unknown data set": ("cnn-mnist", _set("dataset", "name", value="mnistt"), None,
                         "dataset.name: unknown data set 'mnistt'; expected one of ['cifar10', 'cifar100', "
                         "'cifar10_gs', "
                         "'fashion_mnist', 'mnist', 'svhn_gs']"),
    "base error under a profile": ("cnn-mnist", _set("training", "epochs", value="eighty-six"), "tiny",
                                   "training.epochs: expected an integer, got str 'eighty-six'"),
}


@pytest.mark.parametrize("spec, mutate, profile, expected", CLI_CASES.values(), ids=CLI_CASES.keys())
def test_generate_rejects_a_bad_spec_in_one_line_and_writes_nothing(tmp_path, capsys, spec, mutate, profile, expected):
    path, out = write(tmp_path, mutated(spec, mutate)), tmp_path / "zoo"
    code = main(["generate", str(path), "--out", str(out)] + (["--profile", profile] if profile else []))
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and err.startswith(f"nfnzoo generate: error: {path}: "), err
    assert expected in err and "Traceback" not in err
    assert not (out / "specs").exists()
