"""A Ray connection for the length of a block: a local instance of our own, or a cluster joined.

The zoo driver and the benchmark jobs share this module.
`connected(address, num_cpus)` starts a local instance, or joins the cluster `address` names.
A joined cluster is left running.
A local instance is marked and watched by `zoo.distributed.ray_cleanup`.
So none of its processes outlives the caller, even one killed by SIGKILL.
`interruptible()` turns SIGINT and SIGTERM into `Signalled` in the main thread while a long Ray call runs.
Otherwise Ray's native code defers or rewraps them.
Ray is imported inside the functions only, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from pathlib import Path

from zoo.distributed.ray_cleanup import MARKER_VARIABLE, Watchdog, new_marker
from zoo.distributed.signals import deferred_signals

PATH_VARIABLES = ("NFNZOO_DATA", "NFNZOO_CACHE")  # read by workers (zoo.data.images): made absolute before Ray starts


class Signalled(KeyboardInterrupt):
    """What the handlers installed by `interruptible` raise in the main thread."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def interruptible():
    """SIGINT and SIGTERM raise `Signalled` in the main thread while the block runs.

    Yields the list of signals received.
    SIGTERM's default ends the process without unwinding, so it is handled too.
    Then the Ray instance is shut down and the trials cancelled.
    The old handlers come back after.
    """
    received: list[int] = []  # Ray's native code may re-raise our exception as a plain KeyboardInterrupt

    def raise_signalled(signum: int, frame) -> None:
        received.append(signum)
        raise Signalled(signum)

    if threading.current_thread() is not threading.main_thread():  # signals go to the main thread only
        yield received
        return
    previous = {signum: signal.signal(signum, raise_signalled) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def restore_environment(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def package_root() -> Path:
    """The folder holding the real `zoo` package (the repository for an editable install)."""
    return Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def connected(address: str | None, num_cpus: int | None):
    """Ray, connected for the block: a local instance of our own unless `address` names one.

    An instance started here is marked and watched (`zoo.distributed.ray_cleanup`).
    So no process of it outlives the generation, whichever way the driver ends, even by SIGKILL.
    A cluster joined with `address`, or a Ray the caller initialized already, is left running.

    ``ray.init`` runs with the working directory set to the folder holding the real `zoo` package.
    Ray puts the driver's working directory first on every worker's ``sys.path``.
    (See ``JobConfig._py_driver_sys_path`` in ray/_private/worker.py.)
    So an output folder named ``zoo`` there, a namespace package without ``__init__.py``, shadowed the package.
    That hit workers started after the folder existed.
    Workers then run in the package's folder too.
    So they read the data locations (`PATH_VARIABLES`), made absolute first.
    """
    import ray

    if ray.is_initialized():
        yield
        return
    watchdog = None
    marker_setting = os.environ.get(MARKER_VARIABLE)
    working_directory = os.getcwd()
    for name in PATH_VARIABLES:  # workers run in the package's folder: relative paths must not move
        if os.environ.get(name):
            os.environ[name] = str(Path(os.environ[name]).resolve())
    try:
        with deferred_signals((signal.SIGINT, signal.SIGTERM), Signalled):
            if not address:
                marker = new_marker()
                watchdog = Watchdog(marker)
                os.environ[MARKER_VARIABLE] = marker  # inherited by every process of the instance
            os.chdir(package_root())
            try:
                if address:
                    ray.init(address=address, logging_level=logging.ERROR)
                else:
                    ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                             logging_level=logging.ERROR, configure_logging=True)
            finally:
                os.chdir(working_directory)
        yield
    finally:
        with deferred_signals((signal.SIGINT, signal.SIGTERM), Signalled):
            try:
                ray.shutdown()
            finally:
                restore_environment(MARKER_VARIABLE, marker_setting)
                if watchdog is not None:
                    watchdog.close()  # ends what shutdown left (the agents), and waits for that
