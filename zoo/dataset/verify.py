"""Verification of a packed zoo folder against its manifest, and metric recomputation.

The manifest is read through `zoo.storage.folder.read_manifest`. That holds ``manifest.json`` to its
schema and confines its shard paths to the folder.

Every shard listed there must be present, of the recorded size and fast checksum. The checksum is sha256
with ``full``, or where the manifest records no fast checksum. The shard must read as Parquet, with the
recorded row count and schema.

Every row's safetensors header must decode within bounds and match its architecture. This is
`zoo.loader`'s check. So a row the loader would refuse, or over-allocate for, is a problem here, named
by shard and row.

Model ids must be unique across a config. Counts must agree: rows per split, packed = sum of rows <=
planned, complete = packed == planned. The card must list each config's shards and say "incomplete"
exactly where the manifest does.

No string of the manifest, key or value, may hold a control, bidi, zero-width or invisible character
(`zoo.validation.text`). The card and `nfnzoo info` show them, and stored text may not hold one.

Shards on disk that the manifest does not list are a warning when the card names its files. They are an
interrupted pack's leftovers: never read, and the next `nfnzoo pack` removes them. Under an older card's
glob they are a problem, since `datasets.load_dataset` would read them. A card naming other shards than
the manifest is a warning, and `nfnzoo publish` refuses it. It means a pack was killed between writing
the two.

A zoo with nothing packed fails. An incomplete one fails too unless ``allow_incomplete``, when it is a
warning. Incomplete means fewer checkpoints packed than planned, which `nfnzoo pack --allow-incomplete`
writes. A partial zoo is a legitimate thing to share only when someone chose it.

With ``recompute=N`` it reloads N seeded-random checkpoints into the family's model. It re-evaluates
them on the stored validation and test sets, and fails if the metrics differ. An imported config is
re-scored only where its importer recorded how its source scored them (`zoo.dataset.evaluation`). Then
only the metrics the source measured are compared.

With ``retrain=N`` it trains N seeded-random runs again (`zoo.dataset.retrain`). It fails unless their
checkpoints are the packed ones bit for bit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zoo.dataset.card import card_header
from zoo.dataset.card_check import card_problems
from zoo.dataset.evaluation import evaluation_spec
from zoo.families import create_family
from zoo.storage.folder import MANIFEST, read_manifest
from zoo.storage.integrity import declared_size_problem, shard_problem
from zoo.loader import check_row
from zoo.storage.manifest import SPLITS, shard_path
from zoo.storage.safetensors_io import MAX_HEADER_BYTES
from zoo.families.base import get_family
from zoo.planning.spec import check_member_size, spec_from_data
from zoo.validation.schema import SchemaError, from_data
from zoo.validation.inputs import value_problem
from zoo.validation.text import visible

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


ROW_BATCH_BYTES = 64 * 2**20  # the weights read at once while decoding headers
MAX_REPORTED = 5  # problems of one kind per shard, then a count


def _check_file(folder: Path, entry: dict, columns: list[dict], report: VerifyReport, ids: dict[str, str],
                full: bool = False) -> None:
    path = shard_path(folder, entry["path"], f"{folder / MANIFEST}: shard {entry['path']}")
    problem = shard_problem(path, entry, full=full)
    if problem == "missing":
        report.problems.append(f"{entry['path']}: missing")
        return
    report.files_checked += 1
    if problem is not None:
        report.problems.append(f"{entry['path']}: {problem}")
    declared = declared_size_problem(path)
    if declared is not None:  # decode nothing of a shard whose declared sizes are refused
        if declared != problem:
            report.problems.append(f"{entry['path']}: {declared}")
        return
    try:
        parquet = pq.ParquetFile(path)
        metadata, schema = parquet.metadata, parquet.schema_arrow
    except (pa.ArrowInvalid, OSError) as error:
        report.problems.append(f"{entry['path']}: not readable as Parquet ({error})")
        return
    if metadata.num_rows != entry["rows"]:
        report.problems.append(f"{entry['path']}: {metadata.num_rows} rows, manifest says {entry['rows']}")
    found = [{"name": f.name, "type": str(f.type)} for f in schema]
    if found != columns:
        report.problems.append(f"{entry['path']}: schema differs from the manifest's columns")
    report.rows_checked += metadata.num_rows
    if {"weights", "model_id"} <= set(schema.names):
        try:
            _check_rows(parquet, entry, report, ids)
        except (pa.ArrowInvalid, OSError) as error:
            report.problems.append(f"{entry['path']}: not readable as Parquet ({error})")


def _check_rows(parquet: pq.ParquetFile, entry: dict, report: VerifyReport, ids: dict[str, str]) -> None:
    """Every row's safetensors header decoded (bounded) and its model id unique, a batch of rows at a time."""
    batch_size = max(1, ROW_BATCH_BYTES // max(1, entry["bytes"] // max(1, entry["rows"])))
    row, known, bad, repeated = 0, b"", 0, 0
    for batch in parquet.iter_batches(batch_size=batch_size, columns=["model_id", "weights"]):
        for model_id, value in zip(batch.column(0).to_pylist(), batch.column(1)):
            buffer = memoryview(value.as_buffer()) if value.is_valid else memoryview(b"")
            head = bytes(buffer[:8 + min(int.from_bytes(bytes(buffer[:8]), "little"), MAX_HEADER_BYTES)])
            if head != known:  # same-architecture rows share a header byte for byte: decode each new one
                try:
                    check_row(buffer, f"row {row}")
                    known = head
                except ValueError as error:
                    bad += 1
                    if bad <= MAX_REPORTED:
                        report.problems.append(f"{entry['path']}: {error}")
            if model_id in ids:
                repeated += 1
                if repeated <= MAX_REPORTED:
                    report.problems.append(f"{entry['path']}: row {row}: model_id {ascii(model_id)[:80]} appears "
                                           f"twice (also in {ids[model_id]})")
            else:
                ids[model_id] = entry["path"]
            row += 1
    for count, what in ((bad, "rows with a bad safetensors header"), (repeated, "repeated model ids")):
        if count > MAX_REPORTED:
            report.problems.append(f"{entry['path']}: {count - MAX_REPORTED} more {what}")


def _recompute(folder: Path, name: str, entry: dict, count: int, seed: int, report: VerifyReport) -> None:
    from zoo.loader import load_split

    where = f"{folder}/manifest.json:{name}"
    imported = "imported" in entry
    spec = evaluation_spec(name, entry, where) if imported else spec_from_data(entry["spec"], where)
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
                if imported and np.isnan(expected):  # a metric the source never measured (e.g. no validation set)
                    continue
                close = family.metric_matches(key, expected, value, data)
                result["metrics"][key] = {"stored": expected, "recomputed": value, "match": close}
                if not close:
                    report.problems.append(f"{name}/{split} {stored['model_id']}: {key} stored {expected:.6g}, "
                                           f"recomputed {value:.6g}")
            report.recomputed.append(result)


def _check_split_set(folder: Path, name: str, set_name: str, described: dict, ids: dict[str, str],
                     report: VerifyReport) -> None:
    """A named split set's file (an import's paper split), checked against the manifest.

    It must be present and of its recorded sha256. Its lists must have the recorded lengths, and every
    model id must be one of the config's rows.
    """
    from zoo.storage.integrity import sha256_file
    from zoo.validation.inputs import InputError, read_json_file

    where = f"config {name}: split set {set_name} ({described['path']})"
    path = shard_path(folder, described["path"], where)
    if not path.is_file():
        report.problems.append(f"{where}: missing")
        return
    if sha256_file(path) != described["sha256"]:
        report.problems.append(f"{where}: sha256 differs from the manifest's (the file was changed)")
        return
    try:
        lists = read_json_file(path, 64 * 2**20, strict=True, what="split set")
    except InputError as error:
        report.problems.append(f"{where}: {error}")
        return
    for split, count in described["rows"].items():
        listed = lists.get(split) if isinstance(lists, dict) else None
        if not isinstance(listed, list) or len(listed) != count:
            report.problems.append(f"{where}: {split} lists {len(listed) if isinstance(listed, list) else 'no'} "
                                   f"model ids, the manifest says {count:,}")
            continue
        unknown = [m for m in listed if m not in ids]
        if unknown:
            report.problems.append(f"{where}: {split} names {len(unknown):,} model ids the config does not hold "
                                   f"(first {ascii(str(unknown[0]))[:60]})")
            continue
        holders = described.get("shards")  # the shards a load reads and checks (`zoo.split_set_loader`)
        outside = [m for m in listed if holders is not None and ids[m] not in holders]
        if outside:
            report.problems.append(f"{where}: {split} names {len(outside):,} model ids in shards its `shards` "
                                   f"listing omits (first {ascii(str(outside[0]))[:60]} in {ids[outside[0]]})")


def _architecture_problems(folder: Path, name: str, entry: dict) -> list[str]:
    """Every architecture config `name` declares, checked before anything builds a member.

    These are `architectures.*.architecture` and its spec's. Each is held to its family's Architecture.
    It is sized arithmetically (`zoo.planning.spec.check_member_size`): layers, widths and parameters
    within `zoo.validation.bounds`. Only then may `--recompute` or `--retrain` build a member.
    """
    declared = [(f"configs.{name}.architectures.{key}", described.get("family", entry.get("family")),
                 described.get("architecture"))
                for key, described in sorted((entry.get("architectures") or {}).items()) if isinstance(described, dict)]
    if isinstance(entry.get("spec"), dict) and "architecture" in entry["spec"]:
        declared.append((f"configs.{name}.spec", entry["spec"].get("family", entry.get("family")),
                         entry["spec"]["architecture"]))
    problems = []
    for key, family_name, architecture in declared:
        where = f"{folder / MANIFEST}: {key}"
        try:
            family = get_family(family_name)
        except (KeyError, TypeError):
            problems.append(f"{where}: family: unknown family {ascii(family_name)[:80]}")
            continue
        try:
            from_data(family.Architecture, architecture, where, "architecture")
            check_member_size(family, architecture, where)
        except SchemaError as error:
            problems.append(str(error))
        except (TypeError, ValueError) as error:  # a value the family's own arithmetic cannot size
            problems.append(f"{where}: architecture: not a {family_name} architecture ({error})")
    return problems


def _check_counts(name: str, entry: dict, report: VerifyReport) -> None:
    """The manifest's counts against its own shard list and each other.

    Each split's count is its shards' sum; else the manifest was refused where it was read
    (`zoo.storage.manifest`).
    """
    packed, planned = entry["packed_checkpoints"], entry["planned_checkpoints"]
    rows = {split: sum(f["rows"] for f in entry["files"] if f["split"] == split) for split in SPLITS}
    if packed != sum(rows.values()):
        report.problems.append(f"config {name}: packed_checkpoints {packed:,}, its shards hold {sum(rows.values()):,}")
    if planned < packed:
        report.problems.append(f"config {name}: packed_checkpoints {packed:,} exceeds planned_checkpoints {planned:,}")
    if entry["complete"] != (packed == planned):
        report.problems.append(f"config {name}: complete is {str(entry['complete']).lower()}, but {packed:,} of "
                               f"{planned:,} planned checkpoints are packed")


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
           retrain: int = 0, full: bool = False) -> VerifyReport:
    """Checks a packed zoo folder; the module docstring says what counts as a problem.

    Problems and warnings quote the folder's names and text, so they are made visible
    (`zoo.validation.text.visible`).
    """
    report = _verify(Path(folder), recompute, seed, allow_incomplete, retrain, full)
    report.problems = [visible(problem, lines=True) for problem in report.problems]
    report.warnings = [visible(warning, lines=True) for warning in report.warnings]
    return report


