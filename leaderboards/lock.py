"""The board's lock: its writers (submit, pin, register a dataset) run one at a time.

A submission reads the board: its datasets, and its entries for the duplicate check. Then it writes it: a
dataset record, a pinned file, the entry. Two submissions interleaving those steps lost entries, accepted
duplicates and dropped a `datasets.json` record. So every writer holds `board_lock(root)`. That is
`zoo.storage.lock.FolderLock` on `<root>/.nfnzoo.lock`, from its first read of the board's state to its last
write. It waits up to `WAIT_S` for another writer, then fails with "in use by PID ...". A submission takes
about a second. A lock left by a killed process is free at once (`flock`). Readers (render, audit) take no
lock. Every file is replaced atomically, and an entry is written last.

A board arrives by pull request, so its lock file may be a planted link, hard link or FIFO. `FolderLock`
opens it through `zoo.storage.nofollow.open_lock`. That refuses each with one line before a byte is written.
While the lock is held, every atomic write below the board's root refuses links as well
(`zoo.storage.atomic`: datasets, pinned files, entries).
"""

from __future__ import annotations

from pathlib import Path

from zoo.storage.lock import FolderLock

COMMAND = "nfnzoo leaderboard submit"
WAIT_S = 60.0  # seconds a writer waits for another to finish


def board_lock(root: str | Path) -> FolderLock:
    """The board's lock, acquired (use it as a context manager to release it)."""
    return FolderLock(root, COMMAND).acquire(wait_s=WAIT_S)
