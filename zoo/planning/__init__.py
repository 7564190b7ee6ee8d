"""What to train: the spec (YAML validated against dataclasses), its search space, the
planned runs with their content-hash ids and splits, and the cost estimate.
"""
