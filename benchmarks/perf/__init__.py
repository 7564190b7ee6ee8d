"""Performance benchmarks of the system itself (loading, generation); each prints ratios measured in one run."""
