"""A task's weights are one copy of the rows it trains on: every row kept reuses the loaded arrays, and a
run decodes only the rows its task keeps (`benchmarks.tasks.rows.kept_by`), with the same results bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from benchmarks.harness import load_splits, run_benchmark, run_on_splits
from benchmarks.tasks import SPLITS, create_task
from benchmarks.tasks.rows import augment_rows, kept_by
from benchmarks.run_options import Placement, RunOptions
from benchmarks.model_identity import resolve_model

FINAL = {"checkpoints": "epochs", "checkpoint_epochs": [0, 2], "epochs": 1}  # 2 of each run's 3 rows


def _shares(ours, theirs) -> bool:
    return all(np.shares_memory(a.numpy(), b.numpy()) for a, b in zip(ours.tensors, theirs.tensors))


def test_a_task_keeping_every_row_trains_on_the_loaded_arrays(tiny_zoo):
    splits, _ = load_splits(tiny_zoo, None)
    for name in SPLITS:
        keep = np.ones(len(splits[name]), dtype=bool)
        weights, source, _ = augment_rows(splits[name], keep, name, seed=0, copies=0)
        assert _shares(weights, splits[name].weights), name  # the same arrays, not a second copy
        assert list(source) == list(range(len(keep)))
    some = np.arange(len(splits["train"])) % 2 == 0  # negative control: a subset is its own copy
    weights, _, _ = augment_rows(splits["train"], some, "train", seed=0, copies=0)
    assert not any(np.shares_memory(a.numpy(), b.numpy())
                   for a, b in zip(weights.tensors, splits["train"].weights.tensors))


def test_a_run_decodes_only_the_rows_its_task_keeps(tiny_zoo):
    task = create_task("generalization", **FINAL)
    full, _ = load_splits(tiny_zoo, None)
    kept, _ = load_splits(tiny_zoo, None, keep=kept_by(task))
    for name in SPLITS:
        mask = task.kept_rows(name, full[name].metadata)
        assert len(kept[name]) == mask.sum() < len(full[name]), name  # the others never decoded
        for ours, theirs in zip(kept[name].weights.tensors, full[name].weights[torch.as_tensor(mask)].tensors):
            assert torch.equal(ours, theirs)
        again = task.kept_rows(name, kept[name].metadata)
        assert again.all()  # the task keeps every loaded row, so it trains on the loaded arrays themselves
        weights, _, _ = augment_rows(kept[name], again, name, seed=0, copies=0)
        assert _shares(weights, kept[name].weights)


def test_a_task_whose_selection_is_not_stable_on_its_rows_is_given_every_row(tiny_zoo):
    """`fraction` picks each run's epoch at a fraction of its last: on the kept rows alone it would pick
    again, so the split is not narrowed (the task sees exactly what it would have)."""
    task = create_task("generalization", checkpoints="fraction", checkpoint_fraction=0.5)
    full, _ = load_splits(tiny_zoo, None)
    assert kept_by(task)("train", full["train"].metadata) is None
    assert kept_by(create_task("generalization", **FINAL))("train", full["train"].metadata) is not None


def test_a_narrowed_run_gives_the_same_results_bit_for_bit(tiny_zoo, tmp_path):
    splits, dataset = load_splits(tiny_zoo, None)  # every row: the task selects from the whole split
    whole = run_on_splits("generalization", "mlp", splits, dataset,
                          RunOptions([0], task_overrides=FINAL, placement=Placement(device="cpu"), progress=False),
                          tmp_path / "whole.json")
    narrowed = run_benchmark("generalization", "mlp", tiny_zoo, None,
                             RunOptions([0], task_overrides=FINAL, placement=Placement(device="cpu"), progress=False),
                             tmp_path / "narrowed.json")
    assert narrowed["per_seed"][0]["metrics"] == whole["per_seed"][0]["metrics"]
    assert narrowed["per_seed"][0]["selection"] == whole["per_seed"][0]["selection"]
    assert narrowed["dataset"]["dataset_hash"] == whole["dataset"]["dataset_hash"]
    predicted = [pd.read_csv(tmp_path / f"{name}.predictions.csv") for name in ("whole", "narrowed")]
    assert predicted[0].equals(predicted[1])


def test_a_benchmark_reads_each_shard_of_the_zoos_own_split_once(tiny_zoo, tmp_path, monkeypatch):
    """The loader's real reads, counted: one `_read_weights` per split, each shard in exactly one,
    and no other pass over the shards (`verified_dataset_hash` skips what the reads checked)."""
    import zoo.loader
    import zoo.storage.integrity
    from zoo.storage.folder import read_manifest

    read, checked = [], []
    real_read, real_check = zoo.loader._read_weights, zoo.storage.integrity.check_shards
    monkeypatch.setattr(zoo.loader, "_read_weights",
                        lambda shards, **kw: read.extend(s.path for s in shards) or real_read(shards, **kw))
    monkeypatch.setattr(zoo.storage.integrity, "check_shards",
                        lambda folder, entries, **kw: checked.extend(entries) or real_check(folder, entries, **kw))
    run_benchmark("generalization", "mlp", tiny_zoo, None,
                  RunOptions([0, 1], task_overrides=FINAL, placement=Placement(device="cpu"), progress=False))
    shards = sorted(str(tiny_zoo / f["path"]) for entry in read_manifest(tiny_zoo)["configs"].values()
                    for f in entry["files"])
    assert sorted(map(str, read)) == shards and checked == []


class _WritesIntoItsInput(torch.nn.Module):
    """A model that scales the weights it is given in place."""

    def __init__(self, space):
        super().__init__()
        self.head = torch.nn.Linear(1, 1)

    def forward(self, weights):
        with torch.no_grad():
            weights.tensors[0].mul_(0.5)
        return self.head(weights.tensors[0].flatten(1).mean(1, keepdim=True))


def test_a_model_writing_into_its_input_cannot_reach_the_loaded_rows(tiny_zoo, tmp_path):
    """No copy of the rows is made at load, so the rows every seed reads must never be the tensors a model
    is handed: each batch is gathered from them (a new tensor). A model that writes into its input leaves
    the loaded split as it was, and its next seed reads the same rows."""
    import zlib

    from benchmarks.api import register

    def crc(splits):
        return [zlib.crc32(t.contiguous().numpy().view(np.uint8).reshape(-1)) for name in SPLITS
                for t in splits[name].weights.tensors]

    splits, dataset = load_splits(tiny_zoo, None)
    before = crc(splits)
    model = register(lambda space: _WritesIntoItsInput(space), name="writes")
    run_on_splits("generalization", resolve_model(model, "writes"), splits, dataset,
                  RunOptions([0, 1], task_overrides=FINAL, placement=Placement(device="cpu"), progress=False),
                  tmp_path / "w.json")
    assert crc(splits) == before
    splits["test"].weights.tensors[0].mul_(0.5)  # negative control: a write into the rows themselves is seen
    assert crc(splits) != before
