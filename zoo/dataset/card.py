"""The dataset card (README.md) of a packed zoo folder, following the Hub's card conventions.

The YAML header carries what the Hub and `datasets` read.

`configs` lists every config and split with the exact list of its shard files. That is all
`datasets.load_dataset(folder_or_repo, config)` needs. A glob would also read the unlisted leftovers an
interrupted pack may leave (`zoo.storage.commit`).

`dataset_info` gives per config the features, each split's `num_examples` and `num_bytes`,
`download_size` and `dataset_size`. Its layout is the one `datasets` itself writes
(`DatasetInfosDict.to_dataset_card_data`): one mapping for one config, else a list of entries led by
`config_name`. `load_dataset`'s default verification (`basic_checks`,
`datasets.utils.info_utils.verify_splits`) then raises on a shard too many or too few. The features are
the ones `datasets` infers from the shards' Arrow schema (`Features.from_arrow_schema`), since the
Parquet builder casts every table to them. A test holds the two equal.

The Hub's descriptive fields are `license`, `task_categories`, `size_categories`, `source_datasets`,
`annotations_creators`, `pretty_name` and `tags`. `license` holds the data set's terms
(`zoo.dataset.provenance`). `language_creators` and `multilinguality` describe natural-language text,
and no column holds any, so they are left out.

The body says what the rows are and how to read the weights (and the one way not to). It says how the
zoo was made, its limitations and what to cite. It is written from the manifest alone, so packing twice
writes the same bytes.

The Hub renders the body as Markdown with HTML, and a received manifest may hold any text. So every
string of it reaches the body through `displayed`. That makes control, bidi and invisible characters
visible and escapes HTML. The resolved spec's code block is literal, made visible, and fenced so that no
backticks in it can close it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from zoo.storage.atomic import write_text_atomic
from zoo.storage.integrity import release_tag
from zoo.dataset.provenance import DATA_SETS, FAMILIES, NFNZOO_BIBTEX, TASK_CATEGORY_WHY
from zoo.planning.spec import SPLIT_NAMES
from zoo.validation.text import markdown_block, visible

# Arrow type (as the manifest records it, str(pa.DataType)) -> `datasets` Value dtype, as
# `datasets.features.features._arrow_to_datasets_dtype` maps them
FEATURE_DTYPES = {"string": "string", "large_string": "large_string", "int64": "int64", "int32": "int32",
                  "double": "float64", "float": "float32", "bool": "bool", "binary": "binary",
                  "large_binary": "large_binary"}
CARD = "README.md"
INCOMPLETE_MARK = "**Incomplete:**"  # what a config's section says when not every planned checkpoint is packed
SIZE_CATEGORIES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                   (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]
BASE_TAGS = ["model-zoo", "weight-space-learning", "neural-functional-networks", "safetensors"]
FAMILY_TAGS = {"cnn": ["small-cnn-zoo"], "transformer": ["small-transformer-zoo"],
               "inr": ["implicit-neural-representations", "siren"]}


def size_category(rows: int) -> str:
    """The Hub's size bucket for `rows` examples."""
    for bound, name in SIZE_CATEGORIES:
        if rows < bound:
            return name
    return "n>1B"


def dataset_info(name: str, entry: dict) -> dict:
    """One config's `dataset_info` entry; keys the manifest lacks (older packs) are left out."""
    info: dict = {"config_name": name}
    dtypes = [FEATURE_DTYPES.get(c["type"]) for c in entry["columns"]]
    if all(dtypes):  # an unknown type: let `datasets` infer rather than cast to a guess
        info["features"] = [{"name": c["name"], "dtype": d} for c, d in zip(entry["columns"], dtypes)]
    arrow_bytes = entry.get("arrow_bytes", {})
    splits = []
    for split in SPLIT_NAMES:
        if entry["splits"].get(split):
            split_info = {"name": split}
            if split in arrow_bytes:
                split_info["num_bytes"] = arrow_bytes[split]
            split_info["num_examples"] = entry["splits"][split]
            splits.append(split_info)
    info["splits"] = splits
    info["download_size"] = sum(f["bytes"] for f in entry["files"])
    if arrow_bytes:
        info["dataset_size"] = sum(arrow_bytes.values())
    return info


def _data_set(entry: dict):
    return DATA_SETS.get(entry["spec"]["dataset"]["name"])


