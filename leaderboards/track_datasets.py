"""Datasets of the continual-learning tracks on a board: a benchmark's definition, checked by its hash.

A track's results (`benchmarks.tracks.reporting`) name as their dataset the benchmark's definition. It is
carried whole in `task_config["definition"]`: the task sequence, the backbone's config and checksum. The
dataset hash is that definition's canonical-JSON sha256.

The board accepts such a dataset when the hash recomputes from the definition. It registers it with the
source `track:<track>`. As its test metadata it pins the cells the definition allows, which re-scoring then
reads. Those are the task's `definition_cells`. For the continual-learning tracks they are the accuracy
matrix's cells (`benchmarks.tasks.continual_learning`). For the token-dynamics track they are per-example
cells (`benchmarks.tasks.token_dynamics`).

The definition's declared size (tasks, test examples) is checked before any cell is built. It is checked
against the task's documented limit (`cell_count`). When the results name predictions, it is also checked
against the rows the predictions file holds (at least one seed's `predicted_cells`). Otherwise a few bytes
declaring `tasks: 10000` would build 50 million rows.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.results import Results
from benchmarks.tasks import get_task_class
from benchmarks.tasks.continual_learning import definition_hash
from benchmarks.tasks.track_task import TrackTask
from leaderboards.datasets import KnownDataset

FAMILY = "track"


def is_track_dataset(results: Results) -> bool:
    return results.dataset.family == FAMILY


def check_track_dataset(results: Results, predicted_rows: int | None = None
                        ) -> tuple[list[str], KnownDataset | None, bytes | None]:
    """(problems, the dataset's record, the test metadata to pin) for a track's results;
    `predicted_rows`: the rows of the submitted predictions, when there are any."""
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
    task_class = get_task_class(results.task)
    if not issubclass(task_class, TrackTask):
        return [f"task {results.task!r} is not a track's task: it has no definition cells to pin"], None, None
    try:
        task_class.cell_count(definition)  # the declared size, bounded, before anything is built
        per_seed = task_class.predicted_cells(definition, results.task_config)
    except ValueError as error:
        return [f"task_config.definition: {error}"], None, None
    if predicted_rows is not None and predicted_rows < per_seed:  # re-scoring names any cell missing; this
        return [f"task_config.definition declares {per_seed:,} predicted cells per seed, but the predictions "
                f"file holds only {predicted_rows:,} rows in all"], None, None  # refuses a size nothing backs
    try:
        cells = task_class.definition_cells(definition)
    except ValueError as error:
        return [f"task_config.definition: {error}"], None, None
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(cells, preserve_index=False), buffer, compression="zstd")
    track = results.task_config.get("track", "?")
    record = KnownDataset(name=claimed.path, config=claimed.config, dataset_hash=actual, family=FAMILY,
                          source=f"track:{track}")
    return [], record, buffer.getvalue()
