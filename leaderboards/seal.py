"""An entry file's seal: the sha256 of the whole entry as the board wrote it.

An entry's `submission.content_hash` covers only its results. The rest of the file is the board's own
record: the code URL and commit, the re-scoring record, the acceptance time, the stored predictions' hash. A
hand edit of it must not audit clean. At submission the board writes `submission.seal`. That is the sha256
of the canonical JSON (`entries.canonical_json`) of the entry without its seal. `leaderboards.audit`
recomputes it. A seal is not a signature, since anyone may recompute one. It makes every edit that bypasses
`nfnzoo leaderboard submit` visible, as the content hash does for the results.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from leaderboards.entries import canonical_json

SEAL_KEY = "seal"


def seal_of(entry: dict[str, Any]) -> str:
    """The seal of entry data `{"submission": {...}, "results": {...}}`, ignoring any seal it holds."""
    unsealed = copy.copy(entry)
    unsealed["submission"] = {k: v for k, v in entry["submission"].items() if k != SEAL_KEY}
    return hashlib.sha256(canonical_json(unsealed).encode()).hexdigest()


def sealed(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry data with its seal written into its submission block."""
    return {**entry, "submission": {**entry["submission"], SEAL_KEY: seal_of(entry)}}


def seal_problem(entry: dict[str, Any]) -> str | None:
    """Why the entry's seal does not hold (missing, or the file changed since it was written), or None."""
    recorded = entry.get("submission", {}).get(SEAL_KEY)
    if recorded is None:
        return "no seal (submission.seal): the entry was not written by `nfnzoo leaderboard submit`"
    actual = seal_of(entry)
    if recorded != actual:
        return (f"the entry file changed since it was accepted: its seal is {str(recorded)[:12]}…, its content "
                f"gives {actual[:12]}… (a hand edit of its submission or results block)")
    return None
