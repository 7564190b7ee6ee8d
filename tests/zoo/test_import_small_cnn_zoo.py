"""`nfnzoo import small-cnn-zoo`: a hand-made folder in the release's layout -> our dataset format."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
import torch

from small_cnn_fixture import make_zoo
from zoo.imports import get_importer, list_importers
from zoo.imports.writer import RowEncoder
from zoo.loader import load_split, read_metadata
from zoo.storage.record import CheckpointRecord, encode_weights

import_zoo = get_importer("small-cnn-zoo")


def _all_rows(folder, config):
    splits = {s: load_split(folder, config, s) for s in ("train", "validation", "test")}
    return splits


def test_registry_lists_the_format():
    assert "small-cnn-zoo" in list_importers()
    with pytest.raises(KeyError, match="small-cnn-zoo"):
        get_importer("no-such-format")


def test_row_encoder_matches_the_record_encoding():
    from zoo.families import create_family
    from zoo.imports.small_cnn_zoo import released_architecture

    arch = released_architecture()
    space = create_family("cnn").weight_space(arch)
    weights = {t.name: torch.randn(t.shape, generator=torch.Generator().manual_seed(i))
               for i, t in enumerate(space.tensors)}
    record = CheckpointRecord("m", "r", "cnn", "c", 0, 0, {}, {}, "ok", arch, weights)
    encoded = RowEncoder("cnn", arch, space).encode({k: v.numpy()[None] for k, v in weights.items()})
    assert encoded == [encode_weights(record)]


def test_weights_transposed_from_tensorflow_layout(tmp_path):
    weights, metrics = make_zoo(tmp_path / "src", runs=4, steps=(0, 86))
    import_zoo(tmp_path / "src", tmp_path / "out")
    config = "small-cnn-zoo-mnist"
    seen = 0
    for split in ("train", "validation", "test"):
        try:
            loaded = load_split(tmp_path / "out", config, split)
        except ValueError:
            continue
        for i, (modeldir, epoch) in enumerate(zip(loaded.metadata["modeldir"], loaded.metadata["epoch"])):
            row = int(np.flatnonzero((metrics["modeldir"] == modeldir) & (metrics["step"] == epoch))[0])
            w = weights[row]
            state = loaded.weights.state_dict(i)
            # index arithmetic straight from the TF layout: kernel[h, w, in, out] at ((h*3 + w)*I + in)*O + out
            o, c, h, x = 5, 0, 2, 1
            assert state["conv1.weight"][o, c, h, x] == w[16 + ((h * 3 + x) * 1 + c) * 16 + o]
            assert state["conv1.bias"][3] == w[3]
            o, c, h, x = 7, 11, 0, 2
            assert state["conv3.weight"][o, c, h, x] == w[2496 + ((h * 3 + x) * 16 + c) * 16 + o]
            assert state["dense.weight"][9, 4] == w[4810 + 4 * 10 + 9]
            assert state["dense.bias"][9] == w[4809]
            source = metrics.iloc[row]
            meta = loaded.metadata.iloc[i]
            assert meta["init"] == source["config.w_init"] and meta["l2"] == source["config.l2reg"]
            assert meta["test_accuracy"] == source["test_accuracy"] and np.isnan(meta["val_accuracy"])
            seen += 1
    assert seen == len(metrics)


def test_runs_never_cross_our_splits(tmp_path):
    make_zoo(tmp_path / "src", runs=20, steps=(0, 86))
    import_zoo(tmp_path / "src", tmp_path / "out")
    runs = [set(read_metadata(tmp_path / "out", None, s)["modeldir"]) for s in ("train", "validation", "test")]
    assert sum(map(len, runs)) == 20 and not (runs[0] & runs[1] or runs[0] & runs[2] or runs[1] & runs[2])


def reference_nfn_split(folder, split_file, final_step=86):
    """An independent re-implementation of the NFN `ZooDataset` rule, in its own pandas terms."""
    order = pd.read_csv(split_file, header=None).values.flatten()
    metrics = pd.read_csv(folder / "metrics.csv.gz", compression="gzip")
    metrics["source_row"] = np.arange(len(metrics))
    metrics = metrics.iloc[order]
    metrics = metrics[metrics["step"] == final_step]
    metrics.index = np.arange(0, len(metrics))
    test_point = int(0.5 * len(metrics))
    trainval = list(range(test_point))
    val_point = int(0.8 * len(trainval))
    rng = random.Random(0)
    rng.shuffle(trainval)

    def pick(idcs):
        return [(metrics.iloc[i]["modeldir"], int(metrics.iloc[i]["step"])) for i in idcs]

    return {"train": pick(trainval[:val_point]), "validation": pick(trainval[val_point:]),
            "test": pick(range(test_point, len(metrics)))}


def test_nfn_split_set_equals_the_reference_rule(tmp_path):
    from zoo.split_set_loader import load_split_set

    make_zoo(tmp_path / "src", runs=30, steps=(86, 0, 40))  # row 0 is a final-step row: it appears twice
    import_zoo(tmp_path / "src", tmp_path / "out")
    expected = reference_nfn_split(tmp_path / "src", tmp_path / "src" / "nfn_split.csv")
    splits = load_split_set(tmp_path / "out", None, "nfn")
    got = {s: list(zip(split.metadata["modeldir"], split.metadata["epoch"].astype(int))) for s, split in splits.items()}
    assert got == expected
    everything = sum(expected.values(), [])
    assert everything.count(("/cns/zoo/mnist/00000", 86)) == 2  # the header quirk, kept


def _iid_halves(n):
    """ZooDataset._split_indices_iid, as all three references write it: positions into a list of n rows."""
    test_point = int(0.5 * n)
    trainval = list(range(test_point))
    val_point = int(0.8 * len(trainval))
    random.Random(0).shuffle(trainval)
    return {"train": trainval[:val_point], "validation": trainval[val_point:], "test": list(range(test_point, n))}


def _reference_frame(folder, split_file):
    """metrics.csv.gz in the split file's order, read with header=None (row 0 twice), as the loaders read it."""
    order = pd.read_csv(split_file, header=None).values.flatten()
    return pd.read_csv(folder / "metrics.csv.gz", compression="gzip").iloc[order]


