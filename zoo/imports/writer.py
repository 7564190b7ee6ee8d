"""Writing an imported zoo: rows streamed into our dataset format, committed atomically.

An importer describes its config with an `ImportedConfig`. That holds the family, the architecture, the
source's provenance, the conversions applied, extra source columns and named split sets. The importer
hands over the rows in chunks: (split, metadata rows, weight arrays).

Rows become shards as they come, in `data/.<config>.building/`. At most one shard's worth per split is
held in memory. Nothing reaches `data/<config>/`, `manifest.json` or the card until every row is
written. Then `zoo.storage.commit.commit_pack` commits them as it commits a pack. So a bad row at any
point, a full disk or Ctrl-C leaves the output folder as it was.

Same-architecture rows share their safetensors header byte for byte (`zoo.storage.record`). So
`RowEncoder` writes the header once. Each row's bytes are that header plus the row's tensors in
weight-space order. They are the same bytes as `zoo.storage.record.encode_weights`, without building a
state dict per row; a test holds them equal.

A named split set (`SplitSet`) is an ordered list of model ids per split. Duplicates are allowed, since
a paper's loader may read a checkpoint twice. It is written as `data/<config>/splitset-<name>.json`. The
config's manifest entry lists it under `split_sets`, with its sha256 and the shards holding its rows
(`shards`). There `zoo.split_set_loader.load_split_set` finds it. Rows of any split set go into shards
of their own (`_SplitWriter`), so loading a set reads only the shards it needs.

No link below the output folder is followed (`zoo.storage.nofollow`). A link at `data/<config>/`, beside
its shards, at the scratch folder or at the lock is refused with one line. That happens before any row
is read. Every move and removal here goes through that module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa

import zoo
from zoo.dataset.card import render_card
from zoo.dataset.pack import FORMAT_VERSION, shard_name, write_shard
from zoo.families import create_family
from zoo.planning.spec import SPLIT_NAMES, content_hash
from zoo.storage import nofollow, safetensors_io
from zoo.storage.commit import building_folder, check_no_links, commit_pack
from zoo.storage.folder import MANIFEST, check_writable, read_manifest
from zoo.storage.integrity import FAST, dataset_hash_of, file_checksums, sha256_file
from zoo.storage.lock import FolderLock
from zoo.validation.inputs import InputError, check_name
from zoo.storage.record import arrow_schema, architecture_id, weights_metadata
from zoo.distributed.signals import deferred_signals
from zoo.distributed.machine import packing_machine
from zoo.weightspace import WeightSpace

SPLIT_SET_PREFIX = "splitset-"


def _existing_manifest(out: Path) -> dict:
    """The manifest already in `out`, or an empty one where there is none; an import adds its config to it.

    A `manifest.json` that is not a regular file (a folder, a link, a FIFO) is one line naming it and
    what it is.
    """
    path = out / MANIFEST
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return {"configs": {}}
    if not stat.S_ISREG(mode):
        kind = ("a folder" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file")
        raise InputError(f"{path}: {kind}, not a manifest; expected the regular file `nfnzoo pack` or `nfnzoo "
                         "import` writes (remove it, or import into another --out folder)")
    try:
        return read_manifest(out)
    except OSError as error:
        if error.strerror is None and error.filename is None:  # made from a message alone: keep its text
            raise InputError(str(error) or f"{path}: not a readable manifest") from None
        raise


@dataclasses.dataclass(frozen=True)
class SplitSet:
    """A paper's split of the zoo: model ids per split, in the order its loader reads them."""

    description: str  # the rule, said once (what the card and the docs show)
    splits: dict[str, list[str]]  # split -> model ids; a model id may repeat (a reference quirk)


@dataclasses.dataclass(frozen=True)
class ImportedConfig:
    name: str  # the config name, data/<name>/
    family: str
    architecture: dict[str, Any]
    spec: dict[str, Any]  # what the manifest records as the config's `spec`: the source's recipe, descriptive
    source: dict[str, Any]  # format, url, license, license_link, citation (BibTeX), conversions, verified
    extra_columns: dict[str, pa.DataType] = dataclasses.field(default_factory=dict)  # source columns we keep
    split_sets: dict[str, SplitSet] = dataclasses.field(default_factory=dict)


