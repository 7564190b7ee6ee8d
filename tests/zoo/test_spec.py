"""Spec files: validation errors name the file, the key and what was expected; profiles merge."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable

import pytest
import yaml

from zoo.validation.schema import SchemaError
from zoo.planning.spec import GridRange, IndexSplits, axis_values, load_spec, spec_from_data
from zoo.planning.spec_files import SPECS_DIR, resolve_spec_path


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


def _grids(*subgrids) -> Callable[[dict], None]:
    """Moves optimizer and learning_rate from the sampled axes into `search_space.grids`."""
    def mutate(raw: dict) -> None:
        axes(raw).pop("optimizer")
        axes(raw).pop("learning_rate")
        raw["search_space"]["grids"] = [dict(g) for g in subgrids]

    return mutate


def _grids_and(section: str, name: str, value) -> Callable[[dict], None]:
    def mutate(raw: dict) -> None:
        _grids({"optimizer": ["adam"], "learning_rate": [1e-3]})(raw)
        if section == "sampled":
            axes(raw)[name] = {"choice": value}
        else:
            raw["search_space"].setdefault(section, {})[name] = value

    return mutate

# (mutation of the bundled spec, key named in the message, expectation named in the message)
INVALID = {
    "unknown top-level key": case(_set("colour", value="red"), "colour", "unknown key; expected one of"),
    "unknown nested key": case(_set("training", "epochz", value=3), "training.epochz", "unknown key; expected one of"),
    "epochs not an integer": case(_set("training", "epochs", value="ten"), "training.epochs",
                                  "expected an integer, got str 'ten'"),
    "epochs a bool": case(_set("training", "epochs", value=True), "training.epochs", "expected an integer"),
    "string in a float choice": case(_axis("learning_rate", {"choice": [0.01, "fast"]}),
                                     f"{AXES}.learning_rate.choice[1]", "expected a number, got str 'fast'"),
    "value outside a literal": case(_axis("optimizer", {"choice": ["adam", "adamw"]}),
                                    f"{AXES}.optimizer.choice[1]", "expected one of ['adam', 'rmsprop'"),
    "empty grid axis": case(_move_axis_to("grid", "optimizer", []), "search_space.grid.optimizer", "empty axis"),
    "empty choice": case(_axis("optimizer", {"choice": []}), f"{AXES}.optimizer.choice", "empty axis"),
    "two distributions": case(_axis("dropout", {"uniform": [0, 1], "choice": [0.1]}), f"{AXES}.dropout",
                              "give exactly one of choice, uniform, log_uniform"),
    "reversed bounds": case(_axis("dropout", {"uniform": [0.7, 0.1]}), f"{AXES}.dropout.uniform", "low <= high"),
    "non-positive log bounds": case(_axis("l2", {"log_uniform": [0.0, 0.1]}), f"{AXES}.l2.log_uniform",
                                    "positive bounds"),
    "zero sampled count": case(_set("search_space", "sampled", "count", value=0), "search_space.sampled.count",
                               "expected a positive integer (>= 1), got 0"),
    "unknown key under sampled": case(_set("search_space", "sampled", "sead", value=1), "search_space.sampled.sead",
                                      "unknown key"),
    "missing hyperparameter": case(_delete_axis("dropout"), "dropout",
                                   "hyperparameter not set; give it in fixed, grid, grids or sampled.axes"),
    "unknown hyperparameter": case(_axis("momentum", {"uniform": [0.0, 0.9]}), "momentum",
                                   "unknown hyperparameter; expected one of ['activation', 'dropout'"),
    "fractions not summing to 1": case(_set("splits", "fractions", value={"train": 0.7, "validation": 0.1,
                                                                          "test": 0.3}),
                                       "splits.fractions", "summing to 1"),
    "negative fraction": case(_set("splits", "fractions", value={"train": 1.1, "validation": -0.1}),
                              "splits.fractions.train", "expected a fraction in (0, 1], got 1.1"),
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
    "empty sub-grid axis": case(_grids({"optimizer": ["adam"], "learning_rate": [1e-3]},
                                       {"optimizer": ["sgd"], "learning_rate": []}),
                                "search_space.grids[1].learning_rate", "empty axis"),
    "empty sub-grid": case(_grids({"optimizer": ["adam"], "learning_rate": [1e-3]}, {}), "search_space.grids[1]",
                           "expected a non-empty mapping"),
    "sub-grids naming different hyperparameters": case(
        _grids({"optimizer": ["adam"], "learning_rate": [1e-3]}, {"optimizer": ["sgd"]}), "search_space.grids[1]",
        "every sub-grid must name the same hyperparameters as grids[0]: ['learning_rate', 'optimizer']"),
    "sub-grid value of a wrong type": case(_grids({"optimizer": ["adam"], "learning_rate": [1e-3]},
                                                  {"optimizer": ["sgd"], "learning_rate": ["fast"]}),
                                           "search_space.grids[1].learning_rate[0]", "expected a number"),
    "sub-grid value outside a literal": case(_grids({"optimizer": ["adamw"], "learning_rate": [1e-3]}),
                                             "search_space.grids[0].optimizer[0]", "expected one of ['adam'"),
    "hyperparameter in grids and fixed": case(_grids_and("fixed", "optimizer", "adam"),
                                              "search_space.grids[0].optimizer", "also set in search_space.fixed"),
    "hyperparameter in grids and grid": case(_grids_and("grid", "learning_rate", [1e-2]),
                                             "search_space.grids[0].learning_rate", "also set in search_space.grid"),
    "hyperparameter in grids and sampled": case(_grids_and("sampled", "optimizer", ["sgd"]),
                                                "search_space.grids[0].optimizer",
                                                "also set in search_space.sampled.axes"),
    "unknown family": case(_set("family", value="resnet"), "family",
                           "unknown zoo family 'resnet'; valid names: cnn"),
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
    # the base spec is fine; only the profile is broken, and every profile is checked on every load
    for selected in (None, "tiny", "demo"):
        with pytest.raises(SchemaError, match=r"\(profile tiny\): training\.epochz: unknown key"):
            load_spec(path, selected)


def test_a_profile_overriding_a_key_does_not_hide_an_error_in_the_base(tmp_path):
    path = write_spec(tmp_path, _set("training", "epochs", value="eighty-six"))  # `tiny` sets epochs: 2
    for selected in (None, "tiny", "demo"):
        with pytest.raises(SchemaError) as caught:
            load_spec(path, selected)
        assert str(caught.value) == f"{path}: training.epochs: expected an integer, got str 'eighty-six'"


def test_an_error_in_another_profile_is_reported_whichever_is_selected(tmp_path):
    path = write_spec(tmp_path, _set("profiles", "demo", "search_space", "sampled", "axes", "dropout",
                                     value={"uniform": [0.0, 1.5]}))
    with pytest.raises(SchemaError) as caught:
        load_spec(path, "tiny")
    assert str(caught.value) == (f"{path} (profile demo): search_space.sampled.axes.dropout.uniform[1]: "
                                 "expected a probability in [0, 1), got 1.5")


def test_a_profile_that_is_not_a_mapping_is_reported(tmp_path):
    path = write_spec(tmp_path, _set("profiles", "demo", value=["epochs", 2]))
    with pytest.raises(SchemaError, match=r"spec\.yaml: profiles\.demo: expected a mapping of overrides"):
        load_spec(path, "tiny")


def test_unknown_profile_lists_available_ones():
    expected = r"cnn-mnist\.yaml: profiles: no profile 'huge'; available: \['bench', 'demo', 'suite-v2', 'tiny'\]"
    with pytest.raises(SchemaError, match=expected):
        load_spec("cnn-mnist", "huge")


@pytest.mark.parametrize("text, expected", [("name: [unclosed", "not valid YAML"),
                                            ("- a\n- list\n", "expected a mapping at the top level")])
def test_malformed_file_is_a_schema_error(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SchemaError, match=expected):
        load_spec(path)


def _bundled_profiles() -> list[tuple[str, str | None]]:
    cases = []
    for path in sorted(SPECS_DIR.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        profiles = set(raw.get("profiles") or {})
        base = raw.get("extends")
        while base is not None:  # an extending spec inherits its base's profiles
            base_raw = yaml.safe_load((SPECS_DIR / f"{base}.yaml").read_text())
            profiles |= set(base_raw.get("profiles") or {})
            base = base_raw.get("extends")
        cases += [(path.stem, None)] + [(path.stem, name) for name in sorted(profiles)]
    return cases


@pytest.mark.parametrize("name, profile", _bundled_profiles(), ids=lambda v: str(v))
def test_every_bundled_spec_loads_with_each_of_its_profiles(name, profile):
    spec = load_spec(name, profile)
    assert spec.name == name and spec.profile == profile


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
    with pytest.raises(FileNotFoundError, match="no spec file 'cnn-nope'; bundled specs: .*cnn-mnist"):
        resolve_spec_path("cnn-nope")


def test_directory_named_like_a_bundled_spec_does_not_shadow_it(tmp_path, monkeypatch):
    # `nfnzoo generate cnn-mnist --out cnn-mnist` run a second time (to resume) hits this.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cnn-mnist").mkdir()
    assert load_spec("cnn-mnist", "tiny") == load_spec(SPECS_DIR / "cnn-mnist.yaml", "tiny")


def test_zero_batch_size_is_rejected_on_load(tmp_path):
    path = write_spec(tmp_path, _set("training", "batch_size", value=0))
    with pytest.raises(SchemaError, match="training.batch_size"):
        load_spec(path)


# --- integer range axes and index-range splits (the INR family's image_index) ---------------

def write_inr_spec(folder: Path, mutate: Callable[[dict], None]) -> Path:
    raw = yaml.safe_load((SPECS_DIR / "inr-mnist.yaml").read_text())
    mutate(raw)
    path = folder / "inr.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _image_axis(value) -> Callable[[dict], None]:
    return _set("search_space", "grid", "image_index", value=value)


def _split_ranges(**ranges) -> Callable[[dict], None]:
    return _set("splits", "by", "ranges", value={"train": [0, 45000], "validation": [45000, 50000],
                                                 "test": [50000, 70000], **ranges})


def _learning_rate_range(raw: dict) -> None:
    del raw["search_space"]["fixed"]["learning_rate"]
    raw["search_space"]["grid"]["learning_rate"] = {"range": [1, 3]}


def _both_split_rules(raw: dict) -> None:
    raw["splits"]["fractions"] = {"train": 0.7, "validation": 0.1, "test": 0.2}


GRID = "search_space.grid.image_index"
INVALID_INDEXING = {
    "reversed range": case(_image_axis({"range": [5, 3]}), f"{GRID}.range", "expected start < stop, got [5, 3]"),
    "float bound": case(_image_axis({"range": [0, 1.5]}), f"{GRID}.range",
                        "expected [start, stop] or [start, stop, step] integers, got [0, 1.5]"),
    "one bound": case(_image_axis({"range": [70000]}), f"{GRID}.range",
                      "expected [start, stop] or [start, stop, step]"),
    "zero step": case(_image_axis({"range": [0, 70000, 0]}), f"{GRID}.range", "expected a positive step, got 0"),
    "misspelled range": case(_image_axis({"rnage": [0, 10]}), GRID,
                             "expected a list of values or {range: [start, stop]} or {range: [start, stop, step]}"),
    "range of a float hyperparameter": case(_learning_rate_range, "search_space.grid.learning_rate",
                                            "a range axis needs an integer hyperparameter"),
    "split key not an integer": case(_set("splits", "by", "key", value="learning_rate"), "splits.by.key",
                                     "expected an integer hyperparameter (one of ['image_index'])"),
    "unknown split": case(_set("splits", "by", "ranges", value={"train": [0, 45000], "holdout": [45000, 70000]}),
                          "splits.by.ranges.holdout", "unknown split; expected one of ['train', 'validation', 'test']"),
    "empty split range": case(_split_ranges(validation=[45000, 45000]), "splits.by.ranges.validation",
                              "expected [start, stop] with start < stop, got [45000, 45000]"),
    "overlapping splits": case(_split_ranges(train=[0, 46000]), "splits.by.ranges",
                               "train and validation overlap"),
    "image in no split": case(_split_ranges(test=[50000, 69999]), "splits.by.ranges",
                              "image_index=69999 (from search_space.grid.image_index) falls in no split"),
    "both split rules": case(_both_split_rules, "splits", "give exactly one of fractions (seeded) or by"),
    "no split rule": case(_set("splits", value={"seed": 0}), "splits", "give exactly one of fractions (seeded) or by"),
}


@pytest.mark.parametrize("mutate, key, expected", [c[:3] for c in INVALID_INDEXING.values()],
                         ids=INVALID_INDEXING.keys())
def test_invalid_range_axis_or_index_split_names_key_and_expectation(tmp_path, mutate, key, expected):
    path = write_inr_spec(tmp_path, mutate)
    with pytest.raises(SchemaError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and f": {key}: " in message and expected in message, message


def test_range_axis_round_trips_and_lists_its_values(tmp_path):
    ranged = load_spec(write_inr_spec(tmp_path, _image_axis({"range": [10, 20, 3]})))
    assert ranged.search_space.grid["image_index"] == GridRange((10, 20, 3))
    assert list(axis_values(ranged.search_space.grid["image_index"])) == [10, 13, 16, 19]
    assert ranged.to_data()["search_space"]["grid"] == {"image_index": {"range": [10, 20, 3]}}
    assert spec_from_data(ranged.to_data()) == ranged
    assert load_spec("inr-mnist").search_space.grid["image_index"].values() == range(70000)


def test_first_uncovered_value_of_a_stepped_range():
    splits = IndexSplits("image_index", {"train": (0, 10), "test": (20, 30)})
    assert splits.first_uncovered(range(0, 30, 20)) is None  # 0 and 20: the gap [10, 20) holds no value
    assert splits.first_uncovered(range(0, 30, 5)) == 10
    assert splits.first_uncovered(range(25, 40, 2)) == 31
    assert splits.first_uncovered(range(3, 30, 7)) == 10  # 3, 10, ...
    assert splits.first_uncovered([1, 12]) == 12 and splits.first_uncovered([]) is None
    assert (splits.split_of(9), splits.split_of(10), splits.split_of(20)) == ("train", None, "test")


def test_a_spec_with_its_own_description_must_describe_the_profiles_it_inherits(tmp_path):
    """inr-mnist's `fast` profile describes 70,000 MNIST images: a spec extending it for another
    data set that sets its own description is refused until each such profile has its own."""
    child = {"extends": "inr-mnist", "name": "inr-other", "description": "SIRENs on another data set."}
    path = tmp_path / "inr-other.yaml"
    path.write_text(yaml.safe_dump(child))
    with pytest.raises(SchemaError, match=r"profiles\.(fast|fast-fifth|suite-v2|suite-v3)\.description.*inr-mnist"):
        load_spec(path)
    own = {name: {"description": f"SIRENs on another data set ({name})."} for name in ("fast", "fast-fifth",
                                                                                      "suite-v2", "suite-v3")}
    path.write_text(yaml.safe_dump({**child, "profiles": own}))
    assert load_spec(path, "fast").description == "SIRENs on another data set (fast)."
    assert load_spec(path, "tiny").description == "SIRENs on another data set."  # no description of its own
    path.write_text(yaml.safe_dump({key: value for key, value in child.items() if key != "description"}))
    assert "MNIST" in load_spec(path, "fast").description  # the base's data, described as the base does
