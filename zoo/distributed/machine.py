"""Where a checkpoint or a result came from: the machine's CPU, instruction sets and GPUs.

Zoo bytes are reproducible only per instruction set (README, "Reproducibility").
ATen's vectorized kernels and oneDNN's JIT kernels round differently on AVX2, AVX-512 or AMX.
CUDA differs again.
So every manifest and every results file records what decides those bits, beside the platform string.
A user comparing two zoos can then see why they differ.

`describe_machine()` is one plain dict, JSON as it is.

`platform` is `platform.platform()`: OS, kernel, architecture, libc.

`cpu_model` is the first `model name` of /proc/cpuinfo (Linux x86).
Elsewhere it is `platform.processor()`, else `platform.machine()`.

`aten_isa` names the kernels ATen dispatches to, `torch.backends.cpu.get_cpu_capability()`.
Its values are `DEFAULT`, `AVX2`, `AVX512`, ..., and it honours `ATEN_CPU_CAPABILITY`.

`onednn_isa` is the instruction set of the kernel oneDNN's JIT picks for a small f32 convolution.
Its values are `avx512_core`, `avx2`, `sse41`, `avx512_core_amx`, ..., and it honours `ONEDNN_MAX_CPU_ISA`.
It is null where torch has no oneDNN.
The torch 2.14 API has no call for oneDNN's ISA (`dnnl_get_effective_cpu_isa` is not exported from libtorch_cpu).
Also, oneDNN prints its `isa:` banner only once per process.
So we read the implementation name from the verbose line of one convolution, which it prints every time.
That gives the same answer on every call.

`gpu_models` holds `torch.cuda.get_device_name(i)` of every visible GPU, empty without CUDA.
`cuda` is the CUDA version torch was built with, null on a CPU build.

`torch` is `torch.__version__`.

The record of a folder's trainers is `<out>/machines.json`, which the Ray driver writes through `record_machines`.
It is a JSON list of such dicts, distinct, each with a `checkpoints` count.
The count says how many of the folder's checkpoints nodes of that description trained.
`read_machines` reads it bounded and checked; a damaged file is one line naming it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from zoo.storage.atomic import write_json_atomic
from zoo.validation.inputs import read_json_file
from zoo.validation.schema import SchemaError, from_data, to_data

MACHINES_FILE = "machines.json"
MAX_MACHINES_BYTES = 4 * 2**20  # a description is ~400 bytes; thousands of distinct nodes fit
MAX_LINE = 200  # characters of one field (a CPU's model name is under 100)
_CONVOLUTION = re.compile(r"^onednn_verbose,(?:v\d+,)?primitive,exec,cpu,convolution,([^,]+),", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Machine:
    """One entry of a `machines` list: `describe_machine()` plus how many checkpoints it made."""

    platform: str
    cpu_model: str | None
    aten_isa: str | None
    onednn_isa: str | None
    gpu_models: tuple[str, ...]
    cuda: str | None
    torch: str | None
    checkpoints: int | None = None  # null: the machine that packed the zoo, its trainers unknown
    role: str = "trained"  # "trained" (from machines.json) or "packed" (see `zoo.dataset.pack`)

    def validate(self, where: str, key: str) -> None:
        for name in ("platform", "cpu_model", "aten_isa", "onednn_isa", "cuda", "torch"):
            value = getattr(self, name)
            if value is not None and (len(value) > MAX_LINE or "\n" in value or "\t" in value):
                raise SchemaError(where, f"{key}.{name}", f"expected one line of at most {MAX_LINE} characters")
        for index, model in enumerate(self.gpu_models):
            if len(model) > MAX_LINE or "\n" in model:
                raise SchemaError(where, f"{key}.gpu_models[{index}]",
                                  f"expected one line of at most {MAX_LINE} characters")
        if self.checkpoints is not None and self.checkpoints < 0:
            raise SchemaError(where, f"{key}.checkpoints", f"expected a non-negative count, got {self.checkpoints}")
        if self.role not in ("trained", "packed"):
            raise SchemaError(where, f"{key}.role", f"expected 'trained' or 'packed', got {self.role[:40]!r}")


# --- describing this machine ---------------------------------------------------------------------

def cpu_model() -> str | None:
    """The CPU's model name: /proc/cpuinfo on Linux, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:  # the first processor's block holds it; stop there
                name, _, value = line.partition(":")
                if name.strip() in ("model name", "Model", "cpu model"):
                    return " ".join(value.split())[:MAX_LINE] or None
                if not line.strip():
                    break
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


@contextlib.contextmanager
def _captured_stdout() -> Iterator[list[str]]:
    """What native code prints on file descriptor 1 meanwhile; lines not oneDNN's go back to it."""
    import ctypes

    captured: list[str] = []
    sys.stdout.flush()
    libc = ctypes.CDLL(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield captured
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", errors="replace")
            captured.append(text)
            others = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("onednn_verbose"))
            if others:  # another thread's output while we listened
                os.write(1, others.encode())


