"""Advisory folder locks: one writer of a zoo folder or a leaderboard at a time.

A lock is an exclusive `flock` on a lock file inside the folder (`.nfnzoo.lock`). The kernel drops
it when its holder exits, however it exits (SIGKILL included). So a lock left by a killed process is
stale by construction, and the next writer simply takes it. The file holds the holder's PID, command
and start time. That content is only what the error message quotes.

`FolderLock(folder, command).acquire()` fails at once with `FolderInUse` ("in use by PID N (nfnzoo
generate since ...)"). Two `generate` or `pack` runs on one output folder would train the same runs
twice or delete each other's shards.

`acquire(wait_s=...)` waits up to that long instead. The leaderboard's writers serialize on their
board's lock; a submission takes a second. A writer that waited too long fails with the same message.

The lock file is opened through `zoo.storage.nofollow.open_lock`. It is created exclusively without
following a link, or is an existing regular file with a single link. So a planted
`.nfnzoo.lock -> ../victim` is refused with one line before anything is written. So is a hard link
to a victim, or a FIFO. While held, the folder is a root of `zoo.storage.nofollow`: every atomic
write below it refuses links too.

Within one process, a lock is taken once and handed down (`pack(..., lock=held)`), never
re-acquired. `flock` on a second descriptor of the same file would block on our own lock.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import time
from pathlib import Path

from zoo.storage import nofollow

LOCK_FILE = ".nfnzoo.lock"


class FolderInUse(RuntimeError):
    """Another process holds the folder's lock."""


class FolderLock:
    """An exclusive lock on `folder` for `command` (a name for messages: "nfnzoo pack")."""

    def __init__(self, folder: str | Path, command: str):
        self.folder, self.command = Path(folder), command
        self.path = self.folder / LOCK_FILE
        self._descriptor: int | None = None

    @property
    def held(self) -> bool:
        return self._descriptor is not None

    def _holder(self, descriptor: int) -> str:
        try:  # from the descriptor open_lock checked: the path may have been replaced since
            info = json.loads(os.pread(descriptor, 4096, 0))
            return f"PID {int(info['pid'])} ({str(info['command'])[:60]} since {str(info['since'])[:25]})"
        except (OSError, ValueError, KeyError, TypeError):
            return "another process"

    def acquire(self, wait_s: float = 0.0) -> "FolderLock":
        if self.held:
            raise RuntimeError(f"{self.path}: already held by this lock object")  # a programming error
        self.folder.mkdir(parents=True, exist_ok=True)
        descriptor = nofollow.open_lock(self.folder, self.path)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(descriptor)
                    raise
                if time.monotonic() >= deadline:
                    holder = self._holder(descriptor)
                    os.close(descriptor)
                    waited = f" (waited {wait_s:.0f} s)" if wait_s else ""
                    raise FolderInUse(f"{self.folder} is in use by {holder}{waited}; wait for it to finish, "
                                      "or stop it first") from None
                time.sleep(0.05)
        info = {"pid": os.getpid(), "command": self.command,
                "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        try:
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, (json.dumps(info) + "\n").encode(), 0)
        except OSError:
            pass  # a full disk: the lock holds all the same; only the message loses its PID
        self._descriptor = descriptor
        nofollow.hold(self.folder)
        return self

    def release(self) -> None:
        if self._descriptor is not None:
            descriptor, self._descriptor = self._descriptor, None
            nofollow.release(self.folder)
            os.close(descriptor)  # closing drops the flock; the file stays (removing it would race)

    def __enter__(self) -> "FolderLock":
        return self if self.held else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