def _license_fields(entries: dict) -> dict:
    # an imported zoo is published under its authors' terms (`zoo.imports`), a generated one under its data set's
    terms = {(e["imported"]["license"], None, None) if "imported" in e
             else (f.license, f.license_name, f.license_link) if f else ("unknown", None, None)
             for e, f in ((e, _data_set(e)) for e in entries.values())}
    if len(terms) == 1:
        (license_id, license_name, license_link), = terms
        fields = {"license": license_id}
        if license_name:
            fields.update(license_name=license_name, license_link=license_link)
        return fields
    return {"license": "other", "license_name": "per-config-terms",
            "license_details": "the configs carry different data-set terms; see the card's License section"}


def split_paths(entry: dict, split: str) -> list[str]:
    """The exact shard files of one split: `load_dataset` reads these and nothing else.

    It never reads the unlisted leftovers of an interrupted pack (`zoo.storage.commit`).
    """
    return [f["path"] for f in entry["files"] if f["split"] == split]


def card_header(manifest: dict) -> dict:
    names = sorted(manifest["configs"])
    entries = {name: manifest["configs"][name] for name in names}
    families = sorted({e["family"] for e in entries.values()})
    sources = sorted({f"extended|{f.source_id}" for f in map(_data_set, entries.values()) if f})
    infos = [dataset_info(name, entries[name]) for name in names]
    configs = [{"config_name": name,
                "data_files": [{"split": split, "path": split_paths(entries[name], split)}
                               for split in SPLIT_NAMES if entries[name]["splits"].get(split)]}
               for name in names]
    header = {
        **_license_fields(entries),
        "task_categories": sorted({FAMILIES[f].task_category if f in FAMILIES else "other" for f in families}),
        "size_categories": [size_category(sum(sum(e["splits"].values()) for e in entries.values()))],
        "source_datasets": sources or ["original"],
        "annotations_creators": ["machine-generated"],
        "pretty_name": "nfnzoo model zoo: " + ", ".join(names) if names else "nfnzoo model zoo",
        "tags": BASE_TAGS + [tag for f in families for tag in FAMILY_TAGS.get(f, [])],
        "dataset_info": infos[0] if len(infos) == 1 else infos,
        "configs": configs,
    }
    return header


def _config_section(name: str, entry: dict, resolved: dict) -> str:
    """A config's section, from its `displayed` manifest entry.

    `resolved` is its spec as recorded, shown in a fenced YAML block. The block is literal in Markdown:
    it is only made visible, and `yaml.safe_dump` escapes the rest.
    """
    spec = entry["spec"]
    facts = _data_set(entry)
    counts = ", ".join(f"{split}: {rows:,} checkpoints ({entry['runs'][split]:,} runs)"
                       for split, rows in entry["splits"].items())
    archs = "\n".join(
        f"- `{arch_id}`: {info['num_params']:,} parameters; layers "
        + ", ".join(f"`{layer['name']}` {tuple(layer['shape'])}" for layer in info["layers"])
        for arch_id, info in sorted(entry["architectures"].items()))
    statuses = ", ".join(f"{k}: {v:,}" for k, v in entry["status"].items())
    complete = "" if entry["complete"] else (
        f"\n{INCOMPLETE_MARK} {entry['packed_checkpoints']:,} of {entry['planned_checkpoints']:,} "
        "planned checkpoints.\n")
    data_set = facts.pretty_name if facts else spec["dataset"]["name"]
    profile = spec.get("profile") or "full"
    imported = entry.get("imported")
    if imported:
        complete += (f"\nImported from {imported['name']} ({imported['url']}), licence `{imported['license']}`. "
                     "Conversions applied:\n\n" + "".join(f"- {line}\n" for line in imported["conversions"])
                     + f"\nVerified: {imported['verified']}.\n")
    for set_name, split_set in sorted(entry.get("split_sets", {}).items()):
        rows = ", ".join(f"{split}: {count:,}" for split, count in split_set["rows"].items())
        complete += (f"\nSplit set `{set_name}` (`{split_set['path']}`; {rows}; `zoo.split_set_loader.load_split_set`, "
                     f"`--set task.splits={set_name}`): {split_set['description']}\n")
    return f"""## `{name}`

{spec.get('description', '').strip()}

- Family: `{entry['family']}`; data set: `{spec['dataset']['name']}` ({data_set}); profile: `{profile}`
- Splits (by run): {counts}
- Status: {statuses}
- Columns: {", ".join(f"`{c['name']}` ({c['type']})" for c in entry["columns"] if c["name"] != "weights")}
- Spec hash: `{entry['spec_hash']}`; dataset hash: `{entry['dataset_hash']}`
{complete}
Architectures:
{archs}

<details><summary>Resolved spec</summary>

{_fenced("yaml", visible(yaml.safe_dump(resolved, sort_keys=True).strip(), lines=True))}
</details>
"""


