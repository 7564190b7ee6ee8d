"""The dataset card: the Hub's metadata fields, a `dataset_info` that `datasets` reads as it writes it, the sections."""

from __future__ import annotations

import copy
import json

import pyarrow.parquet as pq
import pytest
import yaml

from zoo.dataset.card import card_header, dataset_info, render_card, size_category
from zoo.data.images import SOURCES
from zoo.families import create_family, list_families
from zoo.storage.folder import MANIFEST, read_manifest
from zoo.dataset.info import describe
from zoo.dataset.provenance import DATA_SETS, FAMILIES
from zoo.storage.record import arrow_schema
from zoo.planning.spec import load_spec
from zoo.data.text import TEXT_SOURCES
from zoo.dataset.verify import verify

CONFIG = "cnn-mnist"


def header_of(text: str) -> dict:
    return yaml.safe_load(text.split("---\n")[1])


def card_data(folder):
    from huggingface_hub import DatasetCard

    return DatasetCard.load(folder / "README.md").data


def test_the_header_carries_the_hubs_fields(tiny_zoo):
    header = header_of((tiny_zoo / "README.md").read_text())
    assert header["license"] == "cc-by-sa-3.0"  # MNIST's terms
    assert header["task_categories"] == ["tabular-regression"]
    assert header["size_categories"] == ["n<1K"]  # 18 rows
    assert header["source_datasets"] == ["extended|ylecun/mnist"]
    assert header["annotations_creators"] == ["machine-generated"]
    assert "language_creators" not in header and "multilinguality" not in header  # no natural-language column
    assert header["pretty_name"] == "nfnzoo model zoo: cnn-mnist"
    assert {"model-zoo", "weight-space-learning", "small-cnn-zoo"} <= set(header["tags"])
    assert [c["config_name"] for c in header["configs"]] == [CONFIG]


def test_dataset_info_is_what_datasets_reads_and_infers(tiny_zoo):
    from datasets import Features
    from datasets.info import DatasetInfosDict

    infos = DatasetInfosDict.from_dataset_card_data(card_data(tiny_zoo))
    entry = read_manifest(tiny_zoo)["configs"][CONFIG]
    assert list(infos) == [CONFIG]
    info = infos[CONFIG]
    shard = tiny_zoo / entry["files"][0]["path"]
    assert info.features == Features.from_arrow_schema(pq.read_schema(shard))  # the Parquet builder casts to these
    assert {name: split.num_examples for name, split in info.splits.items()} == entry["splits"]
    assert {name: split.num_bytes for name, split in info.splits.items()} == entry["arrow_bytes"]
    assert info.download_size == sum(f["bytes"] for f in entry["files"])
    assert info.dataset_size == sum(entry["arrow_bytes"].values())


@pytest.mark.parametrize("family_name", list_families())
def test_card_features_match_datasets_inference_for_every_family(family_name):
    from datasets import Features

    family = create_family(family_name)
    schema = arrow_schema(family.HParams, family.METRICS)
    entry = {"columns": [{"name": f.name, "type": str(f.type)} for f in schema], "splits": {"train": 1}, "files": []}
    assert Features._from_yaml_list(dataset_info("x", entry)["features"]) == Features.from_arrow_schema(schema)


def test_several_configs_are_a_list_led_by_config_name_with_mixed_licenses(tiny_zoo):
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCardData

    manifest = read_manifest(tiny_zoo)
    other = copy.deepcopy(manifest["configs"][CONFIG])
    other["spec"]["dataset"]["name"] = "svhn_gs"
    other["splits"] = {"train": 2000}
    manifest["configs"]["cnn-svhn-gs"] = other
    header = card_header(manifest)
    assert [info["config_name"] for info in header["dataset_info"]] == ["cnn-mnist", "cnn-svhn-gs"]
    assert all(list(info)[0] == "config_name" for info in header["dataset_info"])  # as datasets writes it
    infos = DatasetInfosDict.from_dataset_card_data(DatasetCardData(**header))
    assert infos["cnn-svhn-gs"].splits["train"].num_examples == 2000
    assert header["license"] == "other" and header["license_name"] == "per-config-terms"
    assert header["size_categories"] == ["1K<n<10K"]  # 18 + 2,000 rows
    assert header["source_datasets"] == ["extended|ufldl-stanford/svhn", "extended|ylecun/mnist"]
    text = render_card(manifest)
    assert "`cnn-svhn-gs`: trained on SVHN (grayscale), published under its terms: `other`, non-commercial" in text


