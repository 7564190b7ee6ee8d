"""The staging folder: one safetensors file per finished checkpoint, named by its id.

Each file is written atomically (`zoo.atomic`: a temporary file in the same folder, fsynced,
then renamed), so a crash leaves either a whole checkpoint or none, and a resumed job
skips exactly the checkpoints that exist. A staging file carries the full record in its
metadata, so packing needs nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from zoo import safetensors_io
from zoo.atomic import write_bytes_atomic
from zoo.record import CheckpointRecord, parse_weights_metadata, weights_metadata
from zoo.weightspace import WeightSpace

RECORD_KEY = "nfnzoo.record"
SUFFIX = ".safetensors"


class Staging:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, model_id: str) -> Path:
        return self.root / model_id[:2] / f"{model_id}{SUFFIX}"  # 256 sub-folders keep listings fast

    def exists(self, model_id: str) -> bool:
        return self.path(model_id).exists()

    def missing(self, model_ids: tuple[str, ...] | list[str]) -> list[str]:
        return [m for m in model_ids if not self.exists(m)]

    def write(self, record: CheckpointRecord) -> Path:
        space = WeightSpace.from_state_dict(record.weights)
        metadata = weights_metadata(record.family, record.architecture, space)
        identity = {"model_id": record.model_id, "run_id": record.run_id, "family": record.family,
                    "config": record.config, "epoch": record.epoch, "seed": record.seed,
                    "hparams": record.hparams, "metrics": record.metrics, "status": record.status}
        metadata[RECORD_KEY] = json.dumps(identity, sort_keys=True, allow_nan=True)
        payload = safetensors_io.encode(record.weights, metadata)
        return write_bytes_atomic(self.path(record.model_id), payload, durable=True)

    def read(self, model_id: str) -> CheckpointRecord:
        return read_staged(self.path(model_id))

    def model_ids(self) -> list[str]:
        """Ids of the complete checkpoints (temporary files are ignored), sorted."""
        return sorted(p.name[:-len(SUFFIX)] for p in self.root.glob(f"??/*{SUFFIX}"))

    def __iter__(self) -> Iterator[CheckpointRecord]:
        for model_id in self.model_ids():
            yield self.read(model_id)


def read_staged(path: Path) -> CheckpointRecord:
    tensors, metadata = safetensors_io.decode(path.read_bytes())
    family, architecture, space = parse_weights_metadata(metadata)
    info = json.loads(metadata[RECORD_KEY])
    return CheckpointRecord(architecture=architecture, weights={n: tensors[n] for n in space.names}, **info)