def _verify(folder: Path, recompute: int, seed: int, allow_incomplete: bool, retrain: int,
            full: bool) -> VerifyReport:
    report = VerifyReport()
    try:
        manifest = read_manifest(folder)
    except (FileNotFoundError, ValueError) as error:
        report.problems.append(str(error))
        return report
    if not manifest["configs"]:
        report.problems.append(f"{folder / MANIFEST}: lists no configs; nothing is packed")
        return report
    stored = value_problem(manifest, finite=False)  # the card and `info` show its text: none may act on a display
    if stored is not None:
        key, reason = stored
        report.problems.append(f"{folder / MANIFEST}: {key}: {reason}")
    for name, entry in sorted(manifest["configs"].items()):
        report.problems += _architecture_problems(folder, name, entry)
        _check_completeness(name, entry, allow_incomplete, report)
        _check_counts(name, entry, report)
        ids: dict[str, str] = {}
        for file_entry in entry["files"]:
            _check_file(folder, file_entry, entry["columns"], report, ids, full)
        for set_name, described in sorted(entry.get("split_sets", {}).items()):
            _check_split_set(folder, name, set_name, described, ids, report)
    card_report = card_problems(folder, manifest)
    report.problems += card_report.problems
    report.warnings += card_report.warnings
    listed = {f["path"] for entry in manifest["configs"].values() for f in entry["files"]}
    for stray in sorted((folder / "data").glob("**/*.parquet")):
        relative = stray.relative_to(folder).as_posix()
        if relative in listed or any(part.startswith(".") for part in stray.relative_to(folder).parts):
            continue  # dot folders are pack's scratch space: never loaded, never uploaded
        if stray.parent.name in card_report.globbed:  # an older card's glob would read it
            report.problems.append(f"{relative}: not listed in the manifest")
        else:
            report.warnings.append(f"{relative}: not listed in the manifest (left by an interrupted pack; never "
                                   "loaded or published; the next `nfnzoo pack` removes it)")
    if card_header(manifest)["configs"] and not report.problems:
        for name, entry in sorted(manifest["configs"].items()):
            imported = entry.get("imported")
            if imported and retrain > 0:
                report.warnings.append(
                    f"{name}: imported ({imported.get('format', 'another format')}), so it has no spec nfnzoo can "
                    "train from: --retrain skips it (its shards, rows and checksums were checked)")
            if imported and recompute > 0 and "evaluation" not in imported:
                report.warnings.append(
                    f"{name}: imported ({imported.get('format', 'another format')}) without a record of how its "
                    "source scored its members: --recompute skips it (its shards, rows and checksums were checked)")
                continue
            if recompute > 0:
                _recompute(folder, name, entry, recompute, seed, report)
            if retrain > 0 and not imported:
                from zoo.dataset.retrain import retrain_runs

                results, problems = retrain_runs(folder, name, entry, retrain, seed)
                report.retrained += results
                report.problems += problems
    return report