def reference_scalegmn_split(folder, split_file, activation, final_step=86):
    """ScaleGMN's NFNZooDataset, re-implemented: the final-step rows split first, then each split's rows of
    `activation` kept (`metrics.iloc[idcs]`, then the `config.activation` mask)."""
    metrics = _reference_frame(folder, split_file)
    metrics = metrics[metrics["step"] == final_step]
    metrics.index = np.arange(0, len(metrics))
    splits = {}
    for split, idcs in _iid_halves(len(metrics)).items():
        chosen = metrics.iloc[idcs]
        chosen = chosen[chosen["config.activation"] == activation]
        splits[split] = list(zip(chosen["modeldir"], chosen["step"].astype(int)))
    return splits


def reference_monomial_split(folder, split_file, activation, final_step=86):
    """Monomial-NFN's ZooDataset(filter_activation=...), re-implemented: the rows of `activation` at the final
    step kept first (`isfinal & isrelu`), then split."""
    metrics = _reference_frame(folder, split_file)
    metrics = metrics[(metrics["config.activation"] == activation) & (metrics["step"] == final_step)]
    metrics.index = np.arange(0, len(metrics))
    return {split: list(zip(metrics.iloc[idcs]["modeldir"], metrics.iloc[idcs]["step"].astype(int)))
            for split, idcs in _iid_halves(len(metrics)).items()}


