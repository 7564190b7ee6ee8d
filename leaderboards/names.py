"""The names a board shows, and which two of them a reader could not tell apart.

A board shows names its submitters chose (a model's name, a dataset's display name), and two rows
whose names look the same are a forgery waiting to happen. So:

- a model name is `MODEL_NAME`: 1-64 ASCII letters, digits and `._+-`, starting with a letter or
  digit (the characters `zoo.validation.inputs.NAME` allows in a path component; an entry's id is
  `<model>-<32 hex digits>`, also its file's stem). No invisible character (U+3164, U+2800, a
  variation selector) and no look-alike letter from another script can be in one;
- a dataset's display name is `DATASET_NAME`: the same characters plus `/`, `:` and `@` (a Hub
  repo `ORG/NAME`, a track's `track:<name>/<dataset>`, a pinned `ORG/NAME@<commit>`), at most 200;
- within those characters some still look alike (`rn` and `m`, `l`, `1` and `I`, `0` and `O`):
  `skeleton` maps a name through the small table `CONFUSABLE` (longest sequence first, after which
  `vv` and `w` are one too), and a new name whose skeleton equals that of a different name already
  on the board is refused (`confusable_problem`): `rnlp` beside `mlp`, `resnet-l8` beside
  `resnet-18`. The same name again is not a confusion.
"""

from __future__ import annotations

import re
from typing import Iterable

MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:/@-]{0,199}")
# sequence -> what it is read as; the documented table of look-alikes within the names' characters
CONFUSABLE = {"rn": "m", "vv": "w", "cl": "d", "1": "l", "I": "l", "|": "l", "0": "O", "o": "O", "_": "-"}
_CONFUSABLE = re.compile("|".join(re.escape(k) for k in sorted(CONFUSABLE, key=len, reverse=True)))


def skeleton(name: str) -> str:
    """What `name` looks like: every `CONFUSABLE` sequence replaced by what it is read as."""
    return _CONFUSABLE.sub(lambda match: CONFUSABLE[match.group(0)], name)


def model_name_problem(name: str) -> str | None:
    """Why `name` may not be a model's name on the board (outside `MODEL_NAME`), or None."""
    if MODEL_NAME.fullmatch(name):
        return None
    return (f"model name {ascii(name[:80])} must be 1-64 ASCII letters, digits or ._+-, starting with a letter or "
            "digit (it is shown on the board and becomes part of a file name)")


def dataset_name_problem(name: str) -> str | None:
    """Why `name` may not be a dataset's display name (outside `DATASET_NAME`), or None."""
    if DATASET_NAME.fullmatch(name):
        return None
    return (f"dataset name {ascii(name[:80])} must be 1-200 ASCII letters, digits or ._+-:/@, starting with a "
            "letter or digit (rename the dataset's folder)")


def confusable_problem(what: str, name: str, existing: Iterable[str]) -> str | None:
    """Why `name` would be confused with a different name of `existing` (equal skeletons), or None."""
    own = skeleton(name)
    for other in sorted(set(existing)):
        if other != name and skeleton(other) == own:
            return (f"{what} {name!r} looks like the board's {what} {other!r} (both read as {own!r}: "
                    f"{', '.join(f'{k} as {v}' for k, v in CONFUSABLE.items())}); choose a name that cannot be "
                    "mistaken for it")
    return None