class RowEncoder:
    """Rows of one architecture as safetensors bytes, the header written once (module docstring)."""

    def __init__(self, family: str, architecture: dict, space: WeightSpace):
        self.space = space
        zeros = {t.name: np.zeros(t.shape, dtype=np.float32) for t in space.tensors}
        import torch

        encoded = safetensors_io.encode({name: torch.from_numpy(value) for name, value in zeros.items()},
                                        weights_metadata(family, architecture, space))
        _, start = safetensors_io.read_header(encoded)
        self.header = encoded[:start]
        self.architecture_id = architecture_id(family, architecture, space)

    def encode(self, tensors: dict[str, np.ndarray]) -> list[bytes]:
        """(N, *shape) float32 arrays per tensor name -> N rows' bytes."""
        count = len(next(iter(tensors.values())))
        flat = np.concatenate([np.ascontiguousarray(tensors[t.name], dtype="<f4").reshape(count, -1)
                               for t in self.space.tensors], axis=1)
        return [self.header + row.tobytes() for row in flat]


class _SplitWriter:
    """One split's rows buffered into shards of about `max_shard_bytes` (temporary names until the end).

    Rows of any named split set (`members`) go into shards of their own, apart from the others. So a
    split set's load reads and checks only its shards (`zoo.split_set_loader`). The Small CNN Zoo's
    papers' sets hold one checkpoint of nine, and would otherwise have rows in every shard.
    """

    def __init__(self, split: str, out: Path, building: Path, schema: pa.Schema, max_shard_bytes: int,
                 row_bytes: int, members: frozenset = frozenset()):
        self.split, self.out, self.building, self.schema = split, out, building, schema
        self.per_shard = max(1, max_shard_bytes // row_bytes)
        self.row_bytes = row_bytes
        self.members = members
        self.rows: dict[bool, list[dict]] = {False: [], True: []}  # in a split set? -> rows waiting
        self.written: list[dict] = []  # {temporary, rows, sha256, arrow_bytes, model_ids}

    def add(self, rows: Iterable[dict]) -> None:
        for row in rows:
            group = row["model_id"] in self.members
            self.rows[group].append(row)
            if len(self.rows[group]) >= self.per_shard:
                self.flush(group)

    def flush(self, group: bool = False) -> None:
        rows = self.rows[group]
        if not rows:
            return
        path = self.building / f".{self.split}-{len(self.written):05d}.parquet.tmp"
        try:
            arrow_bytes = write_shard(rows, self.schema, path, self.row_bytes)
        except OSError as error:  # Arrow's names no file: one line naming it
            raise OSError(error.errno, error.strerror or str(error).strip().splitlines()[-1][:200], str(path)) from None
        self.written.append({"temporary": path, "rows": len(rows), **file_checksums(path),
                             "arrow_bytes": arrow_bytes, "model_ids": [row["model_id"] for row in rows]})
        self.rows[group] = []

    def finish(self, config: str) -> list[dict]:
        self.flush(False)
        self.flush(True)
        files = []
        for index, shard in enumerate(self.written):
            name = shard_name(self.split, index, len(self.written), shard["sha256"])
            nofollow.replace(self.out, shard["temporary"], self.building / name)
            files.append({"path": f"data/{config}/{name}", "split": self.split, "rows": shard["rows"],
                          "bytes": (self.building / name).stat().st_size, "sha256": shard["sha256"],
                          FAST: shard[FAST]})
        return files

    def holders(self, config: str) -> dict[str, list[str]]:
        """Shard path (as `finish` names it) -> its model ids."""
        return {f"data/{config}/{shard_name(self.split, index, len(self.written), shard['sha256'])}": shard["model_ids"]
                for index, shard in enumerate(self.written)}


def _progress(total: int, what: str):
    from tqdm import tqdm

    return tqdm(total=total, unit=" rows", desc=what, disable=not sys.stderr.isatty(), mininterval=1.0)


def _split_set_entry(out: Path, folder_name: str, building: Path, name: str, split_set: SplitSet,
                     known: set[str], holders: dict[str, list[str]]) -> dict:
    for split, ids in split_set.splits.items():
        if split not in SPLIT_NAMES:
            raise ValueError(f"split set {name!r}: unknown split {split!r}; expected {list(SPLIT_NAMES)}")
        missing = next((m for m in ids if m not in known), None)
        if missing is not None:
            raise ValueError(f"split set {name!r}: {split} lists model {missing}, which the import did not write")
    file_name = f"{SPLIT_SET_PREFIX}{name}.json"
    path = building / file_name
    nofollow.write_new(out, path, (json.dumps({s: split_set.splits.get(s, []) for s in SPLIT_NAMES},
                                              separators=(",", ":")) + "\n").encode())
    listed = {m for ids in split_set.splits.values() for m in ids}
    return {"path": f"data/{folder_name}/{file_name}", "sha256": sha256_file(path), "bytes": path.stat().st_size,
            "rows": {s: len(split_set.splits.get(s, [])) for s in SPLIT_NAMES}, "description": split_set.description,
            "shards": [shard for shard, ids in holders.items() if not listed.isdisjoint(ids)]}


def write_import(out: str | Path, config: ImportedConfig,
                 chunks: Iterator[tuple[str, list[dict], dict[str, np.ndarray]]],
                 total: int, *, max_shard_bytes: int = 64 * 2**20) -> dict:
    """Writes `chunks` as config `config.name` of the zoo folder `out`; returns the manifest.

    Each chunk is (split, metadata rows, {tensor: (N, *shape) array}). Other configs already in `out`
    are kept. Each metadata row holds the identity columns (model_id, run_id, epoch, seed), the family's
    hyperparameters and metrics, `status` and `config.extra_columns`. Nothing in `out` changes unless
    every row is written (module docstring).
    """
    out = Path(out)
    check_name(config.name, "config name")  # it becomes data/<name>/: a path that leaves `out` is refused here
    for set_name in config.split_sets:
        check_name(set_name, "split set name")
    check_writable(out)
    with FolderLock(out, "nfnzoo import"):
        check_no_links(out, [config.name])  # before any row is read (`zoo.storage.nofollow`)
        return _write_locked(out, config, chunks, total, max_shard_bytes)


def _write_locked(out: Path, config: ImportedConfig, chunks, total: int, max_shard_bytes: int) -> dict:
    family = create_family(config.family)
    space = family.weight_space(config.architecture)
    encoder = RowEncoder(config.family, config.architecture, space)
    base = arrow_schema(family.HParams, family.METRICS)
    schema = pa.schema([*base.remove(base.get_field_index("weights")).remove(base.get_field_index("status")),
                        *[pa.field(name, kind) for name, kind in config.extra_columns.items()],
                        base.field("status"), base.field("weights")])
    manifest = _existing_manifest(out)
    building = building_folder(out, config.name)
    nofollow.rmtree(out, building)
    nofollow.makedirs(out, building)
    row_bytes = len(encoder.header) + 4 * space.num_params
    members = frozenset(m for split_set in config.split_sets.values() for ids in split_set.splits.values() for m in ids)
    writers = {split: _SplitWriter(split, out, building, schema, max_shard_bytes, row_bytes, members)
               for split in SPLIT_NAMES}
    known: set[str] = set()
    statuses: dict[str, int] = {}
    runs: dict[str, set[str]] = {split: set() for split in SPLIT_NAMES}
    try:
        with _progress(total, f"import {config.name}") as bar:
            for split, rows, tensors in chunks:
                encoded = encoder.encode(tensors)
                for row, weights in zip(rows, encoded):
                    if row["model_id"] in known:
                        raise ValueError(f"model {row['model_id']} (run {row['run_id']}, epoch {row['epoch']}) "
                                         "appears twice in the source")
                    known.add(row["model_id"])
                    runs[split].add(row["run_id"])
                    statuses[row["status"]] = statuses.get(row["status"], 0) + 1
                    row.update(family=config.family, config=config.name, architecture=encoder.architecture_id,
                               weights=weights)
                writers[split].add(rows)
                bar.update(len(rows))
        files = [f for split in SPLIT_NAMES for f in writers[split].finish(config.name)]
        if not files:
            where = config.source.get("path")
            raise ValueError(f"{where}: no checkpoints to import" if where else "no checkpoints to import")
        holders = {shard: ids for split in SPLIT_NAMES for shard, ids in writers[split].holders(config.name).items()}
        split_sets = {name: _split_set_entry(out, config.name, building, name, split_set, known, holders)
                      for name, split_set in sorted(config.split_sets.items())}
        splits = {s: sum(f["rows"] for f in files if f["split"] == s) for s in SPLIT_NAMES}
        arrow_bytes = {s: sum(w["arrow_bytes"] for w in writers[s].written) for s in SPLIT_NAMES if splits[s]}
        packed = sum(splits.values())
        entry = {
            "family": config.family,
            "spec_hash": content_hash(config.spec),
            "spec": config.spec,
            "imported": config.source,
            "dataset_hash": dataset_hash_of(files),
            "architectures": {encoder.architecture_id: {"family": config.family, "architecture": config.architecture,
                                                        "layers": space.to_json(), "num_params": space.num_params}},
            "splits": {s: n for s, n in splits.items() if n},
            "arrow_bytes": arrow_bytes,
            "runs": {s: len(runs[s]) for s in SPLIT_NAMES if splits[s]},
            "status": dict(sorted(statuses.items())),
            "planned_checkpoints": packed,  # an import plans what the source holds
            "packed_checkpoints": packed,
            "complete": True,
            "files": files,
            "columns": [{"name": f.name, "type": str(f.type)} for f in schema],
            "machines": packing_machine(),
        }
        if split_sets:
            entry["split_sets"] = split_sets
        manifest["configs"][config.name] = entry
        manifest.update(format_version=FORMAT_VERSION, package_version=zoo.__version__)
        card = render_card(manifest)
    except BaseException:  # a bad row, a full disk, Ctrl-C: nothing of this import stays
        nofollow.rmtree(out, building, ignore_errors=True)
        raise
    with deferred_signals():
        commit_pack(out, [config.name], manifest, card)
    return manifest


class BySplit:
    """Rows and their tensors gathered per split, in arrival order.

    An importer that reads one checkpoint file at a time hands these to the writer, split by split.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(names)
        self.groups: dict[str, tuple[list[dict], dict[str, list]]] = {}

    def add(self, split: str, row: dict, tensors: dict[str, np.ndarray]) -> None:
        rows, arrays = self.groups.setdefault(split, ([], {name: [] for name in self.names}))
        rows.append(row)
        for name, value in tensors.items():
            arrays[name].append(value)

    def stacked(self) -> Iterator[tuple[str, list[dict], dict[str, np.ndarray]]]:
        """(split, its rows, each tensor stacked over them)."""
        for split, (rows, arrays) in self.groups.items():
            yield split, rows, {name: np.stack(values) for name, values in arrays.items()}


def renamed_tensors(path: Path, state: dict, mapping: dict[str, str], shapes: dict[str, tuple[int, ...]],
                    expected: str) -> dict[str, np.ndarray]:
    """Our tensor name -> float32 array of a released state dict, its keys renamed by `mapping` (theirs -> ours).

    A missing or extra key, or a tensor of another shape, is an `InputError` naming the file and the
    key. `expected` says what the file should hold, e.g. "the reference Siren has [...]".
    """
    import torch

    missing = [key for key in mapping if key not in state]
    extra = sorted(set(state) - set(mapping))
    if missing or extra:
        detail = f"missing {missing}" if missing else f"unexpected {extra[:4]}"
        raise InputError(f"{path}: {detail}; {expected}")
    out = {}
    for theirs, ours in mapping.items():
        value = state[theirs]
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(shapes[ours]):
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise InputError(f"{path}: {theirs} has shape {shape}; the architecture needs {tuple(shapes[ours])}")
        out[ours] = value.detach().to(torch.float32).numpy()
    return out


@contextlib.contextmanager
def built_folder(out: Path) -> Iterator[Path]:
    """An exporter's output: built in `.<name>.building` beside `out`, renamed into place when the block ends.

    `out`, if it exists, must be empty. On any error, Ctrl-C included, the scratch folder goes and `out`
    stays as it was.
    """
    scratch = out.parent / f".{out.name}.building"
    nofollow.rmtree(out.parent, scratch)  # the folder holding `out` is the root: a link there is refused
    nofollow.makedirs(out.parent, scratch)
    try:
        yield scratch
        nofollow.check(out.parent, out)
        if out.exists():
            out.rmdir()
        nofollow.replace(out.parent, scratch, out)
    except BaseException:
        nofollow.rmtree(out.parent, scratch, ignore_errors=True)
        raise
