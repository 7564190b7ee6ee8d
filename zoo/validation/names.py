"""Which two names a reader could not tell apart: the one rule for a name beside a built-in's or a board's.

A name is shown to people: a model's name on the board, a plugin's name in a listing. So two names that
read alike are a forgery waiting to happen.

Two names *look alike* (`look_alike`) when they read the same, setting letter case, `-` and `_` aside,
once the small table `CONFUSABLE` is applied (longest sequence first). It reads `rn` as `m`, `vv` as
`w`, `cl` as `d`, `1`, `I` and `|` as `l`, and `0` and `o` as `O`.

An upper-case `I` reads as `i` or as `l`, so a name has two readings (`readings`). Two names look alike
when they share one. `MIP` is like `mip` and like `mlp`, while `mip` and `mlp` differ.

`builtin_problem` applies the rule, with the same one line, at every place a non-built-in name enters.
`zoo.registry.Registry.add_plugin` takes import paths, entry points and objects.
`benchmarks.model_identity.board_name` takes `--name` on `bench run` and `bench suite`.
`leaderboards.submission` takes `leaderboard submit`. Beside the built-ins `statnn` and `mlp`, `StatNN`,
`stat_nn`, `stat-nn` and `rnlp` are refused.

A name is never its own look-alike. The same name again (a notebook cell run twice) is not a confusion.
"""

from __future__ import annotations

import re
from typing import Iterable

# sequence -> what it is read as; the documented table of look-alikes within the names' characters
CONFUSABLE = {"rn": "m", "vv": "w", "cl": "d", "1": "l", "I": "l", "|": "l", "0": "O", "o": "O", "_": "-"}
_CONFUSABLE = re.compile("|".join(re.escape(k) for k in sorted(CONFUSABLE, key=len, reverse=True)))
_SEPARATORS = str.maketrans("", "", "-_")


def _listed(items: list[str]) -> str:
    return f"{', '.join(items[:-1])} and {items[-1]}" if len(items) > 1 else items[0]


_READ_AS = {target: [k for k, v in CONFUSABLE.items() if v == target and k != "_"] for target in CONFUSABLE.values()}
# what a refusal says the rule is: "letter case, - and _ aside; rn as m, ..., 1, I and | as l, 0 and o as O"
RULE = "letter case, - and _ aside; " + ", ".join(f"{_listed(ks)} as {t}" for t, ks in _READ_AS.items() if ks)


def skeleton(name: str) -> str:
    """What `name` looks like, letter case kept: every `CONFUSABLE` sequence replaced by what it is read as."""
    return _CONFUSABLE.sub(lambda match: CONFUSABLE[match.group(0)], name)


def _reading(name: str) -> str:
    return skeleton(name.lower()).lower().translate(_SEPARATORS)


def readings(name: str) -> frozenset[str]:
    """How `name` may be read: in lower case, with its look-alikes replaced and `-`, `_` dropped.

    Its upper-case `I` reads as `i` or as `l`.
    """
    return frozenset((_reading(name), _reading(skeleton(name))))


def look_alike(name: str, other: str) -> bool:
    """Whether a reader could take `name` for `other` (see the module docstring); a name looks like itself."""
    return not readings(name).isdisjoint(readings(other))


def look_alike_problem(what: str, name: str, others: Iterable[str], whose: str) -> str | None:
    """Why `name` (a `what`: "model name") may not stand beside `others`; None where it may.

    It may not when it looks like a different one of them. `whose` says whose names they are: "the
    board's model name".
    """
    for other in sorted(set(others)):
        if other != name and look_alike(name, other):
            return (f"{what} {name!r} looks like {whose} {other!r} ({RULE}); choose a name that cannot be "
                    "mistaken for it")
    return None


def builtin_problem(kind: str, name: str, builtins: Iterable[str], own: str | None = None) -> str | None:
    """Why `name` may not name a `kind` ("NFN model") other than the built-in `own`.

    It is a different built-in's name, or looks like one of `builtins`. This is the one line every entry
    point of a name raises.
    """
    builtins = set(builtins)
    if name == own and own in builtins:
        return None
    if name in builtins:
        return f"{kind} name {name!r} is the built-in {kind} {name!r}'s; choose a name that cannot be mistaken for it"
    return look_alike_problem(f"{kind} name", name, builtins, f"the built-in {kind}")
