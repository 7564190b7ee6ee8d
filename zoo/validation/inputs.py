"""Reading what a user hands us, within bounds: files, JSON, YAML, names and free text.

Every file a command reads on a user's say-so goes through here: a spec, a manifest, a results file, a
submission, a pinned table. So one set of rules holds everywhere.

`read_capped(path, limit)` reads a regular file only, up to `limit` bytes; one more byte is an error. A
FIFO, a device such as /dev/zero or a folder is refused before anything is read. The file is opened
non-blocking and checked with `fstat`. The size is what was read, never `st_size` alone: a file may
grow, and a device reports 0.

`load_json_bytes` / `read_json_file` read JSON with its nesting bounded (`MAX_DEPTH`). Otherwise
Python's parser, and every recursive consumer after it, would die of `RecursionError`. With `strict`,
they also refuse NaN/Infinity literals, numbers that overflow to infinity (`1e999`) and repeated keys.

`load_yaml` reads YAML through the safe loader, with its expanded size bounded. Aliases are counted as
the copies a consumer would make of them (`MAX_YAML_NODES`). So a few hundred bytes of nested aliases (a
"billion laughs") are refused instead of growing to gigabytes. A recursive alias is refused too. A YAML
error names the file, line and column, and never quotes the file's bytes.

`NAME` / `check_name` are the one pattern for a user-supplied string that becomes a path component:
config, spec, entry and dataset names. Such a name has letters, digits and `._+-`, starts with a letter
or digit and does not end with a dot. It has at most 128 characters. `zoo.storage.nofollow.confine` is
the one rule for a relative path of such components inside a folder, for readers and writers alike.

`text_problem` checks free text stored in a data file. It allows at most `MAX_TEXT` characters and no
Unicode control, format or invisible characters (`zoo.validation.text`). Those include bidi overrides,
zero-width marks, escapes, blank fillers and variation selectors. Newline and tab are allowed.

Every error is an `InputError` (a `ValueError`). Its one-line message names the file (and key) and what
was expected.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from zoo.validation.text import stored_text_problem

MAX_DEPTH = 64  # JSON/YAML nesting: our files are at most ~8 deep
MAX_TEXT = 20_000  # characters of one stored string (a spec's description is under 1,000)
MAX_YAML_BYTES = 1 * 2**20  # a spec file is a few kilobytes
MAX_YAML_NODES = 1_000_000  # expanded (aliases counted as copies); a spec has a few hundred
MAX_INT = 2**63 - 1  # stored integers are 64-bit (Arrow, numpy, torch)
# a trailing dot is refused: some file systems drop it, so `x.` and `x` would name one file
NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._+-]{0,126}[A-Za-z0-9_+-])?")


class InputError(ValueError):
    """A user's input is malformed, too large or not where it may be; the message says which and why."""


# --- files --------------------------------------------------------------------------------------

