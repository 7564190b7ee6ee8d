"""Building blocks shared by NFN models."""

from nfn_models.layers.dense import ACTIVATIONS, check_channels, check_head_hparams, input_normalization, mlp
from nfn_models.layers.hnp import HNPLinear
from nfn_models.layers.monomial import MonomialLinear, MonomialPool
from nfn_models.layers.np import NPLinear
from nfn_models.layers.polynomial import PolynomialLinear, PolynomialPool
from nfn_models.layers.pools import HNPPool, NPPool

__all__ = ["ACTIVATIONS", "HNPLinear", "HNPPool", "MonomialLinear", "MonomialPool", "NPLinear", "NPPool",
           "PolynomialLinear", "PolynomialPool", "check_channels", "check_head_hparams", "input_normalization", "mlp"]