def onednn_isa() -> str | None:
    """The ISA of oneDNN's kernel for a small f32 convolution (module docstring), or None."""
    import torch

    if not torch.backends.mkldnn.is_available():
        return None
    from torch._C import _verbose

    level = 1 if os.environ.get("ONEDNN_VERBOSE", os.environ.get("DNNL_VERBOSE", "0")) not in ("", "0") else 0
    try:
        with _captured_stdout() as captured:
            _verbose.mkldnn_set_verbose(1)
            try:
                torch.mkldnn_convolution(torch.zeros(1, 3, 6, 6), torch.zeros(8, 3, 3, 3), None,
                                         [0, 0], [1, 1], [1, 1], 1)
            finally:
                _verbose.mkldnn_set_verbose(level)
    except (OSError, RuntimeError, AttributeError):  # no libc to flush, no oneDNN op: unknown
        return None
    found = _CONVOLUTION.search("".join(captured))
    if found is None:
        return None
    implementation = found.group(1)  # "jit:avx512_core", "brgconv:avx512_core_amx", "acl", "gemm:jit"
    isa = implementation.rpartition(":")[2]
    return isa if re.match(r"(avx|sse|amx|asimd|sve)", isa) else implementation


def describe_machine() -> dict[str, Any]:
    """This machine as the bits of a checkpoint depend on it (module docstring); a plain dict."""
    import torch

    gpus = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())] \
        if torch.cuda.is_available() else []
    return {"platform": platform.platform(), "cpu_model": cpu_model(),
            "aten_isa": torch.backends.cpu.get_cpu_capability(), "onednn_isa": onednn_isa(),
            "gpu_models": gpus, "cuda": torch.version.cuda, "torch": torch.__version__}


# --- a folder's record of its trainers ----------------------------------------------------------

def check_machines(data: Any, where: str) -> list[dict]:
    """`data` as a list of machine entries (`Machine`), or a `SchemaError` naming `where` and the key."""
    if not isinstance(data, list):
        raise SchemaError(where, "", f"expected a list of machine descriptions, got {type(data).__name__}")
    return [to_data(from_data(Machine, entry, where, f"[{index}]")) for index, entry in enumerate(data)]


def read_machines(out_dir: str | Path) -> list[dict] | None:
    """The checked list in `<out_dir>/machines.json`, or None when there is none."""
    path = Path(out_dir) / MACHINES_FILE
    if not os.path.lexists(path):
        return None
    return check_machines(read_json_file(path, MAX_MACHINES_BYTES, strict=True, what="machines file"), str(path))


def _identity(entry: dict) -> tuple:
    return tuple(sorted((key, tuple(value) if isinstance(value, list) else value)
                        for key, value in entry.items() if key != "checkpoints"))


def merge_machines(existing: Iterable[dict], new: Iterable[dict]) -> list[dict]:
    """`existing` then `new`, entries equal but for `checkpoints` merged into one with the counts summed.

    A null count stays null only when every merged count is null.
    """
    merged: dict[tuple, dict] = {}
    for entry in [*existing, *new]:
        entry = dict(entry, gpu_models=list(entry.get("gpu_models", [])))
        key = _identity(entry)
        if key not in merged:
            merged[key] = entry
            continue
        counts = [c for c in (merged[key].get("checkpoints"), entry.get("checkpoints")) if c is not None]
        merged[key]["checkpoints"] = sum(counts) if counts else None
    return list(merged.values())


def record_machines(out_dir: str | Path, descriptions: Iterable[dict]) -> list[dict]:
    """Merges `descriptions` into `<out_dir>/machines.json`, written atomically; returns the list written.

    Each description is a `describe_machine()` dict with a `checkpoints` count.
    """
    out_dir = Path(out_dir)
    new = check_machines([dict(description) for description in descriptions], "the machines to record")
    for index, entry in enumerate(new):
        if entry["checkpoints"] is None:
            raise SchemaError("the machines to record", f"[{index}].checkpoints",
                              "expected how many checkpoints this machine trained")
    merged = merge_machines(read_machines(out_dir) or [], new)
    write_json_atomic(out_dir / MACHINES_FILE, merged)
    return merged


def packing_machine() -> list[dict]:
    """The `machines` list of a zoo whose trainers are unknown: the machine packing it, role `packed`."""
    return [{**describe_machine(), "checkpoints": None, "role": "packed"}]


def isa_note(recorded: Iterable[dict], here: dict) -> str | None:
    """Why retrained bytes may differ: this machine's instruction sets against the recorded trainers'."""
    trainers = [entry for entry in recorded if entry.get("role", "trained") == "trained"]
    if not trainers:
        return None
    differ = [f"{key} {here.get(key)} here, {'/'.join(sorted({str(e.get(key)) for e in trainers}))} recorded"
              for key in ("aten_isa", "onednn_isa")
              if any(entry.get(key) != here.get(key) for entry in trainers)]
    if not differ:
        return None
    return ("this machine's instruction set differs from the one that trained the zoo (" + "; ".join(differ)
            + "): bytes are reproducible only per instruction set")
