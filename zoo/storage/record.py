"""The checkpoint record: one zoo member at one epoch, and its Arrow row.

A record holds identity: model, run, family, config, architecture, epoch and seed. It also holds
the run's hyperparameters, the metrics, the status and the weights. It converts to and from an
Arrow row here and only here.

The `weights` column is `large_binary`, holding a complete safetensors file. Its only metadata is
the architecture: layer order, shapes and family settings. So same-architecture rows share one
header byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, Literal

import pyarrow as pa
import torch

from zoo.storage import safetensors_io
from zoo.validation.inputs import InputError, load_json_bytes
from zoo.planning.spec import content_hash
from zoo.weightspace import WeightSpace

METADATA_KEY = "nfnzoo"  # the safetensors metadata entry holding the architecture JSON
IDENTITY_COLUMNS = ("model_id", "run_id", "family", "config", "architecture", "epoch", "seed")


@dataclasses.dataclass(frozen=True)
class CheckpointRecord:
    model_id: str
    run_id: str
    family: str
    config: str
    epoch: int
    seed: int
    hparams: dict[str, Any]
    metrics: dict[str, float]
    status: Literal["ok", "diverged"]
    architecture: dict[str, Any]  # the family's Architecture fields
    weights: dict[str, torch.Tensor]  # ordered by the weight space

    @property
    def architecture_id(self) -> str:
        return architecture_id(self.family, self.architecture, WeightSpace.from_state_dict(self.weights))


def architecture_id(family: str, architecture: dict, space: WeightSpace) -> str:
    return content_hash({"family": family, "architecture": architecture, "layers": space.to_json()}, 12)


def weights_metadata(family: str, architecture: dict, space: WeightSpace) -> dict[str, str]:
    """The metadata every row of one architecture shares: enough to rebuild the model."""
    return {METADATA_KEY: json.dumps({"family": family, "architecture": architecture, "layers": space.to_json()},
                                     sort_keys=True, separators=(",", ":"))}


def parse_weights_metadata(metadata: dict[str, str]) -> tuple[str, dict, WeightSpace]:
    """(family, architecture, weight space) of a row's safetensors metadata.

    A malformed one is a one-line `ValueError`. Its JSON is depth-bounded, since it comes from a file."""
    if not isinstance(metadata, dict) or not isinstance(metadata.get(METADATA_KEY), str):
        raise ValueError(f"no `{METADATA_KEY}` entry in the safetensors metadata (not an nfnzoo checkpoint)")
    try:
        info = load_json_bytes(metadata[METADATA_KEY], f"the `{METADATA_KEY}` metadata", strict=True)
        return info["family"], info["architecture"], WeightSpace.from_json(info["layers"])
    except InputError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"the `{METADATA_KEY}` metadata is not an architecture (expected family, architecture "
                         f"and layers; {type(error).__name__}: {ascii(str(error))[1:-1][:80]})") from None


def encode_weights(record: CheckpointRecord) -> bytes:
    space = WeightSpace.from_state_dict(record.weights)
    return safetensors_io.encode(record.weights, weights_metadata(record.family, record.architecture, space))


def _arrow_type(tp: Any) -> pa.DataType:
    origin = typing.get_origin(tp)
    if origin is Literal or tp is str:
        return pa.string()
    table = {float: pa.float64(), int: pa.int64(), bool: pa.bool_()}
    if tp in table:
        return table[tp]
    raise TypeError(f"hyperparameter type {tp!r} has no column type")


def arrow_schema(hparams_cls: type, metrics: dict[str, type]) -> pa.Schema:
    """Flat typed columns: identity, one per hyperparameter, one per metric, status, weights."""
    hints = typing.get_type_hints(hparams_cls)
    fields = [pa.field(name, pa.int64() if name in ("epoch", "seed") else pa.string()) for name in IDENTITY_COLUMNS]
    fields += [pa.field(f.name, _arrow_type(hints[f.name])) for f in dataclasses.fields(hparams_cls)]
    fields += [pa.field(name, _arrow_type(kind)) for name, kind in metrics.items()]
    fields += [pa.field("status", pa.string()),
               pa.field("weights", pa.large_binary(), nullable=False)]  # REQUIRED: no level bytes in its pages
    return pa.schema(fields)


def to_row(record: CheckpointRecord, weights: bytes | None = None) -> dict[str, Any]:
    """The record as one Arrow row (a dict of column -> value)."""
    row = {"model_id": record.model_id, "run_id": record.run_id, "family": record.family, "config": record.config,
           "architecture": record.architecture_id, "epoch": record.epoch, "seed": record.seed}
    row.update(record.hparams)
    row.update(record.metrics)
    row["status"] = record.status
    row["weights"] = weights if weights is not None else encode_weights(record)
    return row


def from_row(row: dict[str, Any], hparam_names: typing.Iterable[str],
             metric_names: typing.Iterable[str]) -> CheckpointRecord:
    tensors, metadata = safetensors_io.decode(row["weights"])
    family, architecture, space = parse_weights_metadata(metadata)
    weights = {name: tensors[name] for name in space.names}
    return CheckpointRecord(
        model_id=row["model_id"], run_id=row["run_id"], family=row["family"], config=row["config"],
        epoch=row["epoch"], seed=row["seed"], hparams={name: row[name] for name in hparam_names},
        metrics={name: row[name] for name in metric_names}, status=row["status"],
        architecture=architecture, weights=weights)
