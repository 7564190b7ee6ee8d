"""`nfnzoo import dwsnets-inrs`: hand-made folders in the layouts DWSNets, Neural Graphs and ScaleGMN read."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from dwsnets_inr_fixture import make_fmnist_inrs, make_mnist_inrs, write_splits
from zoo.imports import get_importer
from zoo.loader import load_split
from zoo.split_set_loader import load_split_set
from zoo.validation.inputs import InputError

import_zoo = get_importer("dwsnets-inrs")
MNIST_CONFIG, FMNIST_CONFIG = "dwsnets-inrs-mnist", "dwsnets-inrs-fashion-mnist"
OURS = {"seq.0.weight": "sine1.weight", "seq.0.bias": "sine1.bias", "seq.1.weight": "sine2.weight",
        "seq.1.bias": "sine2.bias", "seq.2.weight": "output.weight", "seq.2.bias": "output.bias"}
FORWARD_ATOL = 1e-5  # float32, sine arguments up to ~50 rad, grouped differently: measured 3e-6 (1.6 with the rows
# and columns swapped)


@pytest.fixture(params=["short", "release"])
def mnist_source(tmp_path, request):
    """mnist-inrs with 8 train and 4 test INRs, and DWSNets' mnist_splits.json (cwd-based absolute paths);
    the folders spelled mnist_png_train_... (DWSNets' generator) and mnist_png_training_... (the release)."""
    source = tmp_path / "mnist-inrs"
    written = make_mnist_inrs(source, {"train": list(range(8)), "test": [0, 3, 5, 9]}, request.param)
    train = sorted(p for p in written if "_train_" in p or "_training_" in p)
    order = np.random.default_rng(0).permutation(len(train))  # as train_test_split: shuffled, val drawn
    splits = {"train": [train[i] for i in order[2:]], "val": [train[i] for i in order[:2]],
              "test": sorted(p for p in written if "_test_" in p or "_testing_" in p)}
    write_splits(source / "mnist_splits.json", splits, {p: label for p, (label, _) in written.items()},
                 "/home/someone/DWSNets/experiments/mnist/dataset/mnist-inrs/")
    return source, written


@pytest.fixture
def fmnist_source(tmp_path):
    """fmnist_inrs with 6 train and 3 test INRs and the release's splits.json (lists of paths)."""
    source = tmp_path / "fmnist_inrs"
    written = make_fmnist_inrs(source, {"train": [0, 1, 2, 4, 5, 7], "test": [1, 2, 6]})
    splits = {"train": ["train/model_5.pth", "train/model_0.pth", "train/model_7.pth", "train/model_2.pth"],
              "val": ["train/model_4.pth", "train/model_1.pth"],
              "test": ["test/model_6.pth", "test/model_1.pth", "test/model_2.pth"]}
    write_splits(source / "splits.json", splits, None, "/scratch/inrs/fmnist_inrs/")
    return source, written


def reference_read(splits_file: Path, source: Path, split: str, tail: int) -> list[tuple[str, int, dict]]:
    """An independent re-implementation of the reference loaders' reading rule: the split's i-th path (its last
    `tail` parts found in `source`), its label from the file's 'label' list (INRDataset) or, for a list of
    paths, the state dict's 'label' (ScaleGMN's Fashion-MNIST dataset); weights and biases in key order."""
    entry = json.loads(splits_file.read_text())[split]
    paths = entry["path"] if isinstance(entry, dict) else entry
    rows = []
    for i, listed in enumerate(paths):
        relative = "/".join(listed.split("/")[-tail:])
        state = torch.load(source / relative, map_location="cpu", weights_only=True)
        label = int(entry["label"][i]) if isinstance(entry, dict) else int(state.pop("label"))
        rows.append((relative, label, state))
    return rows


def dwsnets_render(state: dict[str, torch.Tensor], size: int = 28) -> torch.Tensor:
    """The DWSNets INR's image from its equations (nn/inr.py, experiments/utils.py), written independently:
    coordinates from np.meshgrid's default "xy" indexing of linspace(-1, 1), two sine layers with w0 = 30, a
    linear output plus 0.5, reshaped row-major to (size, size)."""
    axis = np.linspace(-1, 1, size)
    x, y = np.meshgrid(axis, axis)
    h = torch.from_numpy(np.stack([x.flatten(), y.flatten()]).T).float()  # (P, 2)
    h = torch.sin(30.0 * (h @ state["seq.0.weight"].T + state["seq.0.bias"]))
    h = torch.sin(30.0 * (h @ state["seq.1.weight"].T + state["seq.1.bias"]))
    return (h @ state["seq.2.weight"].T + state["seq.2.bias"] + 0.5).view(size, size)


def _snapshot(folder: Path) -> dict[str, str]:
    """The folder's content; the lock file stays and names its last holder and when (zoo.storage.lock), so
    a refused import that took the lock rewrites it within the same second or not: it is not content."""
    from zoo.storage.lock import LOCK_FILE

    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != LOCK_FILE}


