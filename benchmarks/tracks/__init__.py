"""Benchmark tracks: studies a researcher reruns with one command (`nfnzoo track run NAME`).

Each track has one folder. What tracks share lives in `benchmarks.tracks.common`: the prompted ViT
backbone and continual-learning metrics."""