def _usage(first: str, tag: str) -> str:
    return f"""## Reading the weights

```python
import datasets
from safetensors.torch import load

zoo = datasets.load_dataset("path/or/repo", "{first}")
# from the Hub, pinned to the tagged commit `nfnzoo publish` made of this card's manifest:
# zoo = datasets.load_dataset("ORG/NAME", "{first}", revision="{tag}")
state_dict = load(zoo["train"][0]["weights"])  # Python format: the row's exact bytes

# Tensors for training, NUL-safe (pip install nfnzoo):
from zoo.hf_datasets import formatted
train = formatted(zoo["train"], "torch")  # numbers as tensors, `weights` as state dicts in layer order
batch = train[:32]  # batch["weights"]["<layer>"] is a tensor; or torch.utils.data.DataLoader(train, 32)
```

**Do not** call `with_format` / `set_format` with `"torch"`, `"numpy"`, `"tensorflow"` or `"jax"` on a
split whose formatted columns include `weights`. `datasets` turns binary values into NumPy's
fixed-width bytes, which drop trailing NUL bytes: every checkpoint whose last tensor ends in
zeros (every epoch-0 CNN checkpoint: its last bias starts at 0) comes back truncated and
safetensors refuses it. Use `zoo.hf_datasets.formatted` or `ds.with_transform(zoo.hf_datasets.decode_weights)`;
without nfnzoo, keep `weights` out of the formatted columns:
`ds.with_format("torch", columns=[c for c in ds.column_names if c != "weights"], output_all_columns=True)`
returns it as exact bytes.
"""


def _creation(entries: dict) -> str:
    lines = []
    for name, entry in entries.items():
        spec, family = entry["spec"], FAMILIES.get(entry["family"])
        if "imported" in entry:
            lines.append(f"- `{name}`: not trained by nfnzoo: imported from {entry['imported']['name']} "
                         f"({entry['imported']['url']}) by `nfnzoo import {entry['imported']['format']}`; its "
                         "section lists every conversion.")
            continue
        training = ", ".join(f"{key} {value}" for key, value in sorted(spec.get("training", {}).items()))
        space = spec.get("search_space", {})
        sampled = space.get("sampled") or {}
        if sampled.get("count"):
            draw = f"{sampled['count']:,} sampled hyperparameter settings (seed {sampled.get('seed')})"
        else:
            draw = "a hyperparameter grid"
        reference = (f" It follows {family.reference_zoo} (member: {family.member}). What differs from it: "
                     f"{family.differences}") if family else ""
        fractions = (spec.get("splits") or {}).get("fractions")
        split = (", ".join(f"{key} {value}" for key, value in sorted(fractions.items())) if fractions
                 else "by the spec's ranges")
        lines.append(f"- `{name}`: {draw} x seeds {spec.get('seeds')}; training: {training}; runs split "
                     f"{split}.{reference}")
    return """## Creation

Weight-space learning (neural functional networks, accuracy prediction, INR classification)
needs many trained networks whose hyperparameters, training trajectory and metrics are known.
Each config is generated from its spec (the resolved spec is in the config's section and in
`manifest.json`): the runs are planned from the search space, every run trains with explicit
seeded generators, checkpoints are stored as safetensors and the metrics are measured on the
data set's held-out splits. The rows are machine-generated; nothing is annotated by hand.

""" + "\n".join(lines) + "\n"


def _limitations(entries: dict) -> str:
    lines = []
    for name, entry in entries.items():
        profile = entry["spec"].get("profile")
        if profile:
            training = entry["spec"].get("training", {})
            lines.append(f"- `{name}` uses the spec's `{profile}` profile, which changes the base spec's size or "
                         f"recipe: numbers measured on it are not directly comparable with the paper's. It trains "
                         f"{training.get('epochs')} epochs in batches of {training.get('batch_size')} with "
                         f"checkpoints at epochs {training.get('checkpoint_epochs')} (Creation above, and the "
                         "resolved spec); where the description names other epochs or sizes, those are the base "
                         "spec's.")
        diverged = entry["status"].get("diverged", 0)
        if diverged:
            lines.append(f"- `{name}`: {diverged:,} rows have status `diverged` and NaN metrics; filter on "
                         "`status == \"ok\"` before fitting a predictor.")
        if not entry["complete"]:
            lines.append(f"- `{name}` is incomplete: {entry['packed_checkpoints']:,} of "
                         f"{entry['planned_checkpoints']:,} planned checkpoints were packed "
                         "(`nfnzoo pack --allow-incomplete`); the missing runs are not a random sample.")
    return """## Limitations

- Rows with status `diverged` (training went non-finite) keep their weights and have NaN
  metrics; a predictor must filter or model them.
- "Best" checkpoints and every selection use a validation split held out of the training
  data, never the test set; the test metrics are for reporting only.
- Checkpoints of one run are correlated; splits are by run, so compare models across runs.
- The member networks are tiny and are not useful classifiers in their own right.
""" + "".join(line + "\n" for line in lines)


