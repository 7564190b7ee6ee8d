"""Datasets of the continual-learning tracks on a board: a benchmark's definition, checked by its hash.

A track's results (`benchmarks.tracks.reporting`) name as their dataset the benchmark's
definition, carried whole in `task_config["definition"]` (the task sequence, the backbone's
config and checksum); the dataset hash is that definition's canonical-JSON sha256. The board
accepts such a dataset when the hash recomputes from the definition, registers it with the
source `track:<track>`, and pins as its test metadata the cells the definition allows, which the
re-scoring then reads: the task's `definition_cells` (the continual-learning tracks' accuracy
matrix cells, `benchmarks.tasks.continual_learning`; the token-dynamics track's per-example
cells, `benchmarks.tasks.token_dynamics`).
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.results import Results
from benchmarks.tasks import get_task_class
from benchmarks.tasks.continual_learning import definition_hash
from leaderboards.datasets import KnownDataset

FAMILY = "track"


def is_track_dataset(results: Results) -> bool:
    return results.dataset.family == FAMILY


def check_track_dataset(results: Results) -> tuple[list[str], KnownDataset | None, bytes | None]:
    """(problems, the dataset's record, the test metadata to pin) for a track's results."""
    claimed = results.dataset
    definition = results.task_config.get("definition")
    if not isinstance(definition, dict):
        return [f"a track's results carry their benchmark's definition in task_config.definition; "
                f"found {type(definition).__name__}"], None, None
    actual = definition_hash(definition)
    if actual != claimed.dataset_hash:
        return [f"dataset_hash {claimed.dataset_hash[:12]}… is not the hash of task_config.definition "
                f"({actual[:12]}…): the definition and the claimed dataset differ"], None, None
    if results.task_config.get("benchmark") != definition.get("benchmark"):
        return ["task_config.benchmark differs from task_config.definition.benchmark"], None, None
    cells_of = getattr(get_task_class(results.task), "definition_cells", None)
    if cells_of is None:
        return [f"task {results.task!r} is not a track's task: it has no definition cells to pin"], None, None
    try:
        cells = cells_of(definition)
    except ValueError as error:
        return [f"task_config.definition: {error}"], None, None
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(cells, preserve_index=False), buffer, compression="zstd")
    track = results.task_config.get("track", "?")
    record = KnownDataset(name=claimed.path, config=claimed.config, dataset_hash=actual, family=FAMILY,
                          source=f"track:{track}")
    return [], record, buffer.getvalue()
