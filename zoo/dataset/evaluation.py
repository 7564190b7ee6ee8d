"""How an imported config's members were scored, so that `nfnzoo verify --recompute` can re-score them.

A generated config's spec says everything its family needs to evaluate a member again: the data set and
its subsets, the architecture, the evaluation batch size. An imported config's spec only describes its
source's recipe, so nothing could be recomputed from it.

So an importer that knows how its source measured its metrics records that in the manifest. It sits in
the config's `imported` entry, next to the provenance (shape below).

For example, the Small CNN Zoo's test accuracy is measured on the data set's whole test split. That is
what `train_network.py` evaluates, so its importer records `test_size: null`. A zoo of ours exported to
that layout carries its own test subset in the exporter's sidecar. Imported back, it records that subset
instead.

`evaluation_spec` rebuilds the object the family's `load_data` and `evaluate` read: `name`, `family`,
`dataset`, `architecture`, `training.eval_batch_size`. It is validated like a spec, with the config's
architecture from the manifest. The record's shape:

    "imported": {..., "evaluation": {"dataset": {<DatasetSpec>}, "eval_batch_size": 2000}}
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.planning.spec import DatasetSpec
from zoo.validation.domains import Size
from zoo.validation.schema import from_data


@dataclasses.dataclass(frozen=True)
class EvaluationTraining:
    eval_batch_size: Size = 2000  # what the family's evaluate batches by (a batch size never changes a metric)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What an importer records: the data the source scored its members on."""

    dataset: DatasetSpec
    eval_batch_size: Size = 2000


@dataclasses.dataclass(frozen=True)
class EvaluationSpec:
    """The part of a `ZooSpec` that a family's `load_data` and `evaluate` read."""

    name: str
    family: str
    dataset: DatasetSpec
    architecture: dict[str, Any]
    training: EvaluationTraining


def evaluation_spec(name: str, entry: dict, where: str) -> EvaluationSpec | None:
    """The evaluation an imported config records, or None where its importer records none.

    A malformed one is a SchemaError naming `where` and the key.
    """
    recorded = entry.get("imported", {}).get("evaluation")
    if recorded is None:
        return None
    evaluation = from_data(Evaluation, recorded, where, "imported.evaluation")
    architectures = [a["architecture"] for a in entry["architectures"].values()]
    if len(architectures) != 1:  # an import writes one architecture per config
        return None
    (architecture,) = architectures
    return EvaluationSpec(name=name, family=entry["family"], dataset=evaluation.dataset, architecture=architecture,
                          training=EvaluationTraining(evaluation.eval_batch_size))


# --- the exporters' sidecar -----------------------------------------------------------------------

EVALUATION_SIDECAR = "nfnzoo_evaluation.json"  # beside a layout our exporter wrote; the authors' loaders ignore it
MAX_SIDECAR_BYTES = 2**16


def evaluation_of(entry: dict) -> dict:
    """What a generated config's members were scored on: its spec's data set and evaluation batch size."""
    spec = entry["spec"]
    return {"dataset": spec["dataset"], "eval_batch_size": spec.get("training", {}).get("eval_batch_size", 2000)}


def read_evaluation_sidecar(path, dataset: str) -> dict | None:
    """The sidecar at `path`, validated, for a source on `dataset`; None where there is none.

    A malformed one, or one naming another data set, is an InputError naming the file.
    """
    from pathlib import Path

    from zoo.validation.inputs import InputError, read_json_file
    from zoo.validation.schema import SchemaError, to_data

    path = Path(path)
    if not path.exists():
        return None
    data = read_json_file(path, MAX_SIDECAR_BYTES, strict=True, what="evaluation sidecar")
    try:
        evaluation = from_data(Evaluation, data, str(path))
    except SchemaError as error:
        raise InputError(str(error)) from None
    if evaluation.dataset.name != dataset:
        raise InputError(f"{path}: dataset.name is {evaluation.dataset.name!r}, but the source's rows "
                         f"are on {dataset!r}")
    return to_data(evaluation)
