"""Building blocks shared by NFN models."""

from nfn_models.layers.dense import ACTIVATIONS, check_head_hparams, input_normalization, mlp

__all__ = ["ACTIVATIONS", "check_head_hparams", "input_normalization", "mlp"]