def _license(entries: dict) -> str:
    lines = []
    for name, entry in entries.items():
        facts = _data_set(entry)
        if "imported" in entry:
            imported = entry["imported"]
            lines.append(f"- `{name}`: {imported['name']}, published by its authors under `{imported['license']}` "
                         f"({imported['license_link']}); its members were trained on "
                         f"{facts.pretty_name if facts else entry['spec']['dataset']['name']}"
                         + (f", whose terms are `{facts.license}`." if facts else "."))
            continue
        if facts:
            link = f" ({facts.license_link})" if facts.license_link else ""
            lines.append(f"- `{name}`: trained on {facts.pretty_name}, published under its terms: "
                         f"`{facts.license}`, {facts.terms}{link}.")
        else:
            lines.append(f"- `{name}`: the terms of `{entry['spec']['dataset']['name']}` are not recorded.")
    return "## License\n\n" + "\n".join(lines) + "\n"


def _citation(entries: dict) -> str:
    entries_bibtex = [NFNZOO_BIBTEX]
    for entry in entries.values():
        family, facts = FAMILIES.get(entry["family"]), _data_set(entry)
        imported = entry.get("imported", {})
        for bibtex in (*([imported["citation"]] if imported else []), *imported.get("split_set_citations", {}).values(),
                       *(family.bibtex if family else ()), *((facts.bibtex,) if facts else ())):
            if bibtex not in entries_bibtex:
                entries_bibtex.append(bibtex)
    return "## Citation\n\nThis dataset, the zoos it follows and the data sets its members were trained on:\n\n" \
           "```bibtex\n" + "\n\n".join(entries_bibtex) + "\n```\n"


def displayed(value: Any) -> Any:
    """`value` (the manifest's data) as the card's body may show it.

    Every string, key or value, is made visible (`zoo.validation.text.visible`). So no escape, bidi or
    invisible character reaches the Hub's page. Each is also HTML-escaped (`<` and `&`), so a status, a
    name or a description cannot add a tag. Walked without recursion; numbers and the rest are
    unchanged.
    """
    if isinstance(value, str):
        return markdown_block(value)
    if not isinstance(value, (dict, list)):
        return value
    result: Any = {} if isinstance(value, dict) else []
    stack = [(value, result)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, (dict, list)):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
                item = copy
            elif isinstance(item, str):
                item = markdown_block(item)
            if isinstance(target, dict):
                target[markdown_block(key) if isinstance(key, str) else key] = item
            else:
                target.append(item)
    return result


def _fenced(language: str, text: str) -> str:
    """`text` in a fenced code block whose fence is longer than any run of backticks in it.

    So nothing in `text` can close the block.
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def render_card(manifest: dict) -> str:
    header = yaml.safe_dump(card_header(manifest), sort_keys=False, width=120)
    names = sorted(manifest["configs"])
    entries = {markdown_block(name): displayed(manifest["configs"][name]) for name in names}
    sections = "\n".join(_config_section(markdown_block(name), entries[markdown_block(name)],
                                          manifest["configs"][name]["spec"]) for name in names)
    return f"""---
{header}---

# Model zoo

Checkpoints of small neural networks, one Parquet row per checkpoint, generated by
nfnzoo (package version {markdown_block(manifest['package_version'])}).
Each row has typed metadata columns (ids, epoch, seed, one column per hyperparameter, the
family's metrics, `status`) and `weights`: the bytes of a complete safetensors file, whose
metadata entry `nfnzoo` gives the family, architecture and layer order.

Splits are made by training run, so checkpoints of one run never cross splits.
`manifest.json` lists every shard with its sha256 and row count (`nfnzoo verify` checks them);
the header's `dataset_info` makes `datasets.load_dataset` check every split's row count.

## Uses

- Weight-space learning: predicting a network's accuracy or generalization gap from its
  weights, classifying INRs by their image's class, testing the equivariance of neural
  functionals (task categories: {TASK_CATEGORY_WHY}).
- Studying training dynamics across hyperparameters (several checkpoints per run).
- Not for: deploying the member networks, or commercial use where a data set's terms forbid it
  (see License).

{_usage(names[0], release_tag(manifest))}
{sections}
{_creation(entries)}
{_limitations(entries)}
{_license(entries)}
{_citation(entries)}"""


def write_card(folder: Path, manifest: dict) -> Path:
    return write_text_atomic(Path(folder) / CARD, render_card(manifest))
