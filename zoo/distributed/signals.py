"""Holding signals back while something must not be cut in half.

`deferred_signals` replaces the handlers of the given signals for the block and records what arrives.
Then it restores the handlers and raises the error made for the first signal.
A pack swaps its shards, manifest and card under it (`zoo.dataset.pack`).
The driver starts and stops Ray under it (`zoo.distributed.driver`).
An exception in the middle of `ray.init` or `ray.shutdown` left a half-started instance and orphaned agents.
Once it even left a segmentation fault at exit.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator


@contextlib.contextmanager
def deferred_signals(signums: tuple[int, ...] = (signal.SIGINT,),
                     error: Callable[[int], BaseException] = lambda signum: KeyboardInterrupt()) -> Iterator[None]:
    """Holds `signums` back for the block; after it, raises `error(first signal)` if one came.

    Only the main thread can handle signals; elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {signum: signal.signal(signum, lambda number, frame: received.append(number)) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        raise error(received[0])
