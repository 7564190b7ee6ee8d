"""The NFN model registry: names, factories, overrides and their errors."""

from __future__ import annotations

import dataclasses

import pytest
from torch import nn

from nfn_models import create_model, list_models, model_config, register_model
from zoo.registry import UnknownNameError
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
