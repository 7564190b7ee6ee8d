"""Zoo families: one module per family (the model, its weight space, its training recipe).

The contract a family fulfils, its base class and the registry are in `zoo.families.base`.
They are re-exported here.
`zoo.families.base` imports no family.
The registry imports the built-in ones by name on its first read.
They are `cnn`, `inr`, `transformer` and `pooled_cnn` (import-only).
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
