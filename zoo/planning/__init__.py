"""What to train: the spec, its search space, the planned runs and the cost estimate.

The spec is YAML validated against dataclasses.
Planned runs carry their content-hash ids and splits.
"""