def test_activation_split_sets_equal_the_scalegmn_and_monomial_rules(tmp_path):
    from zoo.split_set_loader import load_split_set
    from zoo.storage.folder import read_manifest

    make_zoo(tmp_path / "src", runs=40, steps=(86, 0), dataset="cifar10")  # relu and tanh runs, mixed by the file
    import_zoo(tmp_path / "src", tmp_path / "out")
    split_file = tmp_path / "src" / "nfn_split.csv"
    entry = read_manifest(tmp_path / "out")["configs"]["small-cnn-zoo-cifar10-gs"]
    assert sorted(entry["split_sets"]) == ["monomial-nfn-relu", "monomial-nfn-tanh", "nfn", "scalegmn-relu",
                                           "scalegmn-tanh"]
    got = {}
    for name in entry["split_sets"]:
        loaded = load_split_set(tmp_path / "out", None, name)
        got[name] = {s: list(zip(split.metadata["modeldir"], split.metadata["epoch"].astype(int)))
                     for s, split in loaded.items()}
    for activation in ("relu", "tanh"):
        scalegmn = reference_scalegmn_split(tmp_path / "src", split_file, activation)
        monomial = reference_monomial_split(tmp_path / "src", split_file, activation)
        assert got[f"scalegmn-{activation}"] == scalegmn
        assert got[f"monomial-nfn-{activation}"] == monomial
        # the same members (row 0, a relu run's final step, twice in the relu sets), cut differently
        assert sorted(sum(scalegmn.values(), [])) == sorted(sum(monomial.values(), []))
        assert scalegmn != monomial and scalegmn["test"] != monomial["test"]
    assert sum(got["scalegmn-relu"].values(), []).count(("/cns/zoo/cifar10/00000", 86)) == 2
    card = (tmp_path / "out" / "README.md").read_text()
    assert "kalogeropoulos2024scale" in card and "tran2024monomial" in card and "Split set `monomial-nfn-tanh`" in card


def test_activation_split_sets_only_on_the_data_sets_their_papers_used():
    from zoo.imports.small_cnn_zoo_splits import split_positions

    order, steps, activations = [0, 0, 1, 2, 3], np.array([86, 86, 86, 86]), ["relu", "tanh", "relu", "tanh"]
    assert list(split_positions(order, steps, activations, "mnist")) == ["nfn"]
    assert sorted(split_positions(order, steps, activations, "svhn_gs")) == ["nfn", "scalegmn-relu", "scalegmn-tanh"]
    assert len(split_positions(order, steps, activations, "cifar10_gs")) == 5


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path):
    from zoo.validation.inputs import InputError

    weights, metrics = make_zoo(tmp_path / "src", runs=3, steps=(0, 86))
    out = tmp_path / "out"
    metrics.iloc[:-1].to_csv(tmp_path / "src" / "metrics.csv.gz", index=False, compression="gzip")
    with pytest.raises(InputError, match=r"metrics.csv.gz: 5 rows, .*weights.npy 6: weights row 5 has no metrics"):
        import_zoo(tmp_path / "src", out)
    metrics.to_csv(tmp_path / "src" / "metrics.csv.gz", index=False, compression="gzip")
    data = (tmp_path / "src" / "weights.npy").read_bytes()
    (tmp_path / "src" / "weights.npy").write_bytes(data[:-5000])
    with pytest.raises(InputError, match=r"weights.npy: .*truncated: row 5 is the first incomplete one") as error:
        import_zoo(tmp_path / "src", out)
    assert "\n" not in str(error.value)
    (tmp_path / "src" / "weights.npy").write_bytes(data)
    bad = metrics.copy()
    bad["config.learning_rate"] = bad["config.learning_rate"].astype(object)
    bad.loc[3, "config.learning_rate"] = "fast"
    bad.to_csv(tmp_path / "src" / "metrics.csv.gz", index=False, compression="gzip")
    with pytest.raises(InputError, match=r"weights.npy: row 3 \(/cns/zoo/mnist/00001, step 86\)"):
        import_zoo(tmp_path / "src", out)
    assert not (out / "manifest.json").exists() and not list(out.glob("**/*.parquet*"))
    assert not any(p.name.endswith(".building") for p in out.glob("data/.*"))


