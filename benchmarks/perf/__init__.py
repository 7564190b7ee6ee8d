"""Performance benchmarks of the system itself, such as loading and generation.

Each prints ratios measured in one run."""
