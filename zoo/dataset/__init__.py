"""A packed zoo as a dataset: packing, the dataset card, provenance, checks and summary.

Provenance means licenses and citations. The checks are `verify` and `retrain`; the summary is `info`.
"""