def test_cli_import_then_info_verify_and_datasets(tmp_path, capsys, read_with_datasets):
    from zoo.cli import main

    make_zoo(tmp_path / "src", runs=8, steps=(0, 1, 86))
    out = tmp_path / "out"
    assert main(["import", "small-cnn-zoo", str(tmp_path / "src"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "imported small-cnn-zoo-mnist" in printed and "split sets: nfn" in printed
    assert main(["info", str(out)]) == 0
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith("ok")
    # no spec to train from: said, not a crash and not a silent pass (re-scoring: the tests below)
    assert main(["verify", str(out), "--retrain", "1"]) == 0
    said = capsys.readouterr()
    assert ("small-cnn-zoo-mnist: imported (small-cnn-zoo), so it has no spec nfnzoo can train from"
            in said.out + said.err), said
    card = (out / "README.md").read_text()
    assert "cc-by-4.0" in card and "Unterthiner" in card and "HWIO -> OIHW" in card and "Split set `nfn`" in card
    seen = read_with_datasets(out, "small-cnn-zoo-mnist")
    assert sum(s["rows"] for s in seen["splits"].values()) == 24 and not seen["imported_zoo"]
    assert main(["import", "no-such-format", str(tmp_path / "src"), "--out", str(out)]) == 1


def test_round_trip_our_zoo_through_the_small_cnn_zoo_layout(tmp_path, tiny_zoo):
    """import(export(z)) has z's weights, hyperparameters, metrics, epochs and seeds, run by run."""
    from zoo.imports import get_exporter
    from zoo.storage.folder import read_manifest

    config = next(iter(read_manifest(tiny_zoo)["configs"]))
    legacy = get_exporter("small-cnn-zoo")(tiny_zoo, tmp_path / "legacy")
    assert sorted(p.name for p in legacy.iterdir()) == ["layout.csv", "metrics.csv.gz", "nfn_split.csv",
                                                        "nfnzoo_evaluation.json", "weights.npy"]
    # what the NFN loader reads: the header-"0" permutation, kernels by suffix, shapes as tuple literals
    order = pd.read_csv(legacy / "nfn_split.csv", header=None).values.flatten()
    assert order[0] == 0 and sorted(order[1:]) == list(range(len(order) - 1))
    import_zoo(legacy, tmp_path / "back", config="back", nfn_final_step=2)
    original = {s: load_split(tiny_zoo, config, s) for s in ("train", "validation", "test")}
    back = {s: load_split(tmp_path / "back", "back", s) for s in ("train", "validation", "test")}
    by_key = {}
    for split in back.values():
        for i, (run, epoch) in enumerate(zip(split.metadata["modeldir"], split.metadata["epoch"])):
            by_key[(run, int(epoch))] = (split, i)
    from zoo.families.cnn import CNNHParams
    import dataclasses

    compared = 0
    for split in original.values():
        for i, row in split.metadata.iterrows():
            other, j = by_key[(row["run_id"], int(row["epoch"]))]
            theirs = other.metadata.iloc[j]
            for name in [f.name for f in dataclasses.fields(CNNHParams)] + ["seed", "status"]:
                assert theirs[name] == row[name], name
            for metric in ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy"):
                assert theirs[metric] == row[metric] or (np.isnan(theirs[metric]) and np.isnan(row[metric])), metric
            mine, back_state = split.weights.state_dict(i), other.weights.state_dict(j)
            assert all(torch.equal(mine[k], back_state[k]) for k in mine)
            compared += 1
    assert compared == sum(len(s) for s in back.values())


def test_members_exported_and_imported_back_re_score_to_their_accuracies_through_the_released_model(
        tmp_path, tiny_zoo):
    """The tiny zoo (the bundled spec: the released model, valid padding, pixels in [-1, 1]) through the
    Small CNN Zoo layout and back: `verify --recompute` re-evaluates imported members on real MNIST
    (the test subset the sidecar names) and matches their recorded accuracies and losses."""
    from zoo.dataset.verify import verify
    from zoo.imports import get_exporter

    legacy = get_exporter("small-cnn-zoo")(tiny_zoo, tmp_path / "legacy")
    import_zoo(legacy, tmp_path / "back", config="back", nfn_final_step=2)
    report = verify(tmp_path / "back", recompute=4)
    assert report.problems == [] and len(report.recomputed) == 4, report.problems
    compared = {key for result in report.recomputed for key in result["metrics"]}
    assert {"test_accuracy", "test_loss", "val_accuracy", "val_loss"} <= compared
    assert all(m["match"] for result in report.recomputed for m in result["metrics"].values())


def test_the_releases_own_members_are_scored_on_the_whole_test_split_and_a_wrong_record_fails(tmp_path, capsys):
    """A hand-made MNIST folder (random weights, random recorded accuracies): its members are re-scored on
    MNIST's whole test split, as the release scored them, so the made-up accuracies fail `verify
    --recompute` (the negative control of the test above); CIFAR-10-GS records no re-scoring (our gray
    images are not the release's) and says so."""
    from zoo.cli import main
    from zoo.storage.folder import read_manifest

    make_zoo(tmp_path / "src", runs=2, steps=(0, 86))
    import_zoo(tmp_path / "src", tmp_path / "out")
    entry = read_manifest(tmp_path / "out")["configs"]["small-cnn-zoo-mnist"]
    assert entry["imported"]["evaluation"] == {"dataset": {"name": "mnist", "validation_size": 0},
                                               "eval_batch_size": 2000}
    assert main(["verify", str(tmp_path / "out"), "--recompute", "1"]) == 1
    said = capsys.readouterr()
    assert "test_accuracy stored" in said.out + said.err and "val_" not in said.out + said.err
    make_zoo(tmp_path / "cifar", runs=2, steps=(0, 86), dataset="cifar10")
    import_zoo(tmp_path / "cifar", tmp_path / "cifar-out")
    assert main(["verify", str(tmp_path / "cifar-out"), "--recompute", "1"]) == 0
    said = capsys.readouterr()
    assert "without a record of how its source scored its members" in said.out + said.err


def test_a_zoo_of_another_architecture_is_not_exported_as_the_released_model(tmp_path):
    from zoo.imports.small_cnn_zoo_export import _check_released
    from zoo.validation.inputs import InputError

    released = {"in_channels": 1, "channels": 16, "num_conv_layers": 3, "kernel_size": 3, "stride": 2,
                "num_classes": 10, "padding": "valid", "input_range": "signed"}
    _check_released(tmp_path, "ok", {"architectures": {"a": {"architecture": released}}})  # the control
    old = {k: v for k, v in released.items() if k not in ("padding", "input_range")}  # a spec from before the fields
    with pytest.raises(InputError, match=r"config old has \{'padding': 'symmetric', 'input_range': 'unit'\}"):
        _check_released(tmp_path, "old", {"architectures": {"a": {"architecture": old}}})


def test_a_config_name_that_leaves_the_output_folder_is_refused(tmp_path):
    from zoo.validation.inputs import InputError

    make_zoo(tmp_path / "src", runs=2, steps=(0, 86))
    with pytest.raises(InputError, match="config name") as error:
        import_zoo(tmp_path / "src", tmp_path / "out", config="../escape")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "escape").exists() and not (tmp_path / "out").exists()


def test_verify_checks_the_split_set_files(tmp_path):
    """A clean import verifies; a split-set file changed, or gone, is a problem naming it (the controls)."""
    import json

    from zoo.dataset.verify import verify
    from zoo.storage.folder import read_manifest

    make_zoo(tmp_path / "src", runs=8, steps=(0, 86))
    import_zoo(tmp_path / "src", tmp_path / "out")
    assert verify(tmp_path / "out").problems == []
    entry = read_manifest(tmp_path / "out")["configs"]["small-cnn-zoo-mnist"]
    path = tmp_path / "out" / entry["split_sets"]["nfn"]["path"]
    lists = json.loads(path.read_text())
    lists["test"] = lists["test"][:-1]
    path.chmod(0o644)
    path.write_text(json.dumps(lists))
    assert any("split set nfn" in p and "sha256 differs" in p for p in verify(tmp_path / "out").problems)
    path.unlink()
    assert any("split set nfn" in p and "missing" in p for p in verify(tmp_path / "out").problems)