def open_regular(path: str | Path, what: str = "file", *, follow: bool) -> BinaryIO:
    """`path` opened for reading if it is a regular file.

    A FIFO, device or folder is refused before a byte is read (opened non-blocking, checked with
    `fstat`). So is a link, unless `follow`. A path the user names may be a link; a file found inside a
    folder they gave may not.
    """
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what}") from None
    except OSError as error:
        if not follow and os.path.islink(path):
            raise InputError(f"{path}: a symbolic link; expected a regular {what} (links are not followed)") from None
        if os.path.isdir(path):
            raise InputError(f"{path}: is a folder; expected a {what}") from None
        raise InputError(f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"{path}: is a folder; expected a {what}")
        if not stat.S_ISREG(mode):
            raise InputError(f"{path}: not a regular file (a pipe, socket or device); expected a {what}")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_capped(path: str | Path, limit: int, what: str = "file", *, follow: bool = True) -> bytes:
    """The bytes of regular file `path` (`open_regular`), at most `limit` of them; one more is an `InputError`.

    It reads in chunks, so memory grows with what is there, not with `limit`.
    """
    with open_regular(path, what, follow=follow) as handle:
        chunks, total = [], 0
        try:
            while total <= limit:
                chunk = handle.read(min(2**22, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        except OSError as error:
            raise InputError(f"{path}: cannot be read ({error.strerror or error})") from None
    if total > limit:
        raise InputError(f"{path}: larger than {limit:,} bytes, the most a {what} may hold")
    return b"".join(chunks)


# --- JSON ---------------------------------------------------------------------------------------

def _refuse_constant(name: str) -> Any:
    raise InputError(f"{name} is not plain JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"the number {text[:40]} overflows to infinity")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        keys = [key for key, _ in pairs]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        raise InputError(f"the keys {repeated[:5]} appear twice in one object")
    return result


def depth_of(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of lists and dicts (a scalar is 0), walked without recursion; stops past `limit`."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def load_json_bytes(data: bytes | str, where: str, *, strict: bool = False, max_depth: int = MAX_DEPTH) -> Any:
    """Parses JSON text; malformed, too deeply nested or (with `strict`) non-plain JSON is an `InputError`."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as error:
        raise InputError(f"{where}: not a text file (byte {error.start} is not UTF-8); expected JSON") from None
    options = ({"parse_constant": _refuse_constant, "object_pairs_hook": _unique_keys, "parse_float": _finite_float}
               if strict else {})
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply (at most {max_depth} levels)") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: not valid JSON ({error})") from None
    except ValueError as error:  # InputError from the hooks, int digits past Python's limit
        raise InputError(f"{where}: not plain JSON ({error})") from None
    if depth_of(value, max_depth) > max_depth:
        raise InputError(f"{where}: JSON nested too deeply (at most {max_depth} levels)")
    return value


def read_json_file(path: str | Path, limit: int, *, strict: bool = False, what: str = "JSON file",
                   follow: bool = True) -> Any:
    """A JSON file read with `read_capped` (a link refused unless `follow`) and parsed with `load_json_bytes`."""
    return load_json_bytes(read_capped(path, limit, what, follow=follow), str(path), strict=strict)


# --- YAML ---------------------------------------------------------------------------------------

def _expanded_size(root: yaml.Node, limit: int) -> int:
    """Nodes a consumer sees once aliases are expanded (memoized: linear in the file), or limit + 1."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        children = ([item for pair in node.value for item in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if children_done:
            open_nodes.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(child)] for child in children))
            continue
        if key in open_nodes:
            raise InputError("a recursive alias (a node that contains itself)")
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise InputError("a recursive alias (a node that contains itself)")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _yaml_error(where: str, error: yaml.YAMLError) -> InputError:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    place = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or type(error).__name__
    return InputError(f"{where}: not valid YAML{place} ({ascii(str(problem))[1:-1][:120]})")


def load_yaml_text(text: str, where: str, *, max_nodes: int = MAX_YAML_NODES) -> Any:
    """YAML text through the safe loader, within `max_nodes` expanded nodes and `MAX_DEPTH` levels."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            size = _expanded_size(node, max_nodes)
        except InputError as error:
            raise InputError(f"{where}: {error}") from None
        if size > max_nodes:
            raise InputError(f"{where}: expands to more than {max_nodes:,} values once its aliases are "
                             "copied; refusing it (nested aliases?)")
        value = loader.construct_document(node)
    except yaml.YAMLError as error:
        raise _yaml_error(where, error) from None
    except RecursionError:
        raise InputError(f"{where}: YAML nested too deeply (at most {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()
    if depth_of(value) > MAX_DEPTH:
        raise InputError(f"{where}: YAML nested too deeply (at most {MAX_DEPTH} levels)")
    return value


def load_yaml(path: str | Path, *, limit: int = MAX_YAML_BYTES, max_nodes: int = MAX_YAML_NODES,
              what: str = "YAML file") -> Any:
    """A YAML file through the safe loader, within `limit` bytes and `max_nodes` expanded nodes."""
    data = read_capped(path, limit, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not a text file (byte {error.start} is not UTF-8); expected YAML") from None
    return load_yaml_text(text, str(path), max_nodes=max_nodes)


# --- names and paths ----------------------------------------------------------------------------

def name_problem(value: Any) -> str | None:
    """Why `value` is not a safe path component, or None."""
    if not isinstance(value, str):
        return f"expected a name, got {type(value).__name__}"
    if not NAME.fullmatch(value):
        shown = ascii(value[:60]) + ("…" if len(value) > 60 else "")
        return (f"{shown} is not a valid name: 1-128 letters, digits or ._+-, starting with a letter or digit and "
                "not ending with a dot (it becomes part of a file name)")
    return None


def check_name(value: Any, what: str) -> str:
    """`value` if it is a safe path component (`NAME`), else an `InputError` naming `what`."""
    problem = name_problem(value)
    if problem is not None:
        raise InputError(f"{what}: {problem}")
    return value


# --- free text ----------------------------------------------------------------------------------

def text_problem(text: str, max_length: int = MAX_TEXT) -> str | None:
    """Why `text` may not be stored (an invisible or control character, or too long), or None.

    `zoo.validation.text.stored_text_problem` is the one rule for stored text.
    """
    return stored_text_problem(text, max_length)


def value_problem(value: Any, max_depth: int = MAX_DEPTH, *, finite: bool = True) -> tuple[str, str] | None:
    """(key path, reason) of the first value in plain data that may not be stored, or None.

    Refused are non-finite floats, integers beyond 64 bits, strings (values and keys) failing
    `text_problem` and nesting deeper than `max_depth`. Non-finite floats pass when `finite` is off: a
    typed field's domain then says it better.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, key, depth = stack.pop()
        if depth > max_depth:
            return key, f"nested deeper than {max_depth} levels"
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int):
            if not -MAX_INT - 1 <= item <= MAX_INT:
                return key, "an integer beyond 64 bits"
        elif isinstance(item, float):
            if finite and not math.isfinite(item):
                return key, f"expected a finite number, got {item}"
        elif isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return key, problem
        elif isinstance(item, dict):
            for child_key, child in item.items():
                path = f"{key}.{child_key}" if key else str(child_key)
                if isinstance(child_key, str):
                    problem = text_problem(child_key, 256)
                    if problem is not None:
                        return ascii(path[:80]), f"key {problem}"
                stack.append((child, path, depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, f"{key}[{index}]", depth + 1) for index, child in enumerate(item))
    return None
