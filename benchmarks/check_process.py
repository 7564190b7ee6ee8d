"""`nfnzoo bench check-model`'s checks run in a child process: a verdict only on checks that finished.

A model's forward pass can end the process that runs it: `os._exit(0)`, a signal, the kernel's
out-of-memory killer. It can also raise `SystemExit` or `KeyboardInterrupt`. In the command's own
process, `os._exit(0)` would end it with exit status 0 and no verdict, as if it had passed.

So `run_checks` runs `benchmarks.check_steps.check_steps` in a child. The child is `python -P`, so
the working folder is not put on its path; its `sys.path` is this process's. The parent reads one
JSON record per line, on a pipe of its own, since the model may print. `("start", label)` comes
before each step that runs the model's code. Then comes that step's record: the model loaded, its
`Size` on a space, or a `Check`. `done` comes last.

The checks count only when every started step has its record and `done` came. Some children end
without them, whatever their exit status. Others report a `BaseException` from the model's code.
Either gives `CheckNotFinished`: one line naming the model, the step that did not finish and how it
ended.

An error check-model itself raises is raised here with its own message, as when it ran in process.
That is a `ValueError`: an unknown model or space, a model too large, a model that raises. The
child runs on this process's torch thread count, not one per CPU. The command chose that count
(`benchmarks.threads`)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from typing import Any, Mapping, Sequence

import torch

from benchmarks.check_model import Check, Size
from zoo.named_import import python_command, worker_environment

# the child's first lines: this process's path (before any import from it), then the steps
_CHILD = ("import json, sys; request = json.loads(sys.argv[1]); sys.path[:] = request['path']; "
          "from benchmarks.check_process import child; child(request)")
_REPORTED = (ValueError, TypeError, KeyError)  # check-model's own errors (SchemaError, UnknownNameError among them)


class CheckNotFinished(ValueError):
    """A step of the model's checks did not finish: no verdict is given on the checks."""


def run_checks(model: str, seeds: Sequence[int], overrides: Mapping[str, Any] | None = None,
               spaces: Sequence[str] | None = None) -> tuple[list[Check], list[Size]]:
    """`check_model`'s checks of `model`, and the sizes it was checked at, run in a child process.

    See the module docstring. It raises `CheckNotFinished` unless every step finished."""
    read, write = os.pipe()
    request = {"model": model, "seeds": list(seeds), "overrides": dict(overrides or {}),
               "spaces": None if spaces is None else list(spaces), "path": list(sys.path), "fd": write,
               "threads": torch.get_num_threads()}
    try:
        process = subprocess.Popen(python_command("-c", _CHILD, json.dumps(request)), pass_fds=(write,),
                                   env={**os.environ, **worker_environment()})  # a module found in the working folder
    finally:
        os.close(write)
    try:
        with os.fdopen(read, "rb") as stream:
            records = _records(stream)
        code = process.wait()
    finally:
        if process.poll() is None:  # interrupted here: the child goes too
            process.kill()
            process.wait()
    return _verdict(model, records, code)


def _records(stream) -> list[dict[str, Any]]:
    records = []
    for line in stream:
        try:
            records.append(json.loads(line))
        except ValueError:  # a line cut short by the child's end
            break
    return records


def _verdict(model: str, records: list[dict[str, Any]], code: int) -> tuple[list[Check], list[Size]]:
    """The checks and sizes, if every started step has its record and `done` came last."""
    checks, sizes, started, label = [], [], False, "start of the child process"
    for record in records:
        kind = record.get("kind")
        if kind == "start" and not started:
            started, label = True, str(record["value"])
        elif kind in ("loaded", "size", "check") and started:
            started = False
            if kind == "size":
                sizes.append(Size(**record["value"]))
            elif kind == "check":
                checks.append(Check(**record["value"]))
        elif kind == "error":
            if record["reported"]:
                raise ValueError(record["message"])
            raise CheckNotFinished(f"model {model!r}: the check {label!r} did not finish: its code raised "
                                   f"{record['message']}")
        elif kind == "done" and not started and record is records[-1]:
            return checks, sizes
        else:
            break
    raise CheckNotFinished(f"model {model!r}: the check {label!r} did not finish: {_ended(code)} before reporting it")


def _ended(code: int) -> str:
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        return f"the process was killed by {name}" + (" (out of memory?)" if -code == signal.SIGKILL else "")
    return f"the process ended with exit status {code}"


def child(request: dict[str, Any]) -> None:
    """The child's side (`_CHILD` calls it): runs the steps, writing each record as it comes."""
    from benchmarks.check_steps import check_steps

    torch.set_num_threads(request["threads"])
    os.set_inheritable(request["fd"], False)  # the model's own subprocesses do not hold the pipe open
    with os.fdopen(request["fd"], "w", encoding="utf-8") as records:
        def send(kind: str, value: Any = None, **more: Any) -> None:
            records.write(json.dumps({"kind": kind, "value": value, **more}) + "\n")
            records.flush()

        try:
            for kind, value in check_steps(request["model"], request["seeds"], request["overrides"],
                                           request["spaces"]):
                send(kind, dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value)
        except BaseException as error:  # noqa: BLE001 (SystemExit, KeyboardInterrupt: the model's code too)
            if isinstance(error, _REPORTED):
                send("error", message=str(error), reported=True)
            else:
                code = f"({error.code!r})" if isinstance(error, SystemExit) else ""
                text = (str(error).strip().splitlines() or [""])[0][:300]
                send("error", message=f"{type(error).__name__}{code or (': ' + text if text else '')}",
                     reported=False)
            return
        send("done")
