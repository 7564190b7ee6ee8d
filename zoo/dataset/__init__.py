"""A packed zoo as a dataset: packing, the dataset card and its provenance (licenses,
citations), its checks (`verify`, `retrain`) and its summary (`info`).
"""
