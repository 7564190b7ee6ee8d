"""Spec files: validation errors name the file, the key and what was expected; profiles merge."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable

import pytest
import yaml

from zoo.schema import SchemaError
from zoo.spec import SPECS_DIR, load_spec, resolve_spec_path, spec_from_data


def bundled_raw() -> dict:
    return yaml.safe_load((SPECS_DIR / "cnn-mnist.yaml").read_text())


def write_spec(folder: Path, mutate: Callable[[dict], None], name: str = "spec.yaml") -> Path:
    raw = bundled_raw()
    mutate(raw)
    path = folder / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def axes(raw: dict) -> dict:
    return raw["search_space"]["sampled"]["axes"]


def _set(*keys: str, value) -> Callable[[dict], None]:
    def mutate(raw: dict) -> None:
        node = raw
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return mutate


def _move_axis_to(section: str, name: str, value) -> Callable[[dict], None]:
    def mutate(raw: dict) -> None:
        del axes(raw)[name]
        raw["search_space"][section] = {name: value}

    return mutate


def _duplicate(section: str, name: str, value) -> Callable[[dict], None]:
    def mutate(raw: dict) -> None:
        raw["search_space"][section] = {name: value}

    return mutate


def _fixed_and_grid(raw: dict) -> None:
    del axes(raw)["dropout"]
    raw["search_space"]["fixed"] = {"dropout": 0.0}
    raw["search_space"]["grid"] = {"dropout": [0.1, 0.2]}


def _delete_axis(name: str) -> Callable[[dict], None]:
    return lambda raw: axes(raw).pop(name)


def _delete(key: str) -> Callable[[dict], None]:
    return lambda raw: raw.pop(key)


def case(mutate, key: str, expected: str, *, bug=None) -> tuple:
    return mutate, key, expected, bug


def _axis(name: str, value) -> Callable[[dict], None]:
    return _set("search_space", "sampled", "axes", name, value=value)


AXES = "search_space.sampled.axes"

# (mutation of the bundled spec, key named in the message, expectation named in the message)
INVALID = {
    "unknown top-level key": case(_set("colour", value="red"), "colour", "unknown key; expected one of"),
    "unknown nested key": case(_set("training", "epochz", value=3), "training.epochz", "unknown key; expected one of"),
    "epochs not an integer": case(_set("training", "epochs", value="ten"), "training.epochs",
                                  "expected an integer, got str 'ten'"),
    "epochs a bool": case(_set("training", "epochs", value=True), "training.epochs", "expected an integer"),
    "string in a float choice": case(_axis("learning_rate", {"choice": [0.01, "fast"]}),
                                     f"{AXES}.learning_rate[1]", "expected a number, got str 'fast'"),
    "value outside a literal": case(_axis("optimizer", {"choice": ["adam", "adamw"]}),
                                    f"{AXES}.optimizer[1]", "expected one of ['adam', 'rmsprop'"),
    "empty grid axis": case(_move_axis_to("grid", "optimizer", []), "search_space.grid.optimizer", "empty axis"),
    "empty choice": case(_axis("optimizer", {"choice": []}), f"{AXES}.optimizer.choice", "empty axis"),
    "two distributions": case(_axis("dropout", {"uniform": [0, 1], "choice": [0.1]}), f"{AXES}.dropout",
                              "give exactly one of choice, uniform, log_uniform"),
    "reversed bounds": case(_axis("dropout", {"uniform": [0.7, 0.1]}), f"{AXES}.dropout.uniform", "low <= high"),
    "non-positive log bounds": case(_axis("l2", {"log_uniform": [0.0, 0.1]}), f"{AXES}.l2.log_uniform",
                                    "positive bounds"),
    "zero sampled count": case(_set("search_space", "sampled", "count", value=0), "search_space.sampled.count",
                               "at least 1"),
    "unknown key under sampled": case(_set("search_space", "sampled", "sead", value=1), "search_space.sampled.sead",
                                      "unknown key"),
    "missing hyperparameter": case(_delete_axis("dropout"), "dropout",
                                   "hyperparameter not set; give it in fixed, grid or sampled.axes"),
    "unknown hyperparameter": case(_axis("momentum", {"uniform": [0.0, 0.9]}), "momentum",
                                   "unknown hyperparameter; expected one of ['activation', 'dropout'"),
    "fractions not summing to 1": case(_set("splits", "fractions", value={"train": 0.7, "validation": 0.1,
                                                                          "test": 0.3}),
                                       "splits.fractions", "summing to 1"),
    "negative fraction": case(_set("splits", "fractions", value={"train": 1.1, "validation": -0.1}),
                              "splits.fractions", "positive fractions"),
    "unknown split": case(_set("splits", "fractions", value={"train": 0.5, "holdout": 0.5}),
                          "splits.fractions.holdout", "unknown split; expected one of ['train', 'validation', 'test']"),
    "checkpoint beyond epochs": case(_set("training", "checkpoint_epochs", value=[0, 1, 87]),
                                     "training.checkpoint_epochs", "epochs [87] are outside 0..86"),
    "duplicate checkpoint": case(_set("training", "checkpoint_epochs", value=[0, 1, 1]), "training.checkpoint_epochs",
                                 "duplicates"),
    "no checkpoints": case(_set("training", "checkpoint_epochs", value=[]), "training.checkpoint_epochs",
                           "expected at least one"),
    "hyperparameter in fixed and sampled": case(_duplicate("fixed", "optimizer", "adam"), f"{AXES}.optimizer",
                                                "also set in search_space.fixed"),
    "hyperparameter in fixed and grid": case(_fixed_and_grid, "search_space.grid.dropout",
                                             "also set in search_space.fixed"),
    "unknown family": case(_set("family", value="transformer"), "family",
                           "unknown zoo family 'transformer'; valid names: cnn"),
    "unknown architecture field": case(_set("architecture", "width", value=8), "architecture.width", "unknown key"),
    "architecture wrong type": case(_set("architecture", "channels", value=16.5), "architecture.channels",
                                    "expected an integer"),
    "optional given a wrong type": case(_set("dataset", "train_size", value="big"), "dataset.train_size",
                                        "expected an integer, got str 'big' (or null)"),
    "missing section": case(_delete("training"), "training", "missing; expected TrainingSpec"),
    "empty seeds": case(_set("seeds", value=[]), "seeds", "expected at least one seed"),
    "profile set in the file": case(_set("profile", value="tiny"), "profile", "is set by load_spec"),
}


@pytest.mark.parametrize("mutate", [c[0] for c in INVALID.values()], ids=INVALID.keys())
def test_invalid_spec_is_rejected_naming_the_file(tmp_path, mutate):
    path = write_spec(tmp_path, mutate)
    with pytest.raises(SchemaError) as caught:
        load_spec(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert caught.value.where == str(path)


@pytest.mark.parametrize("mutate, key, expected", [
    pytest.param(mutate, key, expected, marks=[bug] if bug else [], id=name)
    for name, (mutate, key, expected, bug) in INVALID.items()])
def test_invalid_spec_error_names_file_key_and_expectation(tmp_path, mutate, key, expected):
    path = write_spec(tmp_path, mutate)
    with pytest.raises(SchemaError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert message.startswith(str(path)), message
    assert key in message, message
    assert expected in message, message


def test_error_in_a_profile_names_the_profile(tmp_path):
    path = write_spec(tmp_path, _set("profiles", "tiny", "training", "epochz", value=2))
    load_spec(path)  # the base spec is fine; only the profile is broken
    with pytest.raises(SchemaError, match=r"\(profile tiny\): training\.epochz: unknown key"):
        load_spec(path, "tiny")


def test_unknown_profile_lists_available_ones():
    expected = r"cnn-mnist\.yaml: profiles: no profile 'huge'; available: \['demo', 'tiny'\]"
    with pytest.raises(SchemaError, match=expected):
        load_spec("cnn-mnist", "huge")


@pytest.mark.parametrize("text, expected", [("name: [unclosed", "not valid YAML"),
                                            ("- a\n- list\n", "expected a mapping at the top level")])
def test_malformed_file_is_a_schema_error(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SchemaError, match=expected):
        load_spec(path)


def test_bundled_spec_loads_with_every_profile():
    full = load_spec("cnn-mnist")
    assert full.profile is None and full.training.epochs == 86 and full.search_space.sampled.count == 30000
    for profile in ("tiny", "demo"):
        spec = load_spec("cnn-mnist", profile)
        assert spec.profile == profile
        assert spec.training.epochs < full.training.epochs


def test_profiles_deep_merge_into_the_base():
    full, tiny, demo = load_spec("cnn-mnist"), load_spec("cnn-mnist", "tiny"), load_spec("cnn-mnist", "demo")
    # overridden leaves
    assert tiny.dataset.validation_size == 1000 and tiny.dataset.train_size == 2000
    assert tiny.search_space.sampled.count == 8
    assert tiny.training.checkpoint_epochs == (0, 1, 2)
    # siblings of overridden leaves come from the base
    assert tiny.dataset.name == full.dataset.name == "mnist"
    assert tiny.search_space.sampled.seed == full.search_space.sampled.seed
    assert tiny.search_space.sampled.axes == full.search_space.sampled.axes
    assert tiny.architecture == full.architecture and tiny.splits == full.splits
    # a profile overriding one axis keeps the others
    assert demo.search_space.sampled.axes["dropout"].uniform == (0.0, 0.5)
    assert full.search_space.sampled.axes["dropout"].uniform == (0.0, 0.7)
    others = {k: v for k, v in demo.search_space.sampled.axes.items() if k != "dropout"}
    assert others == {k: v for k, v in full.search_space.sampled.axes.items() if k != "dropout"}


def test_null_in_a_profile_deletes_the_key(tmp_path):
    def mutate(raw: dict) -> None:
        raw["dataset"]["seed"] = 5
        raw["profiles"]["fixed-dropout"] = {
            "description": None,
            "dataset": {"seed": None},
            "search_space": {"fixed": {"dropout": 0.0}, "sampled": {"axes": {"dropout": None}}},
        }

    path = write_spec(tmp_path, mutate)
    base, spec = load_spec(path), load_spec(path, "fixed-dropout")
    assert base.description and base.dataset.seed == 5
    assert spec.description == ""  # deleted -> the dataclass default
    assert spec.dataset.seed == 0
    assert "dropout" not in spec.search_space.sampled.axes
    assert spec.search_space.fixed == {"dropout": 0.0}


def test_null_deleting_a_required_key_is_reported(tmp_path):
    path = write_spec(tmp_path, _set("profiles", "tiny", "training", value={"epochs": None}))
    with pytest.raises(SchemaError, match=r"\(profile tiny\): training\.epochs: missing; expected int"):
        load_spec(path, "tiny")


def test_spec_round_trips_through_data():
    spec = load_spec("cnn-mnist", "tiny")
    again = spec_from_data(copy.deepcopy(spec.to_data()))
    assert again == spec
    assert again.hash() == spec.hash()
    assert load_spec("cnn-mnist", "demo").hash() != spec.hash()


def test_unknown_spec_name_lists_bundled_specs():
    with pytest.raises(FileNotFoundError, match="no spec file 'cnn-cifar'; bundled specs: cnn-mnist"):
        resolve_spec_path("cnn-cifar")


def test_directory_named_like_a_bundled_spec_does_not_shadow_it(tmp_path, monkeypatch):
    # `nfnzoo generate cnn-mnist --out cnn-mnist` run a second time (to resume) hits this.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cnn-mnist").mkdir()
    assert load_spec("cnn-mnist", "tiny") == load_spec(SPECS_DIR / "cnn-mnist.yaml", "tiny")


def test_zero_batch_size_is_rejected_on_load(tmp_path):
    path = write_spec(tmp_path, _set("training", "batch_size", value=0))
    with pytest.raises(SchemaError, match="training.batch_size"):
        load_spec(path)
