"""Zoo families: one module per family (the model, its weight space, its training recipe).

The contract a family fulfils, its base class and the registry are in `zoo.family` (which
imports no family); they are re-exported here, and importing this package registers the
families: `cnn`, `inr`, `transformer`.
"""

from zoo.family import (  # noqa: F401
    FAMILIES,
    CheckpointResult,
    Family,
    create_family,
    get_family,
    list_families,
    register_family,
)

# Families register themselves on import.
from zoo.families import cnn  # noqa: E402,F401
from zoo.families import inr  # noqa: E402,F401
from zoo.families import transformer  # noqa: E402,F401
