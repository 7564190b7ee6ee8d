"""Zoo families: one module per family (the model, its weight space, its training recipe).

The contract a family fulfils, its base class and the registry are in `zoo.families.base` (which
imports no family: the registry imports the built-in ones, `cnn`, `inr`, `transformer`,
`pooled_cnn` (import-only), by name on its first read); they are re-exported here.
"""

from zoo.families.base import (  # noqa: F401 (re-exported: the family contract and registry)
    FAMILIES,
    CheckpointResult,
    MemberSize,
    Family,
    create_family,
    get_family,
    list_families,
    register_family,
)