def test_mnist_rows_labels_and_weights_are_the_files(mnist_source, tmp_path):
    source, written = mnist_source
    manifest = import_zoo(source, tmp_path / "out")
    entry = manifest["configs"][MNIST_CONFIG]
    assert entry["splits"] == {"train": 8, "test": 4}
    assert entry["architectures"][next(iter(entry["architectures"]))]["architecture"] == {
        "in_features": 2, "hidden_features": 32, "num_sine_layers": 2, "out_features": 1, "image_size": 28,
        "first_omega_0": 30.0, "hidden_omega_0": 30.0, "coordinates": "column_row", "intensity_range": "unit",
        "output_offset": 0.5}
    seen = set()
    for split in ("train", "test"):
        loaded = load_split(tmp_path / "out", MNIST_CONFIG, split)
        for i, row in loaded.metadata.iterrows():
            label, state = written[row["source_path"]]
            image_id = int(row["source_path"].split("/")[0].split("_")[-1])
            assert split in row["source_path"] and row["label"] == label
            assert row["image_index"] == image_id + (60000 if split == "test" else 0)
            assert row["status"] == "ok" and row["epoch"] == 0 and np.isnan(row["psnr"])
            ours = loaded.weights.state_dict(i)
            assert all(torch.equal(ours[OURS[k]], v) for k, v in state.items())  # unchanged, bit for bit
            seen.add(row["source_path"])
    assert seen == set(written)


@pytest.mark.parametrize("which", ["mnist", "fmnist"])
def test_dwsnets_split_set_equals_the_reference_reading(which, mnist_source, fmnist_source, tmp_path):
    source, _ = mnist_source if which == "mnist" else fmnist_source
    splits_file, tail = (source / "mnist_splits.json", 3) if which == "mnist" else (source / "splits.json", 2)
    manifest = import_zoo(source, tmp_path / "out")
    (config,) = manifest["configs"]
    assert "cannot be regenerated" in manifest["configs"][config]["split_sets"]["dwsnets"]["description"]
    got = load_split_set(tmp_path / "out", config, "dwsnets")
    for theirs, ours in (("train", "train"), ("val", "validation"), ("test", "test")):
        expected = reference_read(splits_file, source, theirs, tail)
        loaded = got[ours]
        assert list(loaded.metadata["source_path"]) == [relative for relative, _, _ in expected], theirs
        assert list(loaded.metadata["label"]) == [label for _, label, _ in expected], theirs
        for i, (_, _, state) in enumerate(expected):
            ours_state = loaded.weights.state_dict(i)
            assert all(torch.equal(ours_state[OURS[k]], v) for k, v in state.items())


def test_family_forward_on_an_imported_member_is_the_dwsnets_inr(mnist_source, tmp_path):
    """Our family's forward (the batched one, the module, the population's) on the imported weights renders
    what the DWSNets INR renders; and the population's hand-written gradient under these conventions is
    autograd's, so the family can fit members like them."""
    from zoo.families import create_family
    from zoo.families.inr import INRArchitecture, coordinate_grid, pixel_targets, siren_forward
    from zoo.families.inr_population import SirenPopulation

    source, written = mnist_source
    import_zoo(source, tmp_path / "out")
    loaded = load_split(tmp_path / "out", MNIST_CONFIG, "test")
    architecture = json.loads((tmp_path / "out" / "manifest.json").read_text())["configs"][MNIST_CONFIG]["spec"][
        "architecture"]
    arch = INRArchitecture(**architecture)
    reference = torch.stack([dwsnets_render(written[p][1]) for p in loaded.metadata["source_path"]])  # (B, 28, 28)
    batched = siren_forward(arch, loaded.weights.tensors, coordinate_grid(28)).view(-1, 28, 28)
    assert torch.allclose(batched, reference, rtol=0, atol=FORWARD_ATOL)
    population, _ = SirenPopulation(arch, torch.device("cpu")).forward(list(loaded.weights.tensors))
    assert torch.allclose(population.view(-1, 28, 28), reference, rtol=0, atol=FORWARD_ATOL)
    module = create_family("inr").build(architecture)
    module.load_state_dict(loaded.weights.state_dict(0))
    assert torch.allclose(module(coordinate_grid(28)).view(28, 28), reference[0], rtol=0, atol=FORWARD_ATOL)
    # negative controls: the rows and columns swapped, or the family's default conventions, do not render it
    for other in (dataclasses.replace(arch, coordinates="row_column"), INRArchitecture()):
        rendered = siren_forward(other, loaded.weights.tensors, coordinate_grid(28)).view(-1, 28, 28)
        assert (rendered - reference).abs().max() > 0.1

    image = torch.rand(1, 1, 28, 28)
    params = [t[:1].clone().requires_grad_() for t in loaded.weights.tensors]
    model = SirenPopulation(arch, torch.device("cpu"))
    out, saved = model.forward(params)
    loss = (out - pixel_targets(image, "unit")).square().mean()
    loss.backward()
    grads = [torch.zeros_like(p) for p in params]
    with torch.no_grad():
        out, saved = model.forward([p.detach() for p in params])
        model.gradient([p.detach() for p in params], saved, out - pixel_targets(image, "unit"), grads)
    for ours, autograd in zip(grads, params):
        assert torch.allclose(ours, autograd.grad, rtol=1e-4, atol=1e-6)


