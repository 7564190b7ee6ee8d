"""NFN models: networks that take other networks' weights as input, behind one registry.

Importing the package registers every built-in model. Use `create_model(name, weight_space,
**overrides)`; `list_models()` gives the names. Depends on `zoo.weightspace` only.
"""

from nfn_models.registry import (claimed_symmetries, count_parameters, create_model, list_models, list_presets,
                                 model_config, model_outputs, models_with_output, register_model, trained_by,
                                 weight_space_kind)
from nfn_models import (  # noqa: F401 (registers the built-in models)
    dwsnet, magep_nfn, mlp, monomial_nfn, ng_gnn, ng_t, np_hnp, probegen, scalegmn, statnn, transformer_nfn, trees)

__all__ = ["claimed_symmetries", "count_parameters", "create_model", "list_models", "list_presets", "model_config",
           "model_outputs", "models_with_output", "register_model", "trained_by", "weight_space_kind"]
