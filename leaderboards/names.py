"""The names a board shows, and which two of them a reader could not tell apart.

A board shows names its submitters chose: a model's name, a dataset's display name. Two rows whose names
look the same are a forgery waiting to happen. So each kind of name has its characters.

A model name is `MODEL_NAME`: 1-64 ASCII letters, digits and `._+-`, starting with a letter or digit. These
are the characters `zoo.validation.inputs.NAME` allows in a path component. An entry's id is `<model>-<32
hex digits>`, also its file's stem. No invisible character (U+3164, U+2800, a variation selector) can be in
one. Nor can a look-alike letter from another script.

A dataset's display name is `DATASET_NAME`, at most 200 characters. It allows the same characters plus `/`,
`:` and `@`. These serve a Hub repo `ORG/NAME`, a track's `track:<name>/<dataset>`, and a pinned
`ORG/NAME@<commit>`.

A key of a model config is `CONFIG_KEY` (`config_key_problem`, every level of the config). It is shown in a
row's label where two configs of one model differ: "epochs 100, warmup_epochs 10". It has 1-128 ASCII
letters, digits and `._+-`, starting with a letter, digit or `_`. The values are free text, since a task's
alphabet may hold any letter. The schema keeps control and invisible characters out of them.

Within those characters some still look alike. The one rule for that is `zoo.validation.names.look_alike`.
It sets letter case, `-` and `_` aside, and applies the small table `CONFUSABLE`. That table reads `rn` as
`m`, `vv` as `w` and `cl` as `d`. It reads `1`, `I` and `|` as `l`, and `0` and `o` as `O`.

A new name that looks like a different name already on the board is refused (`confusable_problem`). Examples
are `rnlp` beside `mlp`, `resnet-l8` beside `resnet-18`, and `LayerSets` beside `layersets`. So is a model
name that looks like a built-in model's without being it (`builtin_model_problem`). Examples are `StatNN`
and `stat_nn` beside `statnn`. That is the line plugin registration and `bench run --name` give. The same
name again is not a confusion.
"""

from __future__ import annotations

import re
from typing import Iterable

from benchmarks.model_identity import MODEL_NAME  # one definition: a run checks it before training
from nfn_models.registry import MODELS
from zoo.validation.names import CONFUSABLE, builtin_problem, look_alike_problem, skeleton  # noqa: F401 (the table)

DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:/@-]{0,199}")
CONFIG_KEY = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._+-]{0,126}[A-Za-z0-9_+-])?")  # no trailing dot, as a NAME


def model_name_problem(name: str) -> str | None:
    """Why `name` may not be a model's name on the board (outside `MODEL_NAME`), or None."""
    if MODEL_NAME.fullmatch(name):
        return None
    return (f"model name {ascii(name[:80])} must be 1-64 ASCII letters, digits or ._+-, starting with a letter or "
            "digit, not ending with a dot (it is shown on the board and becomes part of a file name)")


def dataset_name_problem(name: str) -> str | None:
    """Why `name` may not be a dataset's display name (outside `DATASET_NAME`), or None."""
    if DATASET_NAME.fullmatch(name):
        return None
    return (f"dataset name {ascii(name[:80])} must be 1-200 ASCII letters, digits or ._+-:/@, starting with a "
            "letter or digit (rename the dataset's folder)")


def config_key_problem(config: object, where: str = "model_config") -> str | None:
    """Why a key of `config` (at any level) may not be shown as a config's name (outside `CONFIG_KEY`), or None."""
    stack = [(config, where)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                if not isinstance(key, str) or not CONFIG_KEY.fullmatch(key):
                    return (f"{at}: the key {ascii(str(key)[:80])} must be 1-128 ASCII letters, digits or ._+-, "
                            "starting with a letter, digit or _ (it is shown on the board)")
                stack.append((child, f"{at}.{key}"))
        elif isinstance(value, list):
            stack.extend((child, f"{at}[{index}]") for index, child in enumerate(value))
    return None


def confusable_problem(what: str, name: str, existing: Iterable[str]) -> str | None:
    """Why `name` would be confused with a different name of `existing` (they look alike), or None."""
    return look_alike_problem(what, name, existing, f"the board's {what}")


def builtin_model_problem(name: str) -> str | None:
    """Why a results file's model `name` may not be on the board beside the built-in models, or None. It may
    not when it looks like one without being it. That is the line `zoo.registry` and
    `benchmarks.model_identity.board_name` give."""
    return builtin_problem(MODELS.kind, name, MODELS.builtin_names(), own=name)
