"""Re-scoring a submission: its metrics recomputed from its predictions and the pinned targets.

A submission's predictions sidecar (`seed,model_id,prediction`) is read as plain CSV, never evaluated. The
harness's `target` column is ignored. For each seed the board takes the protocol's test rows and their
targets from its pinned test metadata. It reads them through the task's `test_targets`
(`leaderboards.pinned`). It requires the seed's model_ids to be exactly those rows. Then it recomputes the
task's metrics with `score`, the same function the task's run reports with.

A reported metric that differs from the recomputed one by more than `TOLERANCE` (absolute) rejects the
submission. So do missing, extra or repeated model_ids. What each task can recompute is its `RESCORING`. For
INR editing that is the rows and the mean of the submitted per-SIREN errors, since the edited renders need
the model.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas

from benchmarks.results import Results
from benchmarks.tasks import get_task_class
from zoo.storage.integrity import check_declared_sizes
from zoo.validation.inputs import InputError, read_capped

TOLERANCE = 1e-9  # predictions round-trip exactly through CSV; the rest is summation order
MAX_PREDICTIONS_BYTES = 64 * 2**20  # 64 MiB: a 20,000-row test split over 10 seeds is ~12 MB
COLUMNS = ("seed", "model_id", "prediction")
OPTIONAL = ("target",)  # the harness writes it; the board uses its own targets
SHOWN = 3  # model_ids quoted per problem


def read_predictions(path: str | Path) -> tuple[pandas.DataFrame | None, list[str]]:
    """A predictions CSV as (frame of seed, model_id, prediction; problems). Plain CSV only."""
    path = Path(path)
    try:  # a regular file, read up to the cap (a FIFO or /dev/zero is refused, never waited on)
        data = read_capped(path, MAX_PREDICTIONS_BYTES, "predictions file")
    except InputError as error:
        return None, [str(error)]
    try:
        text = data.decode("utf-8")
        frame = pandas.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, engine="c")
    except UnicodeDecodeError as error:
        return None, [f"{path}: not a text file (byte {error.start} is not UTF-8); expected CSV"]
    except (ValueError, pandas.errors.ParserError) as error:
        return None, [f"{path}: not a CSV table ({str(error).strip()})"]
    columns = list(frame.columns)
    unknown = sorted(set(columns) - set(COLUMNS) - set(OPTIONAL))
    missing = [name for name in COLUMNS if name not in columns]
    if missing or unknown or len(set(columns)) != len(columns):
        return None, [f"{path}: expected the columns {list(COLUMNS)} (and optionally {list(OPTIONAL)}), got {columns}"]
    problems = []
    seeds = pandas.to_numeric(frame["seed"], errors="coerce")
    bad = frame.index[seeds.isna() | (seeds % 1 != 0)].tolist()
    if bad:
        problems.append(f"{path}: seed must be an integer; row(s) {bad[:SHOWN]} hold "
                        f"{frame['seed'][bad[:SHOWN]].tolist()}")
    predictions = pandas.to_numeric(frame["prediction"], errors="coerce")
    bad = frame.index[~np.isfinite(predictions.to_numpy(dtype=np.float64))].tolist()
    if bad:
        problems.append(f"{path}: prediction must be a finite number; row(s) {bad[:SHOWN]} hold "
                        f"{frame['prediction'][bad[:SHOWN]].tolist()}")
    empty = frame.index[frame["model_id"] == ""].tolist()
    if empty:
        problems.append(f"{path}: model_id is empty in row(s) {empty[:SHOWN]}")
    if problems:
        return None, problems
    return pandas.DataFrame({"seed": seeds.astype(np.int64), "model_id": frame["model_id"],
                             "prediction": predictions.astype(np.float64)}), []


def _listing(ids: set[str]) -> str:
    """A count and the first few ids, each shown as ASCII and cut short. An id from a CSV may hold anything."""
    shown = [ascii(model_id)[1:-1][:60] for model_id in sorted(ids)[:SHOWN]]
    return f"{len(ids)} ({', '.join(shown)}{', …' if len(ids) > SHOWN else ''})"


def rescore(results: Results, predictions: pandas.DataFrame, test_metadata: pandas.DataFrame) -> list[str]:
    """The problems found re-scoring `results` from `predictions` on the pinned test metadata."""
    task = get_task_class(results.task)
    try:
        expected = task.test_targets(test_metadata, results.task_config)
    except (ValueError, KeyError) as error:
        return [f"the pinned test split cannot serve the results' protocol: {error}"]
    except NotImplementedError as error:
        return [str(error)]
    expected_ids = expected["model_id"].astype(str)
    if expected_ids.duplicated().any():
        return [f"the pinned test split repeats model_ids under this protocol: "
                f"{_listing(set(expected_ids[expected_ids.duplicated()]))}"]
    expected = expected.assign(model_id=expected_ids).reset_index(drop=True)
    targets = pandas.Series(expected["target"].to_numpy(dtype=np.float64), index=expected_ids)
    problems = []
    unknown_seeds = sorted(set(predictions["seed"].tolist()) - set(results.seeds))
    if unknown_seeds:
        problems.append(f"the predictions hold seeds {unknown_seeds} that the results do not list")
    for entry in results.per_seed:
        rows = predictions[predictions["seed"] == entry.seed]
        where = f"seed {entry.seed}"
        repeated = rows["model_id"][rows["model_id"].duplicated()]
        if len(repeated):
            problems.append(f"{where}: the predictions repeat model_ids: {_listing(set(repeated))}")
            continue
        given = set(rows["model_id"])
        missing, extra = set(targets.index) - given, given - set(targets.index)
        if missing or extra:
            problems.append(f"{where}: the predicted model_ids are not the test split's {len(targets)} rows under the "
                            "protocol" + (f"; missing {_listing(missing)}" if missing else "")
                            + (f"; not test rows {_listing(extra)}" if extra else ""))
            continue
        aligned = rows.set_index("model_id")["prediction"].reindex(targets.index).to_numpy(dtype=np.float64)
        try:
            recomputed = task.score_rows(expected, aligned)
        except ValueError as error:
            problems.append(f"{where}: the predictions cannot be scored ({error})")
            continue
        for name, value in recomputed.items():
            claimed = entry.metrics.get(name)
            if claimed is None:
                problems.append(f"{where}: the results do not report {name}")
            elif not abs(claimed - value) <= TOLERANCE:
                problems.append(f"{where}: {name} is reported as {claimed!r}, but the predictions re-score to "
                                f"{value!r} on the pinned targets (tolerance {TOLERANCE:g})")
    return problems


def predictions_frame_bytes(predictions: pandas.DataFrame) -> bytes:
    """The predictions as the board stores them: Parquet (seed, model_id, prediction), zstd."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    table = pa.Table.from_pandas(predictions[list(COLUMNS)].reset_index(drop=True), preserve_index=False)
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def read_stored_predictions(path: str | Path) -> pandas.DataFrame:
    """An entry's stored predictions (Parquet), read within `MAX_PREDICTIONS_BYTES`."""
    import pyarrow.parquet as pq

    data = read_capped(path, MAX_PREDICTIONS_BYTES, "stored predictions file")
    check_declared_sizes(Path(path))  # its footer and pages vouch for their sizes before any column is decoded
    return pq.read_table(io.BytesIO(data)).to_pandas()
