"""Benchmark tracks: studies a researcher reruns with one command (`nfnzoo track run NAME`).

One folder per track; what tracks share (the prompted ViT backbone, continual-learning metrics)
lives in `benchmarks.tracks.common`.
"""
