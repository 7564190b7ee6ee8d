"""Packing: the staging folder -> a sharded Parquet dataset with its card and manifest.

`datasets.load_dataset(folder, config)` reads the layout (at the end) with no custom code.

Runs are assigned to splits by a seeded hash of their ids over the whole plan. So checkpoints of one run
never cross splits, and the assignment does not depend on what is staged yet. Rows are ordered by the
run's plan position, then the checkpoint's (epochs ascending, then the best). Every writer setting is
fixed, so packing the same staging folder twice gives byte-identical shards.

Weights are stored uncompressed, without dictionary encoding or statistics. Float bytes do not compress,
and plain pages keep each row a contiguous safetensors file for the fast loader. Every shard carries a
page index, which the Hub's dataset viewer reads pages through. It sits after the row groups, so the
fast loader's page walk is unchanged. Each config's manifest entry records its splits' Arrow sizes
(`arrow_bytes`) for the card's `dataset_info`.

The content tag in a shard's name lets the old and the new pack's shards coexist until the new manifest
is written. `zoo.storage.commit` commits a pack so that a kill or a full disk at any point leaves one
complete pack, old or new. Packs from before the tag (plain `<split>-NNNNN-of-MMMMM.parquet`)
verify and load as before.

No link below the folder is followed (`zoo.storage.nofollow`). One at `data/<config>/` or beside the
shards there is refused before anything is built.

Each config's entry also records `machines` (`zoo.distributed.machine`). That is the folder's
`machines.json`, which the Ray driver writes: the nodes that trained its checkpoints, with their CPU,
instruction sets and GPUs. A folder staged without it records the packing machine with `role: packed`.
Zoo bytes are reproducible only per instruction set, so two zoos that differ can be told apart.

The entry also records `reproducibility` (`zoo.training.reproducibility.record`), as the packing process
has it. That is the spec's mode, the settings it pinned and the versions of the libraries whose kernels
decide the bytes (torch, NumPy, MKL, oneDNN, Python).

The layout::

    data/<config>/<split>-NNNNN-of-MMMMM-<tag>.parquet   one row per checkpoint; <tag>: sha256[:8]
    README.md                                  dataset card; its YAML lists each split's shards
    manifest.json                              per shard: sha256, rows, bytes; per config: hash
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import zoo
from zoo.dataset.card import render_card
from zoo.storage import nofollow
from zoo.storage.commit import building_folder, check_no_links, commit_pack
from zoo.storage.folder import MANIFEST, STAGING_FOLDER, check_writable, load_saved_specs, read_manifest
from zoo.families import create_family
from zoo.storage.integrity import dataset_hash_of, file_checksums, sha256_file  # noqa: F401 (also part of this module's API)
from zoo.storage.lock import FolderLock
from zoo.distributed.machine import packing_machine, read_machines
from zoo.training.reproducibility import record
from zoo.planning.plan import assign_splits, plan_runs
from zoo.storage.record import arrow_schema, to_row
from zoo.planning.spec import SPLIT_NAMES, ZooSpec
from zoo.distributed.signals import deferred_signals
from zoo.storage.staging import Staging

FORMAT_VERSION = 1
DEFAULT_SHARD_BYTES = 256 * 2**20
ROW_GROUP_BYTES = 32 * 2**20


def shard_name(split: str, index: int, count: int, sha256: str) -> str:
    """`<split>-NNNNN-of-MMMMM-<sha256[:8]>.parquet`: the same bytes always get the same name."""
    return f"{split}-{index:05d}-of-{count:05d}-{sha256[:8]}.parquet"


def write_shard(rows: list[dict], schema: pa.Schema, path: Path, row_bytes: int) -> int:
    """Writes one shard; returns its Arrow (in-memory) size, the card's `num_bytes`.

    The size is informative: `datasets` checks row counts, and its own byte count differs by a few
    validity bitmaps.
    """
    table = pa.Table.from_pylist(rows, schema=schema)
    metadata_columns = [name for name in schema.names if name != "weights"]
    pq.write_table(
        table, path,
        row_group_size=max(1, ROW_GROUP_BYTES // max(1, row_bytes)),
        compression={**{name: "zstd" for name in metadata_columns}, "weights": "none"},
        use_dictionary=metadata_columns,
        write_statistics=metadata_columns,
        data_page_size=4 * 2**20,  # large plain pages: fewer headers between weight rows
        write_page_index=True,  # the Hub's dataset viewer reads pages by it; a few hundred bytes a shard
    )
    return table.nbytes


class IncompleteZooError(ValueError):
    """Packing was asked of a config whose planned checkpoints are not all staged."""


def check_complete(spec: ZooSpec, runs: list, staged: set[str], allow_incomplete: bool, folder: Path) -> None:
    """Nothing staged is always an error; a partial config only when `allow_incomplete` is off."""
    planned = sum(len(r.checkpoints) for r in runs)
    have = sum(m in staged for r in runs for m in r.model_ids)
    if have == 0:
        raise IncompleteZooError(f"{folder}: config {spec.name} has no staged checkpoints (0 of {planned:,} "
                                 f"planned); train it with `nfnzoo generate`")
    if have < planned and not allow_incomplete:
        raise IncompleteZooError(f"{folder}: config {spec.name} is incomplete: {have:,} of {planned:,} planned "
                                 "checkpoints are staged; finish it by re-running the same `nfnzoo generate` "
                                 "command, or pack it anyway with --allow-incomplete (marked incomplete)")


def pack_config(spec: ZooSpec, folder: Path, staging: Staging, max_shard_bytes: int = DEFAULT_SHARD_BYTES,
                runs: list | None = None, staged: set[str] | None = None) -> dict:
    """Writes the shards of one spec into data/.<config>.building/ and returns its manifest entry;
    `zoo.storage.commit.commit_pack` then moves them to data/<config>/."""
    family = create_family(spec.family)
    schema = arrow_schema(family.HParams, family.METRICS)
    runs = plan_runs(spec) if runs is None else runs
    split_of = assign_splits([r.run_id for r in runs], spec, runs=runs)
    staged = set(staging.model_ids()) if staged is None else staged
    by_split: dict[str, list[str]] = {name: [] for name in SPLIT_NAMES}
    for run in runs:  # plan order, then each run's checkpoints in plan order (epochs ascending, the best last)
        by_split[split_of[run.run_id]].extend(m for m in run.model_ids if m in staged)
    planned = sum(len(r.checkpoints) for r in runs)

    building = building_folder(folder, spec.name)
    nofollow.rmtree(folder, building)
    nofollow.makedirs(folder, building)
    files, architectures, status_counts, arrow_bytes = [], {}, {}, {}
    for split, model_ids in by_split.items():
        if not model_ids:
            continue
        first = staging.read(model_ids[0])
        row_bytes = len(to_row(first)["weights"])
        per_shard = max(1, max_shard_bytes // row_bytes)
        count = math.ceil(len(model_ids) / per_shard)
        for index in range(count):
            rows = []
            for model_id in model_ids[index * per_shard:(index + 1) * per_shard]:
                record = staging.read(model_id)
                if record.architecture_id not in architectures:  # building a weight space builds a model
                    space = family.weight_space(record.architecture)
                    architectures[record.architecture_id] = {
                        "family": record.family, "architecture": record.architecture,
                        "layers": space.to_json(), "num_params": space.num_params}
                status_counts[record.status] = status_counts.get(record.status, 0) + 1
                rows.append(to_row(dataclasses.replace(record, config=spec.name)))
            written = building / f".{split}-{index:05d}.parquet.tmp"
            try:
                arrow_bytes[split] = arrow_bytes.get(split, 0) + write_shard(rows, schema, written, row_bytes)
            except OSError as error:  # Arrow's (a full disk) names no file and spans lines: one line naming it
                raise OSError(error.errno, error.strerror or str(error).strip().splitlines()[-1][:200],
                              str(written)) from None
            checksums = file_checksums(written)
            name = shard_name(split, index, count, checksums["sha256"])
            nofollow.replace(folder, written, building / name)
            files.append({"path": f"data/{spec.name}/{name}", "split": split, "rows": len(rows),
                          "bytes": (building / name).stat().st_size, **checksums})
    splits = {s: sum(f["rows"] for f in files if f["split"] == s) for s in SPLIT_NAMES}
    packed = sum(splits.values())
    return {
        "family": spec.family,
        "spec_hash": spec.hash(),
        "spec": spec.to_data(),
        "dataset_hash": dataset_hash_of(files),
        "architectures": architectures,
        "splits": {s: n for s, n in splits.items() if n},
        "arrow_bytes": {s: arrow_bytes[s] for s in SPLIT_NAMES if splits[s]},  # the card's num_bytes; absent
        # from packs before it, whose cards then leave num_bytes and dataset_size out
        "runs": {s: sum(1 for r in runs if split_of[r.run_id] == s and any(m in staged for m in r.model_ids))
                 for s in SPLIT_NAMES if splits[s]},
        "status": dict(sorted(status_counts.items())),
        "planned_checkpoints": planned,
        "packed_checkpoints": packed,
        "complete": packed == planned,
        "files": files,
        "columns": [{"name": f.name, "type": str(f.type)} for f in schema],
    }


def pack(folder: str | Path, *, max_shard_bytes: int = DEFAULT_SHARD_BYTES, configs: list[str] | None = None,
         allow_incomplete: bool = False, lock: FolderLock | None = None) -> dict:
    """Packs every config staged in `folder` (or the named ones); returns the manifest.

    Every config is checked before anything is written. One with nothing staged is an
    `IncompleteZooError`, and so is a partial one unless `allow_incomplete`. Its manifest entry, card
    and `nfnzoo info` then say it is incomplete. The folder's lock (`zoo.storage.lock`) is held
    throughout: taken here, or the held `lock` of the caller (`nfnzoo generate`).
    """
    folder = Path(folder)
    if lock is None and folder.is_dir():  # one generate or pack per folder at a time
        with FolderLock(folder, "nfnzoo pack") as held:
            return pack(folder, max_shard_bytes=max_shard_bytes, configs=configs,
                        allow_incomplete=allow_incomplete, lock=held)
    specs = load_saved_specs(folder)
    if not specs:
        raise FileNotFoundError(f"{folder} has no staged zoo (no specs/*.json); run `nfnzoo generate` first")
    if configs:
        unknown = sorted(set(configs) - {s.name for s in specs})
        if unknown:
            raise ValueError(f"no staged config {unknown[0]!r} in {folder}; staged: {[s.name for s in specs]}")
        specs = [s for s in specs if s.name in configs]
    check_writable(folder / "data", root=folder)  # a read-only folder: one line naming it, before the work
    check_no_links(folder, [spec.name for spec in specs])  # and a planted link (`zoo.storage.nofollow`)
    nofollow.check_entries(folder, folder / STAGING_FOLDER)
    manifest = read_manifest(folder) if (folder / MANIFEST).exists() else {"configs": {}}
    staging = Staging(folder / STAGING_FOLDER)
    staged = set(staging.model_ids())
    plans = {spec.name: plan_runs(spec) for spec in specs}
    for spec in specs:
        check_complete(spec, plans[spec.name], staged, allow_incomplete, folder)
    # who trained it (`zoo.distributed.machine`); read before writing
    machines = read_machines(folder) or packing_machine()
    try:
        entries = {spec.name: {**pack_config(spec, folder, staging, max_shard_bytes, plans[spec.name], staged),
                               "machines": machines, "reproducibility": record(spec.training.reproducibility)}
                   for spec in specs}
        manifest["configs"].update(entries)
        manifest.update(format_version=FORMAT_VERSION, package_version=zoo.__version__)
        card = render_card(manifest)  # before anything moves: a card that cannot be rendered changes nothing
    except BaseException:  # an error or Ctrl-C while building: the last pack stays as it was
        for spec in specs:
            nofollow.rmtree(folder, building_folder(folder, spec.name), ignore_errors=True)
        raise
    with deferred_signals():  # Ctrl-C waits; a kill or a full disk leaves one complete pack (`zoo.storage.commit`)
        commit_pack(folder, list(entries), manifest, card)
    return manifest