def test_the_body_has_uses_creation_limitations_license_and_citation(tiny_zoo):
    text = (tiny_zoo / "README.md").read_text()
    for section in ("## Uses", "## Reading the weights", "## Creation", "## Limitations", "## License",
                    "## Citation"):
        assert f"\n{section}\n" in text, section
    assert "from zoo.hf_datasets import formatted" in text and "**Do not** call `with_format`" in text
    assert "`tiny` profile, which changes the base spec" in text and "not directly comparable with the paper" in text
    training = read_manifest(tiny_zoo)["configs"][CONFIG]["spec"]["training"]  # the profile's own, not the base's
    assert training["epochs"] != load_spec(CONFIG).training.epochs
    assert (f"It trains {training['epochs']} epochs in batches of {training['batch_size']} with checkpoints at "
            f"epochs {training['checkpoint_epochs']}") in text
    assert "Small CNN Zoo (Unterthiner et al. 2020)" in text and "never the test set" in text
    assert "title   = {Predicting Neural Network Accuracy from Weights}" in text
    assert "@software{nfnzoo," in text and "Gradient-Based Learning Applied to Document Recognition" in text


def test_diverged_rows_and_incomplete_packs_are_named_in_the_limitations(tiny_zoo):
    manifest = read_manifest(tiny_zoo)
    entry = manifest["configs"][CONFIG]
    entry.update(status={"diverged": 2, "ok": 16}, complete=False, packed_checkpoints=18, planned_checkpoints=30)
    text = render_card(manifest)
    assert "`cnn-mnist`: 2 rows have status `diverged` and NaN metrics" in text
    assert "`cnn-mnist` is incomplete: 18 of 30 planned checkpoints were packed" in text


def test_a_manifest_from_before_dataset_info_still_renders_verifies_and_loads(tiny_zoo_copy, tmp_path, offline_hf):
    import datasets

    path = tiny_zoo_copy / MANIFEST
    manifest = json.loads(path.read_text())
    del manifest["configs"][CONFIG]["arrow_bytes"]
    path.write_text(json.dumps(manifest))
    info = card_header(manifest)["dataset_info"]
    assert "dataset_size" not in info and all("num_bytes" not in s for s in info["splits"])
    assert verify(tiny_zoo_copy).ok and describe(tiny_zoo_copy)
    (tiny_zoo_copy / "README.md").write_text(render_card(manifest))
    loaded = datasets.load_dataset(str(tiny_zoo_copy), CONFIG, cache_dir=str(tmp_path / "cache"))
    assert {s: rows.num_rows for s, rows in loaded.items()} == manifest["configs"][CONFIG]["splits"]


def test_every_data_source_and_family_has_its_license_and_citation():
    assert set(SOURCES.names()) | set(TEXT_SOURCES.names()) <= set(DATA_SETS)
    assert set(list_families()) <= set(FAMILIES)
    hub_tasks = {"tabular-regression", "tabular-classification", "other"}
    assert {facts.task_category for facts in FAMILIES.values()} <= hub_tasks
    for facts in DATA_SETS.values():
        assert facts.license in {"cc-by-sa-3.0", "mit", "other"}
        assert facts.license != "other" or (facts.license_name and facts.license_link), facts


@pytest.mark.parametrize("rows, bucket", [(0, "n<1K"), (999, "n<1K"), (1_000, "1K<n<10K"), (30_000, "10K<n<100K"),
                                          (270_000, "100K<n<1M"), (1_000_000, "1M<n<10M")])
def test_size_categories_are_the_hubs_buckets(rows, bucket):
    assert size_category(rows) == bucket
