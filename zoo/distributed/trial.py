"""One trial, on whichever node of a Ray cluster runs it: runs trained, checkpoints streamed back.

Nodes share nothing but Ray, and a trial never opens the driver's folders.
The training data come as an argument.
The driver loaded them once and put them in Ray's object store, so each node fetches them once.
The trial checks them against the SHA-256 the driver computed.
The driver also names the checkpoints still missing.
Each finished checkpoint goes back in the trial's stream of events.
It travels as the bytes of its staging file, checksum included (`zoo.storage.staging.encode_staged`).
The driver checks and writes it (`Staging.write_payload`).
So a checkpoint is staged only on the driver's disk and only whole, whichever node trained it.
A trial that dies with its node costs only the checkpoints it had not yet sent.
The driver starts it again for those.

The stream is a Ray generator task (``num_returns="streaming"``) that yields tuples.
``("machine", description, node_id)`` comes first.
Its description (`zoo.distributed.machine.describe_machine`) says where the bytes were made.
The node id is the Ray node's, None outside Ray.
``("checkpoint", model_id, payload)`` comes as each checkpoint is trained.
``("run", run_id)`` comes when a run has every checkpoint out.
``("done", busy_seconds)`` comes last.
The module is free of Ray: the generator runs and tests without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import queue
import threading
import time
from typing import Callable, Iterator, Sequence

import torch

from zoo.planning.plan import Run
from zoo.storage.record import CheckpointRecord
from zoo.planning.spec import spec_from_data
from zoo.storage.staging import encode_staged


def data_sha256(data) -> str:
    """SHA-256 of every tensor of a data dataclass (TaskData, ImageData, TextData, ...), in field
    order, with each tensor's dtype and shape: equal data, equal hash, on any node."""
    digest = hashlib.sha256()

    def walk(value) -> None:
        if isinstance(value, torch.Tensor):
            tensor = value.detach().contiguous().cpu()
            digest.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
            digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for field in dataclasses.fields(value):
                walk(getattr(value, field.name))
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        else:
            digest.update(repr(value).encode())

    walk(data)
    return digest.hexdigest()


class Outbox:
    """What a trial writes instead of the staging folder it cannot see.

    It takes the checkpoints the driver still misses, each sent as its staging file's bytes.
    It offers the `Staging` interface that `zoo.training.worker.train_runs` uses: `missing` and `write`.
    """

    def __init__(self, missing_ids: Sequence[str], send: Callable[[tuple], None]) -> None:
        self.pending = set(missing_ids)
        self.send = send

    def missing(self, model_ids: Sequence[str]) -> list[str]:
        return [m for m in model_ids if m in self.pending]

    def write(self, record: CheckpointRecord) -> None:
        self.send(("checkpoint", record.model_id, encode_staged(record)))
        self.pending.discard(record.model_id)


_END = object()


def _ray_node_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except ImportError:
        return None


def trial(spec_data: dict, runs: list[Run], missing_ids: list[str], data, data_digest: str, device: str | None,
          population_size: int | None) -> Iterator[tuple]:
    """Trains `runs` (the checkpoints in `missing_ids` only) and yields the events above.

    Training runs in a thread of this process and hands its events over a queue.
    So this generator can yield each checkpoint the moment it exists.
    (The families train through a callback.)
    An error in training is raised here, after the events sent before it.
    """
    from zoo.distributed.machine import describe_machine
    from zoo.training.worker import train_runs

    start = time.perf_counter()
    found = data_sha256(data)
    if found != data_digest:
        raise ValueError(f"the training data arrived changed on this node (sha256 {found}, the driver sent "
                         f"{data_digest}); not training on it")
    yield ("machine", describe_machine(), _ray_node_id())
    events: queue.Queue = queue.Queue(maxsize=64)  # bounded: training waits when the driver falls behind
    failure: list[BaseException] = []

    def work() -> None:
        try:
            train_runs(spec_from_data(spec_data), runs, Outbox(missing_ids, events.put), data=data,
                       on_run_done=lambda run, written: events.put(("run", run.run_id)), device=device,
                       population_size=population_size)
        except BaseException as error:  # noqa: BLE001 (re-raised in the generator, below)
            failure.append(error)
        finally:
            events.put(_END)

    worker = threading.Thread(target=work, name="nfnzoo-trial", daemon=True)
    worker.start()
    while (event := events.get()) is not _END:
        yield event
    worker.join()
    if failure:
        raise failure[0]
    yield ("done", time.perf_counter() - start)
