"""Verification of a packed zoo folder against its manifest, and metric recomputation.

Checks every shard listed in ``manifest.json``: present, of the recorded size and sha256,
readable as Parquet, with the recorded row count and the recorded schema; flags shards on
disk that the manifest does not list and a card that does not list the configs. A zoo with
nothing packed fails; an incomplete one (fewer checkpoints packed than planned, which
`nfnzoo pack --allow-incomplete` writes) fails too unless ``allow_incomplete``, when it is a
warning: a partial zoo is a legitimate thing to share only when someone chose it. With
``recompute=N`` it reloads N seeded-random checkpoints into the family's model and
re-evaluates them on the stored validation and test sets, failing if the metrics differ; with
``retrain=N`` it trains N seeded-random runs again and fails unless their checkpoints are
the packed ones bit for bit (`zoo.retrain`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zoo.card import card_header
from zoo.families import create_family
from zoo.folder import read_manifest
from zoo.integrity import shard_problem
from zoo.spec import spec_from_data

@dataclasses.dataclass
class VerifyReport:
    files_checked: int = 0
    rows_checked: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    recomputed: list[dict] = dataclasses.field(default_factory=list)
    retrained: list[dict] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _check_file(folder: Path, entry: dict, columns: list[dict], report: VerifyReport) -> None:
    path = folder / entry["path"]
    problem = shard_problem(path, entry)
    if problem == "missing":
        report.problems.append(f"{entry['path']}: missing")
        return
    report.files_checked += 1
    if problem is not None:
        report.problems.append(f"{entry['path']}: {problem}")
    try:
        metadata = pq.ParquetFile(path).metadata
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as error:
        report.problems.append(f"{entry['path']}: not readable as Parquet ({error})")
        return
    if metadata.num_rows != entry["rows"]:
        report.problems.append(f"{entry['path']}: {metadata.num_rows} rows, manifest says {entry['rows']}")
    found = [{"name": f.name, "type": str(f.type)} for f in schema]
    if found != columns:
        report.problems.append(f"{entry['path']}: schema differs from the manifest's columns")
    report.rows_checked += metadata.num_rows


def _recompute(folder: Path, name: str, entry: dict, count: int, seed: int, report: VerifyReport) -> None:
    from zoo.loader import load_split  # torch-heavy; only when recomputing

    spec = spec_from_data(entry["spec"], f"{folder}/manifest.json:{name}")
    family = create_family(spec.family)
    data = family.load_data(spec)
    rng = np.random.default_rng(seed)
    splits = sorted(entry["splits"])
    picks: dict[str, int] = {}
    for split in rng.choice(splits, size=count):
        picks[str(split)] = picks.get(str(split), 0) + 1
    for split, n in sorted(picks.items()):
        loaded = load_split(folder, name, split, check=False)  # verify has just checked every shard
        candidates = np.flatnonzero(loaded.metadata["status"].to_numpy() == "ok")
        for row in rng.choice(candidates, size=min(n, len(candidates)), replace=False):
            row = int(row)
            stored = loaded.metadata.iloc[row]
            hparams = {f.name: stored[f.name] for f in dataclasses.fields(family.HParams)}
            metrics = family.evaluate(spec, hparams, loaded.weights.state_dict(row), data)
            result = {"config": name, "split": split, "model_id": stored["model_id"], "metrics": {}}
            for key, value in metrics.items():
                expected = float(stored[key])
                close = family.metric_matches(key, expected, value, data)
                result["metrics"][key] = {"stored": expected, "recomputed": value, "match": close}
                if not close:
                    report.problems.append(f"{name}/{split} {stored['model_id']}: {key} stored {expected:.6g}, "
                                           f"recomputed {value:.6g}")
            report.recomputed.append(result)


def _check_completeness(name: str, entry: dict, allow_incomplete: bool, report: VerifyReport) -> None:
    packed, planned = entry["packed_checkpoints"], entry["planned_checkpoints"]
    if not entry["files"]:
        report.problems.append(f"config {name}: empty, no shards ({packed:,} of {planned:,} planned checkpoints "
                               "packed); run `nfnzoo generate` to train it")
    elif not entry["complete"]:
        message = (f"config {name}: incomplete, {packed:,} of {planned:,} planned checkpoints packed "
                   "(re-run `nfnzoo generate` to finish it")
        if allow_incomplete:
            report.warnings.append(message + ")")
        else:
            report.problems.append(message + ", or pass --allow-incomplete to accept a partial zoo)")


def verify(folder: str | Path, *, recompute: int = 0, seed: int = 0, allow_incomplete: bool = False,
           retrain: int = 0) -> VerifyReport:
    """Checks a packed zoo folder; see the module docstring for what counts as a problem."""
    folder = Path(folder)
    report = VerifyReport()
    try:
        manifest = read_manifest(folder)
    except (FileNotFoundError, ValueError) as error:
        report.problems.append(str(error))
        return report
    if not manifest["configs"]:
        report.problems.append(f"{folder / 'manifest.json'}: lists no configs; nothing is packed")
        return report
    listed = set()
    for name, entry in sorted(manifest["configs"].items()):
        _check_completeness(name, entry, allow_incomplete, report)
        for file_entry in entry["files"]:
            listed.add(file_entry["path"])
            _check_file(folder, file_entry, entry["columns"], report)
    for stray in sorted((folder / "data").glob("**/*.parquet")):
        relative = stray.relative_to(folder)
        if relative.as_posix() not in listed and not any(part.startswith(".") for part in relative.parts):
            # dot folders are pack's scratch space: never loaded, never uploaded
            report.problems.append(f"{relative.as_posix()}: not listed in the manifest")
    card = folder / "README.md"
    if not card.exists() or f"config_name: {sorted(manifest['configs'])[0]}" not in card.read_text():
        report.problems.append("README.md: missing or does not list the configs (re-run `nfnzoo pack`)")
    elif card_header(manifest)["configs"] and not report.problems:
        for name, entry in sorted(manifest["configs"].items()):
            if recompute > 0:
                _recompute(folder, name, entry, recompute, seed, report)
            if retrain > 0:
                from zoo.retrain import retrain_runs

                results, problems = retrain_runs(folder, name, entry, retrain, seed)
                report.retrained += results
                report.problems += problems
    return report
