"""`nfnzoo import small-transformer-zoo`: a hand-made folder in the layout `SmallTransformerZooDataset` reads."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest
import torch

from small_transformer_fixture import make_zoo
from zoo.cli import main
from zoo.imports import get_importer
from zoo.loader import load_split
from zoo.split_set_loader import load_split_set

import_zoo = get_importer("small-transformer-zoo")
SPLITS = ("train", "validation", "test")


def reference_split(root, name="mnist", seed=3, cut_off=0.0):
    """An independent re-implementation of the reference rule, in its own terms: global random
    seeded as set_seed does, pandas filters, the file names cut 70/15/15."""
    info = pd.read_csv(root / "metadata" / f"{name}.csv", dtype={"ckpt_epoch": str})
    check = info["ckpt_epoch"] == "75"
    if cut_off > 0:
        check &= info["test_top1_accuracy"] >= cut_off
    info = info[check]
    files = list(info["ckpt_file"])
    state = random.getstate()
    try:
        random.seed(seed)
        random.shuffle(files)
    finally:
        random.setstate(state)
    n_train, n_val = int(float(len(files) * 0.7)), int(float(len(files) * 0.15))
    return {"train": files[:n_train], "validation": files[n_train:n_train + n_val], "test": files[n_train + n_val:]}


def test_members_imported_with_their_keys_flags_and_accuracy(tmp_path):
    frame = make_zoo(tmp_path / "src", runs=4)
    import_zoo(tmp_path / "src", tmp_path / "out")
    seen = 0
    for split in SPLITS:
        try:
            loaded = load_split(tmp_path / "out", "small-transformer-zoo-mnist", split)
        except ValueError:
            continue
        for i, row in loaded.metadata.iterrows():
            source = frame[frame["ckpt_file"] == row["ckpt_file"]].iloc[0]
            state = torch.load(tmp_path / "src" / row["ckpt_file"], weights_only=True)
            ours = loaded.weights.state_dict(i)
            assert set(ours) == set(state) - {"embedding.pos_embedding"}
            assert all(torch.equal(ours[k], state[k]) for k in ours)
            assert row["learning_rate"] == source["lr"] and row["init_std"] == source["w_init_std"]
            assert row["l2"] == source["l2_regularize"] and row["optimizer"] == source["optimizer"]
            assert row["test_accuracy"] == source["test_top1_accuracy"]
            assert bool(row["is_best"]) == (source["ckpt_epoch"] == "best1")
            assert row["epoch"] == (-1 if source["ckpt_epoch"] == "best1" else int(source["ckpt_epoch"]))
            seen += 1
    assert seen == len(frame) == 20


def test_the_releases_best_row_paths_are_read_beside_or_skipped_and_said(tmp_path, capsys):
    """generate_metadata.py records a best row's ckpt_file as the training run's path: read from <name>/<file>
    where the folder holds it; skipped, in a warning and in the card, where it does not."""
    frame = make_zoo(tmp_path / "src", runs=4, best_paths="release")
    import_zoo(tmp_path / "src", tmp_path / "out")
    rows = pd.concat([load_split(tmp_path / "out", "small-transformer-zoo-mnist", split).metadata
                      for split in SPLITS if split in json.loads((tmp_path / "out" / "manifest.json").read_text())[
                          "configs"]["small-transformer-zoo-mnist"]["splits"]])
    assert len(rows) == len(frame) == 20 and rows["is_best"].sum() == 4
    assert all(f.startswith("mnist/r") and f.count("/") == 1 for f in rows["ckpt_file"])  # where each was read

    frame = make_zoo(tmp_path / "gone", runs=4, best_paths="release", best_files=False)
    assert main(["import", "small-transformer-zoo", str(tmp_path / "gone"), "--out", str(tmp_path / "out2")]) == 0
    err = capsys.readouterr().err
    assert "warning: small-transformer-zoo-mnist: skipped 4 best-checkpoint row(s) of mnist.csv whose file" in err
    assert "the reference loader never opens best rows" in err
    entry = json.loads((tmp_path / "out2" / "manifest.json").read_text())["configs"]["small-transformer-zoo-mnist"]
    assert entry["packed_checkpoints"] == 16
    assert "skipped 4 best-checkpoint" in (tmp_path / "out2" / "README.md").read_text()
    assert load_split_set(tmp_path / "out2", None, "transformer-nfn")  # the paper's split is whole: no best row in it


def test_transformer_nfn_split_set_equals_the_reference_rule(tmp_path):
    make_zoo(tmp_path / "src", runs=24)
    for cut_off in (0.0, 0.1):  # the README's commands, main.py's default
        out = tmp_path / f"out-{cut_off}"
        import_zoo(tmp_path / "src", out, cut_off=cut_off)
        expected = reference_split(tmp_path / "src", cut_off=cut_off)
        got = load_split_set(out, None, "transformer-nfn")
        assert {s: list(got[s].metadata["ckpt_file"]) for s in SPLITS} == expected
        assert sum(map(len, expected.values())) == 24 if cut_off == 0 else sum(map(len, expected.values())) < 24


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path):
    from zoo.validation.inputs import InputError

    frame = make_zoo(tmp_path / "src", runs=2)
    out = tmp_path / "out"
    victim = tmp_path / "src" / frame["ckpt_file"].iloc[3]
    state = torch.load(victim, weights_only=True)
    del state["encoder.1.attention.keys.weight"]
    torch.save(state, victim)
    with pytest.raises(InputError, match=r"\.pt: missing \['encoder.1.attention.keys.weight'\]") as error:
        import_zoo(tmp_path / "src", out)
    assert str(victim) in str(error.value) and "\n" not in str(error.value)
    assert not (out / "manifest.json").exists() and not list(out.glob("**/*.parquet*"))
    assert not any(p.name.endswith(".building") for p in out.glob("data/.*"))
    frame = make_zoo(tmp_path / "src", runs=2)
    state = torch.load(victim, weights_only=True)
    state["embedding.pos_embedding"] += 0.01  # a learned encoding would be another function
    torch.save(state, victim)
    with pytest.raises(InputError, match="pos_embedding is not the fixed sinusoidal encoding"):
        import_zoo(tmp_path / "src", out)
    frame = make_zoo(tmp_path / "src", runs=2)
    frame.loc[1, "ckpt_file"] = "../../escape.pt"
    frame.to_csv(tmp_path / "src" / "metadata" / "mnist.csv", index=False)
    with pytest.raises(InputError, match=r"row 1 .*escape.pt"):
        import_zoo(tmp_path / "src", out)
    assert not (out / "manifest.json").exists()
    with pytest.raises(InputError, match="word2vec"):
        import_zoo(tmp_path / "src", out, dataset="ag_news")


def test_cli_import_then_verify(tmp_path, capsys):
    from zoo.cli import main

    make_zoo(tmp_path / "src", runs=4)
    out = tmp_path / "out"
    assert main(["import", "small-transformer-zoo", str(tmp_path / "src"), "--out", str(out)]) == 0
    assert "split sets: transformer-nfn" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0
    assert "Tran" in (out / "README.md").read_text()


def test_round_trip_our_transformer_zoo_through_the_layout(tmp_path, tiny_transformer_zoo):
    """import(export(z)) has z's weights and metadata, checkpoint by checkpoint (best ones included)."""
    import dataclasses

    from zoo.families.transformer import TransformerHParams
    from zoo.imports import get_exporter
    from zoo.storage.folder import read_manifest

    legacy = get_exporter("small-transformer-zoo")(tiny_transformer_zoo, tmp_path / "mnist_transformer")
    some = next((legacy / "mnist").glob("*.pt"))
    keys = list(torch.load(some, weights_only=True))
    assert keys[:3] == ["embedding.pos_embedding", "embedding.conv1.weight", "embedding.conv1.bias"]
    from small_transformer_fixture import _ReferenceShapedViT

    model = _ReferenceShapedViT()
    model.load_state_dict(torch.load(some, weights_only=True))  # strict: the released module's keys exactly
    assert list(model.state_dict()) == keys
    import_zoo(legacy, tmp_path / "back", config="back")
    config = next(iter(read_manifest(tiny_transformer_zoo)["configs"]))
    back = {}
    for split in SPLITS:
        try:
            loaded = load_split(tmp_path / "back", "back", split)
        except ValueError:
            continue
        for i, row in loaded.metadata.iterrows():
            back[(row["wandb_run"], bool(row["is_best"]), int(row["epoch"]))] = (row, loaded.weights.state_dict(i))
    compared = 0
    for split in SPLITS:
        original = load_split(tiny_transformer_zoo, config, split)
        for i, row in original.metadata.iterrows():
            theirs, weights = back[(row["run_id"], bool(row["is_best"]), int(row["epoch"]))]
            for name in [f.name for f in dataclasses.fields(TransformerHParams)] + ["seed", "status"]:
                assert theirs[name] == row[name], name
            for metric in ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy"):
                assert theirs[metric] == row[metric], metric
            mine = original.weights.state_dict(i)
            assert all(torch.equal(mine[k], weights[k]) for k in mine)
            compared += 1
    assert compared == len(back) == 64
