"""Dense blocks for NFN models: an MLP stack and the input normalization the baselines share.

Input normalization. Raw weight-space features span orders of magnitude, e.g. a variance next to a maximum.
So the baselines standardize each input feature with `BatchNorm1d(affine=False, momentum=None)`. In training
mode it standardizes with the batch's statistics. It accumulates a *cumulative* (not exponential) average of
them, which eval mode uses. The inputs are fixed functions of the checkpoints, with nothing learned
upstream. So the cumulative average converges to the training set's per-feature mean and variance. That
makes a fitted standardizer with no separate fit step. In eval mode each output row depends only on its own
input row. So predictions do not depend on how the evaluation set is batched, and they are deterministic.
"""

from __future__ import annotations

from typing import Callable, Sequence

from torch import nn

from zoo.validation.schema import SchemaError

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "tanh": nn.Tanh,
}


def input_normalization(num_features: int) -> nn.BatchNorm1d:
    """Per-feature standardization fitted on the training inputs (see the module docstring)."""
    return nn.BatchNorm1d(num_features, affine=False, momentum=None)


def mlp(in_features: int, hidden_sizes: Sequence[int], out_features: int,
        activation: str = "relu", dropout: float = 0.0) -> nn.Sequential:
    """Linear -> activation -> dropout blocks, then a linear output layer."""
    layers: list[nn.Module] = []
    width = in_features
    for hidden in hidden_sizes:
        layers += [nn.Linear(width, hidden), ACTIVATIONS[activation]()]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        width = hidden
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


def check_head_hparams(where: str, key: str, hidden_sizes: Sequence[int], activation: str,
                       dropout: float, out_features: int) -> None:
    """Validates the MLP hyperparameters every baseline shares; raises `SchemaError`."""
    prefix = f"{key}." if key else ""
    if any(size < 1 for size in hidden_sizes):
        raise SchemaError(where, f"{prefix}hidden_sizes", f"expected positive sizes, got {list(hidden_sizes)}")
    if activation not in ACTIVATIONS:
        raise SchemaError(where, f"{prefix}activation", f"expected one of {sorted(ACTIVATIONS)}, got {activation!r}")
    if not 0.0 <= dropout < 1.0:
        raise SchemaError(where, f"{prefix}dropout", f"expected a probability in [0, 1), got {dropout}")
    if out_features < 1:
        raise SchemaError(where, f"{prefix}out_features", f"expected a positive integer, got {out_features}")


def check_channels(where: str, key: str, channels: Sequence[int]) -> None:
    """Validates an equivariant stack's channel counts (non-empty, positive); raises `SchemaError`."""
    if not channels or any(c < 1 for c in channels):
        prefix = f"{key}." if key else ""
        raise SchemaError(where, f"{prefix}channels", f"expected positive channel counts, got {list(channels)}")