def test_cli_import_then_verify_and_load_dataset(fmnist_source, tmp_path, capsys, read_with_datasets):
    from zoo.cli import main

    source, written = fmnist_source
    out = tmp_path / "out"
    assert main(["import", "dwsnets-inrs", str(source), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"imported {FMNIST_CONFIG}: train 6, test 3" in printed
    assert "dwsnets (train 4, validation 2, test 3)" in printed
    assert main(["verify", str(out)]) == 0
    card = (out / "README.md").read_text()
    assert "Navon" in card and "seq.0.weight -> sine1.weight" in card
    seen = read_with_datasets(out, FMNIST_CONFIG)
    assert {split: s["rows"] for split, s in seen["splits"].items()} == {"train": 6, "test": 3}
    loaded = load_split(out, FMNIST_CONFIG, "test")
    assert sorted(loaded.metadata["image_index"]) == [60001, 60002, 60006]
    assert all(row["label"] == written[row["source_path"]][0] for _, row in loaded.metadata.iterrows())


def test_splits_option_and_no_splits_file(mnist_source, tmp_path):
    source, _ = mnist_source
    elsewhere = tmp_path / "mnist_splits.json"
    (source / "mnist_splits.json").rename(elsewhere)
    manifest = import_zoo(source, tmp_path / "without")
    assert "split_sets" not in manifest["configs"][MNIST_CONFIG]
    manifest = import_zoo(source, tmp_path / "with", splits=elsewhere)
    assert manifest["configs"][MNIST_CONFIG]["split_sets"]["dwsnets"]["rows"] == {"train": 6, "validation": 2,
                                                                                   "test": 4}


def _one_line_and_unchanged(call, match: str, out: Path) -> None:
    before = _snapshot(out)
    with pytest.raises(InputError, match=match) as error:
        call()
    assert "\n" not in str(error.value)
    assert _snapshot(out) == before


def test_bad_inputs_are_one_line_and_leave_the_output_as_it_was(mnist_source, fmnist_source, tmp_path):
    out = tmp_path / "out"
    import_zoo(fmnist_source[0], out)  # a zoo folder already holding a config
    source, written = mnist_source
    splits_file = source / "mnist_splits.json"
    good = splits_file.read_text()

    relative = next(p for p in written if "_train_" in p or "_training_" in p)
    label, state = written[relative]
    torch.save({k: v for k, v in state.items() if k != "seq.1.bias"}, source / relative)
    _one_line_and_unchanged(lambda: import_zoo(source, out), re.escape(f"{relative}: missing ['seq.1.bias']"), out)
    torch.save(state, source / relative)

    data = json.loads(good)
    data["val"]["path"][1] = data["val"]["path"][1].replace("checkpoints", "checkpoint")
    splits_file.write_text(json.dumps(data))
    _one_line_and_unchanged(lambda: import_zoo(source, out), r"mnist_splits.json: val\[1\] names .*checkpoint/"
                            r"model_final.pth, which is not in the INR folder", out)

    data = json.loads(good)
    data["test"]["label"][2] = "seven"
    splits_file.write_text(json.dumps(data))
    _one_line_and_unchanged(lambda: import_zoo(source, out), r"mnist_splits.json: test\[2\] \(.*model_final.pth\): "
                            r"label 'seven' is not a class 0-9", out)

    data = json.loads(good)
    data["train"]["label"][0] = str((int(data["train"]["label"][0]) + 1) % 10)
    splits_file.write_text(json.dumps(data))
    _one_line_and_unchanged(lambda: import_zoo(source, out), r"model_final.pth: label \d, but the splits file lists "
                            r"it as \d", out)
    splits_file.write_text(good)

    fsource, fwritten = fmnist_source
    torch.save({**fwritten["test/model_6.pth"][1], "label": 1.5}, fsource / "test" / "model_6.pth")
    _one_line_and_unchanged(lambda: import_zoo(fsource, out, config="other"),
                            r"test/model_6.pth: label 1.5 is not a class 0-9", out)
    _one_line_and_unchanged(lambda: import_zoo(source, out, splits=tmp_path / "nowhere.json"),
                            "nowhere.json: no such splits file", out)

