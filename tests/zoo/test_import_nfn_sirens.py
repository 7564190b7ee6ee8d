"""`nfnzoo import nfn-sirens` / `nfnzoo export nfn-sirens`: hand-made folders in `SirenDataset`'s layout."""

from __future__ import annotations

import glob
import os
import re

import pytest
import torch

from nfn_siren_fixture import make_sirens
from zoo.imports import get_exporter, get_importer
from zoo.loader import load_split
from zoo.split_set_loader import load_split_set

import_zoo = get_importer("nfn-sirens")
SPLITS = ("train", "validation", "test")


def _source(tmp_path, augmented=True):
    source = tmp_path / "siren_mnist_wts"
    base = make_sirens(source, range(12))
    augs = {}
    if augmented:
        for i in range(2):  # aug fits of the train images, and one of a validation image
            augs[f"aug{i}"] = make_sirens(source, [*range(6), 7], fit=f"aug{i}", seed=i + 1)
    return source, base, augs


def reference_split(source, split_points, split, prefix="randinit_smaller"):
    """An independent re-implementation of the reference rule, with ScaleGMN's base glob: index -> path."""
    idx_to_path = {}
    for path in glob.glob(os.path.join(source, f"{prefix}_[0-9]s/*.pth")):
        idx_to_path[int(re.search(r"net(\d+)\.pth", path).group(1))] = path
    val_point, test_point = split_points
    idcs = {"train": range(val_point), "validation": range(val_point, test_point),
            "test": range(test_point, len(idx_to_path))}[split]
    return [idx_to_path[i] for i in idcs]


def test_base_fits_imported_with_the_reference_keys_and_the_aug_fits_kept_apart(tmp_path):
    source, base, augs = _source(tmp_path)
    import_zoo(source, tmp_path / "out", split_points=(6, 9))
    seen = 0
    for split in SPLITS:
        loaded = load_split(tmp_path / "out", "nfn-sirens-mnist", split)
        assert set(loaded.metadata["fit"]) == {"base"}  # the aug folders are not mixed in
        for i, row in loaded.metadata.iterrows():
            index = int(row["image_index"])
            assert split == ("train" if index < 6 else "validation" if index < 9 else "test")
            label, state = base[index]
            assert row["label"] == label and row["source_path"] == f"randinit_smaller_{label}s/net{index}.pth"
            ours = loaded.weights.state_dict(i)
            assert torch.equal(ours["sine1.weight"], state["net.0.linear.weight"])
            assert torch.equal(ours["sine2.bias"], state["net.1.linear.bias"])
            assert torch.equal(ours["output.weight"], state["net.2.weight"])
            assert torch.equal(ours["output.bias"], state["net.2.bias"])
            seen += 1
    assert seen == 12


def test_split_sets_equal_the_reference_rule(tmp_path):
    source, base, augs = _source(tmp_path)
    import_zoo(source, tmp_path / "out", split_points=(6, 9), augmentations=2)
    for name in ("nfn", "nfn-aug"):
        got = load_split_set(tmp_path / "out", None, name)
        for split in SPLITS:
            expected = [os.path.relpath(p, source) for p in reference_split(source, (6, 9), split)]
            if name == "nfn-aug" and split == "train":  # ConcatDataset([base train] + [aug_i train])
                for i in range(2):
                    expected += [os.path.relpath(p, source)
                                 for p in reference_split(source, (6, 9), "train", f"randinit_smaller_aug{i}")]
            assert list(got[split].metadata["source_path"]) == expected, (name, split)
    train = load_split(tmp_path / "out", None, "train")
    assert sorted(set(train.metadata["fit"])) == ["aug0", "aug1", "base"] and len(train.metadata) == 18
    assert list(load_split(tmp_path / "out", None, "validation").metadata["fit"]).count("aug0") == 1


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path):
    from zoo.validation.inputs import InputError

    source, base, _ = _source(tmp_path, augmented=False)
    label, state = base[7]
    del state["net.1.linear.bias"]
    torch.save(state, source / f"randinit_smaller_{label}s" / "net7.pth")
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"randinit_smaller_7s/net7.pth: missing \['net.1.linear.bias'\]") as error:
        import_zoo(source, out)
    assert "\n" not in str(error.value)
    assert not (out / "manifest.json").exists() and not list(out.glob("**/*.parquet*"))
    assert not any(p.name.endswith(".building") for p in out.glob("data/.*"))
    (source / "randinit_smaller_7s" / "net7.pth").write_bytes(b"not a state dict")
    with pytest.raises(InputError, match=r"net7.pth: not a readable state dict"):
        import_zoo(source, out)
    make_sirens(source, [7])
    with pytest.raises(InputError, match="config name"):
        import_zoo(source, out, config="../escape")
    assert not (tmp_path / "escape").exists() and not (out / "manifest.json").exists()
    with pytest.raises(InputError, match="no randinit_smaller_aug0_<label>s"):
        import_zoo(source, out, augmentations=1)


def test_cli_import_then_verify(tmp_path, capsys):
    from zoo.cli import main

    source, _, _ = _source(tmp_path)
    out = tmp_path / "out"
    assert main(["import", "nfn-sirens", str(source), "--out", str(out), "--augmentations", "2"]) == 0
    printed = capsys.readouterr().out
    assert "imported nfn-sirens-mnist" in printed and "nfn-aug" in printed
    assert main(["verify", str(out)]) == 0
    card = (out / "README.md").read_text()
    assert "Zhou" in card and "net.0.linear.weight -> sine1.weight" in card


def test_round_trip_our_inr_zoo_through_the_nfn_siren_layout(tmp_path, tiny_inr_zoo_folder):
    """import(export(z)) has z's last checkpoints: weights and metadata, image by image."""
    from zoo.storage.folder import read_manifest

    legacy = get_exporter("nfn-sirens")(tiny_inr_zoo_folder, tmp_path / "siren_mnist_wts")
    # what SirenDataset reads: state dicts whose keys, in order, are the reference Siren's
    first = next(legacy.glob("randinit_smaller_*s/net0.pth"))
    assert list(torch.load(first, weights_only=True)) == ["net.0.linear.weight", "net.0.linear.bias",
                                                          "net.1.linear.weight", "net.1.linear.bias",
                                                          "net.2.weight", "net.2.bias"]
    import_zoo(legacy, tmp_path / "back", config="back")
    config = next(iter(read_manifest(tiny_inr_zoo_folder)["configs"]))
    back = {}
    for split in SPLITS:
        loaded = load_split(tmp_path / "back", "back", split)
        for i, row in loaded.metadata.iterrows():
            back[int(row["image_index"])] = (split, row, loaded.weights.state_dict(i))
    compared = 0
    for split in SPLITS:
        original = load_split(tiny_inr_zoo_folder, config, split)
        last = original.metadata.groupby("run_id")["epoch"].transform("max")
        for i, row in original.metadata.iterrows():
            if row["epoch"] != last[i]:
                continue
            their_split, theirs, weights = back[int(row["image_index"])]
            assert their_split == split
            for name in ("epoch", "seed", "learning_rate", "label", "psnr", "mse", "status"):
                assert theirs[name] == row[name], name
            mine = original.weights.state_dict(i)
            assert all(torch.equal(mine[k], weights[k]) for k in mine)
            compared += 1
    assert compared == len(back) == 28
