"""The NFN model registry: names, factories, overrides and their errors."""

from __future__ import annotations

import dataclasses

import pytest
from torch import nn

from nfn_models import create_model, list_models, model_config, register_model
from nfn_models.registry import MODELS, check_model_contract
from zoo.registry import PluginError, UnknownNameError
from zoo.validation.schema import SchemaError


def test_builtin_models_are_registered():
    assert {"mlp", "statnn"} <= set(list_models())
    assert list_models() == sorted(list_models())


def test_unknown_model_lists_the_valid_names(cnn_space):
    with pytest.raises(UnknownNameError, match="valid names: .*mlp.*statnn"):
        create_model("no-such-model", cnn_space)


def test_duplicate_registration_is_an_error():
    @dataclasses.dataclass(frozen=True)
    class Config:
        width: int = 1

    class Another(nn.Module):
        pass

    Another.Config = Config
    with pytest.raises(ValueError, match="already registered"):
        register_model("statnn")(Another)
    assert list_models().count("statnn") == 1


def test_a_model_without_a_config_dataclass_is_refused():
    class NoConfig(nn.Module):
        pass

    with pytest.raises(TypeError, match="Config"):
        register_model("no-config")(NoConfig)
    assert "no-config" not in list_models()


def test_overrides_reach_the_model(cnn_space):
    model = create_model("statnn", cnn_space, hidden_sizes=[8, 4], activation="tanh")
    assert model.config.hidden_sizes == (8, 4)
    assert model.config.activation == "tanh"
    linear_widths = [m.out_features for m in model.modules() if isinstance(m, nn.Linear)]
    assert linear_widths == [8, 4, 1]


@pytest.mark.parametrize("overrides, message", [
    ({"hiden_sizes": [8]}, "unknown key"),
    ({"hidden_sizes": "wide"}, "expected a list"),
    ({"hidden_sizes": [0]}, "positive sizes"),
    ({"activation": "swish"}, "expected one of"),
    ({"dropout": 1.5}, "probability"),
])
def test_bad_overrides_name_the_model_and_key(overrides, message):
    with pytest.raises(SchemaError, match=message) as error:
        model_config("statnn", **overrides)
    assert "model 'statnn'" in str(error.value)


@pytest.mark.parametrize("name", sorted(MODELS.builtin_names()))
def test_every_builtin_model_meets_the_plugin_contract_presets_included(name):
    check_model_contract(name, MODELS.get(name))


@dataclasses.dataclass(frozen=True)
class PresetsConfig:
    hidden: int = 16
    sizes: tuple[int, ...] = (4,)
    out_features: int = 1


def _with_presets(presets) -> type:
    return type("WithPresets", (nn.Module,), {"Config": PresetsConfig, "PRESETS": presets})


def test_presets_the_config_accepts_meet_the_contract():
    check_model_contract("mine", _with_presets({"generalization": {}, "budget": {"hidden": 8, "sizes": [2, 3]}}))
    check_model_contract("mine", type("NoPresets", (nn.Module,), {"Config": PresetsConfig}))  # optional


@pytest.mark.parametrize("presets, expected", [
    ([("budget", {})], "`PRESETS` must be a mapping of preset names to config overrides"),
    ({"bad name!": {}}, "`PRESETS`: a preset's name: 'bad name!' is not a valid name"),
    ({"budget": 16}, "preset 'budget': expected a mapping of PresetsConfig fields to values, got int 16"),
    ({"budget": {"hiden": 8}}, "preset 'budget': key 'hiden' is no field of PresetsConfig"),
    ({"budget": {"hidden": "wide"}}, "preset 'budget': key 'hidden': expected an integer"),
    ({"ok": {}, "budget": {"sizes": "x"}}, "preset 'budget': key 'sizes': expected a list"),
])
def test_a_malformed_presets_is_one_line_naming_the_model_the_preset_and_the_key(presets, expected):
    with pytest.raises(PluginError) as error:
        check_model_contract("mine", _with_presets(presets))
    message = str(error.value)
    assert message.startswith("NFN model 'mine' (WithPresets): ") and expected in message, message
    assert "\n" not in message
