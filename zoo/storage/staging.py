"""The staging folder: one safetensors file per finished checkpoint, named by its id.

Each file is written atomically (`zoo.storage.atomic`): a temporary file in the same folder,
fsynced, then renamed. So a crash leaves either a whole checkpoint or none. A resumed job then skips
exactly the checkpoints that exist. A staging file carries the full record in its metadata, so
packing needs nothing else.

A staged file is trusted, not merely present. A disk that filled up, a copy cut short or a flipped
bit must not count as a finished checkpoint forever. Otherwise every later `generate` would skip its
run, and every `pack` would fail on it.

Each file records a SHA-256 in its metadata (`nfnzoo.sha256`). It covers the canonical header, then
the data section. The canonical header is the header's JSON without that key, keys sorted; the
checksum cannot cover itself.

A file counts as staged (`exists`, `missing`, `model_ids`) only if its checksum matches. It must
also be a regular file with a bounded safetensors header. A file staged before checksums existed
counts only if it decodes completely into a record. Anything else is moved aside into
`staging/.corrupt/` with a warning naming it. So the next `generate` trains its run again.

A file is checked once per `Staging` object. Then it is known by its inode, size and modification
time; files are replaced, never rewritten in place. Every write and move below the staging root
follows no link (`zoo.storage.nofollow`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Iterator

from zoo.storage import nofollow, safetensors_io
from zoo.storage.atomic import write_bytes_atomic
from zoo.validation.bounds import MAX_STAGED_BYTES  # one checkpoint, bounded by the member bound
from zoo.validation.inputs import InputError
from zoo.storage.record import CheckpointRecord, parse_weights_metadata, weights_metadata
from zoo.weightspace import WeightSpace

RECORD_KEY = "nfnzoo.record"
CHECKSUM_KEY = "nfnzoo.sha256"
SUFFIX = ".safetensors"
CORRUPT_FOLDER = ".corrupt"  # untrusted staged files are moved here, kept for inspection


def checksum(header: dict, data: bytes | memoryview) -> str:
    """SHA-256 of the canonical header (without `CHECKSUM_KEY`) followed by the data section."""
    header = dict(header)
    metadata = {k: v for k, v in (header.get("__metadata__") or {}).items() if k != CHECKSUM_KEY}
    header["__metadata__"] = metadata
    digest = hashlib.sha256(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
    digest.update(data)
    return digest.hexdigest()


class Staging:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._trusted: dict[str, tuple[int, int, int]] = {}  # model id -> (inode, size, mtime) checked

    def path(self, model_id: str) -> Path:
        return self.root / model_id[:2] / f"{model_id}{SUFFIX}"  # 256 sub-folders keep listings fast

    def exists(self, model_id: str) -> bool:
        """Whether a trusted checkpoint is staged (an untrusted file is moved aside: see the module)."""
        path = self.path(model_id)
        try:
            status = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):  # absent (or a file where its folder goes)
            return False
        signature = (status.st_ino, status.st_size, status.st_mtime_ns)
        if self._trusted.get(model_id) == signature:
            return True
        problem = staged_file_problem(path)
        if problem is None:
            self._trusted[model_id] = signature
            return True
        self._set_aside(path, problem)
        return False

    def _set_aside(self, path: Path, problem: str) -> None:
        target = self.root / CORRUPT_FOLDER / path.name
        try:
            nofollow.makedirs(self.root, target.parent)
            nofollow.replace(self.root, path, target)
        except FileNotFoundError:  # another process set it aside (or replaced it) first
            return
        print(f"warning: staged checkpoint {path} is not trusted ({problem}); moved to {target}; "
              "`nfnzoo generate` trains its run again", file=sys.stderr)

    def missing(self, model_ids: tuple[str, ...] | list[str]) -> list[str]:
        return [m for m in model_ids if not self.exists(m)]

    def write(self, record: CheckpointRecord) -> Path:
        return write_bytes_atomic(self.path(record.model_id), encode_staged(record), durable=True, root=self.root)

    def write_payload(self, model_id: str, payload: bytes) -> Path:
        """Stages a checkpoint encoded elsewhere (`encode_staged` on another node).

        Its checksum and its id are checked before it is written. So a damaged transfer never counts
        as a finished checkpoint. A bad payload is an `InputError`, and nothing is written."""
        problem = payload_problem(payload)
        if problem is None:
            recorded = _recorded_model_id(payload)
            if recorded != model_id:
                problem = f"it holds checkpoint {recorded!r}"
        if problem is not None:
            raise InputError(f"checkpoint {model_id} as received: {problem}; not staged")
        return write_bytes_atomic(self.path(model_id), payload, durable=True, root=self.root)

    def read(self, model_id: str) -> CheckpointRecord:
        return read_staged(self.path(model_id))

    def model_ids(self) -> list[str]:
        """Ids of the trusted checkpoints (temporary files are ignored, untrusted ones set aside), sorted."""
        listed = sorted(p.name[:-len(SUFFIX)] for p in self.root.glob(f"??/*{SUFFIX}"))
        return [model_id for model_id in listed if self.exists(model_id)]

    def __iter__(self) -> Iterator[CheckpointRecord]:
        for model_id in self.model_ids():
            yield self.read(model_id)


def _record_of(buffer: bytes) -> CheckpointRecord:
    tensors, metadata = safetensors_io.decode(buffer)
    family, architecture, space = parse_weights_metadata(metadata)
    info = json.loads(metadata[RECORD_KEY])
    return CheckpointRecord(architecture=architecture, weights={n: tensors[n] for n in space.names}, **info)


def encode_staged(record: CheckpointRecord) -> bytes:
    """The bytes of `record`'s staging file: safetensors with the record and its checksum in
    the metadata (see the module)."""
    space = WeightSpace.from_state_dict(record.weights)
    metadata = weights_metadata(record.family, record.architecture, space)
    identity = {"model_id": record.model_id, "run_id": record.run_id, "family": record.family,
                "config": record.config, "epoch": record.epoch, "seed": record.seed,
                "hparams": record.hparams, "metrics": record.metrics, "status": record.status}
    metadata[RECORD_KEY] = json.dumps(identity, sort_keys=True, allow_nan=True)
    unsigned = safetensors_io.encode(record.weights, metadata)
    header, start = safetensors_io.read_header(unsigned)
    metadata[CHECKSUM_KEY] = checksum(header, memoryview(unsigned)[start:])
    return safetensors_io.encode(record.weights, metadata)


def _recorded_model_id(payload: bytes) -> str | None:
    header, _ = safetensors_io.read_header(payload)
    try:
        return json.loads(header["__metadata__"][RECORD_KEY]).get("model_id")
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def staged_file_problem(path: Path) -> str | None:
    """Why the staged file at `path` is not a trusted checkpoint, or None (see the module)."""
    try:
        buffer = safetensors_io.read_safetensors_file(path, "staged checkpoint")
    except InputError as error:
        return str(error).removeprefix(f"{path}: ")
    return payload_problem(buffer)


def payload_problem(buffer: bytes) -> str | None:
    """Why `buffer` is not a trusted staged checkpoint, or None."""
    if len(buffer) < 8:
        return f"{len(buffer)} bytes, shorter than a safetensors header"
    if len(buffer) > MAX_STAGED_BYTES:
        return f"{len(buffer):,} bytes, more than a staged checkpoint may hold ({MAX_STAGED_BYTES:,})"
    try:
        header, start = safetensors_io.read_header(buffer)
    except ValueError as error:
        return str(error)
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    recorded = metadata.get(CHECKSUM_KEY) if isinstance(metadata, dict) else None
    if recorded is not None:
        if recorded != checksum(header, memoryview(buffer)[start:]):
            return "its checksum does not match its contents (truncated or changed)"
        return None
    try:  # staged before checksums were recorded: trusted only if it decodes into a whole record
        _record_of(buffer)
    except Exception as error:  # noqa: BLE001 (any failure to decode means: not a checkpoint)
        return f"does not decode ({type(error).__name__})"
    return None


def read_staged(path: Path) -> CheckpointRecord:
    """The record staged at `path`; a file that cannot be decoded is an `InputError` naming it."""
    buffer = safetensors_io.read_safetensors_file(path, "staged checkpoint")
    try:
        return _record_of(buffer)
    except Exception as error:  # noqa: BLE001 (the message names the file, whatever broke)
        raise InputError(f"{path}: not a readable staged checkpoint ({type(error).__name__}: "
                         f"{ascii(str(error))[1:-1][:200]})") from None


class PayloadWriter:
    """Stages received payloads (`Staging.write_payload`) on `threads` threads.

    So one file's fsync does not wait for the last. The driver of a many-GPU generation stages
    hundreds of small checkpoints a second (benchmarks/perf/staging.py). At most `limit` are in
    flight; `submit` waits for the oldest beyond that. `done()` hands back the finished ones as
    (model_id, tag, error or None), in no particular order.
    """

    def __init__(self, staging: Staging, threads: int = 8, limit: int = 512) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.staging, self.limit = staging, limit
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="nfnzoo-staging")
        self.in_flight: dict = {}  # future -> (model_id, tag)
        self.ids: set[str] = set()  # model ids in flight

    def pending(self, model_id: str) -> bool:
        return model_id in self.ids

    def submit(self, model_id: str, payload: bytes, tag=None) -> None:
        """Starts staging `payload`.

        Beyond `limit` in flight, it first waits until one has finished (collect it with `done`)."""
        while len(self.in_flight) >= self.limit and not any(f.done() for f in self.in_flight):
            self._wait_one()
        self.in_flight[self.pool.submit(self.staging.write_payload, model_id, payload)] = (model_id, tag)
        self.ids.add(model_id)

    def _wait_one(self) -> None:
        from concurrent.futures import FIRST_COMPLETED, wait

        wait(list(self.in_flight), return_when=FIRST_COMPLETED)

    def done(self, wait_all: bool = False) -> list[tuple[str, object, BaseException | None]]:
        if wait_all:
            from concurrent.futures import wait

            wait(list(self.in_flight))
        finished = [future for future in self.in_flight if future.done()]
        results = [(*self.in_flight.pop(future), future.exception()) for future in finished]
        self.ids.difference_update(model_id for model_id, _, _ in results)
        return results

    def close(self) -> None:
        """Waits for the writes in flight (each is whole or absent either way) and ends the threads."""
        self.pool.shutdown(wait=True)
