"""The hand-written maps against the code, with negative controls: the module map of
docs/architecture.md against the package folders, and leaderboards/SCHEMA.md against the
results and entry dataclasses.

The module map's rule. The "## Packages" section is a nested list whose bullets mirror the folders:
a bullet that starts with a backticked folder (`` `planning/` ``) opens that folder inside its
parent bullet's folder (a top-level bullet: inside the repository's root). A backticked
`` `name.py` `` (or `` `sub/name.py` ``) in a bullet's own text names that path from the bullet's
folder; one that starts with a package or `tests/` is a path from the repository's root. Then:
every module of the four packages (not an `__init__.py`) is named inside a bullet of its folder or
of a folder above it, and every path the section names, in a bullet or not, exists. A module named
under the wrong folder fails twice: its path there does not exist, and its real folder lacks it.

SCHEMA.md's rule. The results file's table lists the keys of `Results`; a nested object's keys are
the backticked names of its table cell outside parentheses (`` `checks` (each: ...) `` opens a
list's items, `` `name`: `{"a", "b"}` `` gives an object's keys, a bare `{"a", "b"}` the cell's own);
`per_seed`'s keys are its own table ("Each `per_seed` entry"); an entry file's keys are the
`entries/` bullet of "What the board stores", and `datasets.json`'s are that bullet's literal. Each
documented set of keys equals its dataclass's fields, at every level.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from pathlib import Path

import pytest

from benchmarks.results import Results
from leaderboards.datasets import DatasetsFile
from leaderboards.entries import Entry

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("zoo", "nfn_models", "benchmarks", "leaderboards")
ROOTED = (*PACKAGES, "tests")  # a named path starting with one of these is from the repository's root
ARCHITECTURE = REPO / "docs" / "architecture.md"
SCHEMA = REPO / "leaderboards" / "SCHEMA.md"

BULLET = re.compile(r"( *)- (.*)")
OPENS_FOLDER = re.compile(r"`(\w+)/`")
NAMED_PATH = re.compile(r"`([\w/]+\.py)`")


# ---- the module map ----

def section(page: str, heading: str) -> str:
    """The text under `## heading`, up to the next `## ` heading."""
    parts = re.split(rf"^## {re.escape(heading)}\n", page, maxsplit=1, flags=re.M)
    assert len(parts) == 2, f"no '## {heading}' section"
    return re.split(r"^## ", parts[1], maxsplit=1, flags=re.M)[0]


def bullets(text: str) -> list[tuple[str, str]]:
    """(folder, own text) of each bullet of a nested Markdown list; text outside any bullet has folder ""."""
    blocks: list[list] = [["", []]]  # [folder, lines]; the first holds the text outside the list
    open_bullets: list[tuple[int, list]] = []  # (indent, block) from the outermost in
    for line in text.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        bullet = BULLET.fullmatch(line)
        while open_bullets and open_bullets[-1][0] >= indent:  # a line ends the bullets it is not inside
            open_bullets.pop()
        if bullet is None:
            (open_bullets[-1][1] if open_bullets else blocks[0])[1].append(line)
            continue
        parent = open_bullets[-1][1][0] if open_bullets else ""
        opened = OPENS_FOLDER.match(bullet.group(2))
        block = [f"{parent}{opened.group(1)}/" if opened else parent, [bullet.group(2)]]
        blocks.append(block)
        open_bullets.append((indent, block))
    return [(folder, " ".join(lines)) for folder, lines in blocks]


def map_problems(page: str, modules: set[str], files: set[str]) -> list[str]:
    """What the Packages section of `page` gets wrong about `modules` (the paths it must name) and
    `files` (every path it may name), one line each."""
    named: set[str] = set()
    problems = []
    for folder, text in bullets(section(page, "Packages")):
        if folder and not any(file.startswith(folder) for file in files):
            problems.append(f"a bullet opens {folder}, which is not a folder")
        for name in NAMED_PATH.findall(text):
            path = name if name.split("/")[0] in ROOTED or not folder else f"{folder}{name}"
            if path not in files:
                problems.append(f"names {path}, which does not exist")
            elif folder and path.startswith(folder):
                named.add(path)
    problems += [f"{module} is not named in the bullet of {module.rsplit('/', 1)[0]}/"
                 for module in sorted(modules - named)]
    return problems


def package_modules(root: Path = REPO) -> set[str]:
    """Every module of the four packages, untracked ones included, but no `__init__.py` and no tests."""
    return {path.relative_to(root).as_posix() for package in PACKAGES for path in (root / package).rglob("*.py")
            if path.name != "__init__.py" and not {"tests", "__pycache__"} & set(path.parts)}


def repo_files() -> set[str]:
    return {path.relative_to(REPO).as_posix() for top in ROOTED for path in (REPO / top).rglob("*.py")
            if "__pycache__" not in path.parts}


def test_the_module_map_names_every_module_under_its_folder_and_nothing_else():
    problems = map_problems(ARCHITECTURE.read_text(encoding="utf-8"), package_modules(), repo_files())
    assert problems == [], "docs/architecture.md, ## Packages:\n" + "\n".join(problems)


PAGE = """# A page

## Packages

The console script (`zoo/cli.py`).

- `zoo/`, by stage:
  - `storage/`: `atomic.py` (atomic writes), `lock.py` (one writer)
    and `staging.py`.
  - at the top: `loader.py` and `symmetry/attention.py`.

  A paragraph of the zoo's bullet, naming `tests/test_maps.py`.
- `leaderboards/`: `board.py` (the display model).

## Next

`ghost.py` outside the section is not the map's.
"""
MODULES = {"zoo/storage/atomic.py", "zoo/storage/lock.py", "zoo/storage/staging.py", "zoo/loader.py",
           "zoo/symmetry/attention.py", "leaderboards/board.py"}
FILES = MODULES | {"zoo/cli.py", "tests/test_maps.py"}


def test_the_map_checker_passes_a_good_page():
    """The control of the controls below: the toy page names each toy module under its folder."""
    assert map_problems(PAGE, MODULES, FILES) == []


@pytest.mark.parametrize("edit, problem", [
    (lambda page: page.replace("`lock.py` (one writer)", "one writer"),
     "zoo/storage/lock.py is not named in the bullet of zoo/storage/"),
    (lambda page: page.replace("and `staging.py`", "and `staging.py`, `ghost.py` (made up)"),
     "names zoo/storage/ghost.py, which does not exist"),
    (lambda page: page.replace("`loader.py` and", "`loader.py`, `board.py` and").replace("`board.py` (the", "(the"),
     "leaderboards/board.py is not named in the bullet of leaderboards/"),
    (lambda page: page.replace("`loader.py` and", "`loader.py`, `board.py` and"),
     "names zoo/board.py, which does not exist"),
    (lambda page: page.replace("`tests/test_maps.py`", "`tests/test_gone.py`"),
     "names tests/test_gone.py, which does not exist"),
])
def test_the_map_checker_catches_a_missing_made_up_or_misplaced_module(edit, problem):
    edited = edit(PAGE)
    assert edited != PAGE
    problems = map_problems(edited, MODULES, FILES)
    assert problem in problems, problems


def test_the_map_checker_catches_a_module_added_to_the_code():
    assert map_problems(PAGE, MODULES | {"zoo/storage/newcomer.py"}, FILES) == [
        "zoo/storage/newcomer.py is not named in the bullet of zoo/storage/"]


def test_modules_are_found_in_untracked_files_and_subpackages_but_not_in_inits_or_tests(tmp_path):
    for path in ("zoo/__init__.py", "zoo/a.py", "zoo/sub/b.py", "zoo/tests/test_c.py", "benchmarks/d.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    for package in ("nfn_models", "leaderboards"):
        (tmp_path / package).mkdir()
    assert package_modules(tmp_path) == {"zoo/a.py", "zoo/sub/b.py", "benchmarks/d.py"}


# ---- SCHEMA.md ----

CELL_TOKEN = re.compile(r"`([^`]*)`|\(|\)")
FIELD_NAME = re.compile(r"[a-z_][a-z0-9_]*")

Documented = dict[str, "Documented | None"]  # a key -> its object's keys, or None where none are listed


def literal_keys(literal: str) -> Documented:
    """The keys of a JSON-like literal: `{"a", "b"}` an object's keys, `{"a": [{"b"}]}` nested ones."""
    def keys(value) -> Documented | None:
        if isinstance(value, (set, frozenset)):
            return dict.fromkeys(value)
        if isinstance(value, dict):
            return {key: keys(inner) for key, inner in value.items()}
        if isinstance(value, list) and value:
            return keys(value[0])
        return None
    found = keys(ast.literal_eval(literal))
    assert found is not None, f"not a literal of keys: {literal}"
    return found


def closing(text: str, opening: int) -> int:
    """The index of the `)` that closes the `(` at `opening`, backticked spans skipped."""
    depth = 0
    for match in CELL_TOKEN.finditer(text, opening):
        depth += {"(": 1, ")": -1}.get(match.group(0), 0)
        if depth == 0:
            return match.start()
    raise AssertionError(f"unbalanced parentheses: {text[opening:opening + 80]}")


def cell_keys(text: str) -> Documented:
    """The keys a table cell (or a bullet) lists: its backticked names outside parentheses."""
    keys: Documented = {}
    depth, position, last = 0, 0, None  # last: (key, end) of the last key named
    while (match := CELL_TOKEN.search(text, position)) is not None:
        position, token = match.end(), match.group(0)
        follows_last = last is not None and text[last[1]:match.start()].strip()
        if token == "(" and depth == 0 and last and follows_last == "" and text[position:].lstrip().startswith("each:"):
            end = closing(text, match.start())
            keys[last[0]] = cell_keys(text[position:end].split("each:", 1)[1])
            position = end + 1
        elif token in "()":
            depth += 1 if token == "(" else -1
        elif depth == 0 and FIELD_NAME.fullmatch(match.group(1)):
            keys.setdefault(match.group(1), None)
            last = (match.group(1), match.end())
        elif depth == 0 and match.group(1).startswith("{"):
            if last and follows_last == ":":
                keys[last[0]] = literal_keys(match.group(1))
            else:
                keys.update(literal_keys(match.group(1)))
    return keys


def tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """(the line before it, its body rows as cells) of each Markdown table in `text`."""
    found, lines = [], text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("|") and (index == 0 or not lines[index - 1].startswith("|")):
            before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
            rows = []
            for row in lines[index + 2:]:  # the header and its rule first
                if not row.startswith("|"):
                    break
                rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip())[1:-1]])
            found.append((before, rows))
    return found


def results_keys(schema: str) -> Documented:
    """What SCHEMA.md documents of a results file: its table's keys and their objects' keys."""
    results = section(schema, "The results file (`schema_version: 1`)")
    found = tables(results)
    keys: Documented = {}
    for row in found[0][1]:
        for key in FIELD_NAME.findall(" ".join(re.findall(r"`([^`]*)`", row[0]))):
            keys[key] = cell_keys(row[2]) or None
    for before, rows in found[1:]:
        each = re.fullmatch(r"Each `(\w+)` entry:", before.strip())
        if each is not None:
            keys[each.group(1)] = {re.fullmatch(r"`(\w+)`", row[0]).group(1): None for row in rows}
    return keys


def board_bullet(schema: str, start: str) -> str:
    """The text of the bullet of "What the board stores" that starts with the path `start`."""
    stored = section(schema, "What the board stores")
    match = re.search(rf"^- `{re.escape(start)}[^`]*`:(.*?)(?=^- |^\S|\Z)", stored, re.M | re.S)
    assert match is not None, f"no bullet for {start} under 'What the board stores'"
    return " ".join(match.group(1).split())


def entry_keys(schema: str) -> Documented:
    keys = cell_keys(board_bullet(schema, "<root>/entries/"))
    if "results" in keys and keys["results"] is None:
        keys["results"] = results_keys(schema)  # documented once, by the results file's section
    return keys


def datasets_keys(schema: str) -> Documented:
    literal = re.search(r"`(\{[^`]*\})`", board_bullet(schema, "<root>/datasets.json"))
    assert literal is not None, "no key literal in the datasets.json bullet"
    return literal_keys(literal.group(1))


def inner_dataclass(annotation) -> type | None:
    """The dataclass a field holds: itself, or inside `X | None`, `tuple[X, ...]` or `dict[str, X]`."""
    if dataclasses.is_dataclass(annotation):
        return annotation
    return next((found for argument in typing.get_args(annotation)
                 if (found := inner_dataclass(argument)) is not None), None)


def schema_problems(cls: type, documented: Documented, where: str = "") -> list[str]:
    """Where `documented` and `cls`'s fields (and their dataclasses' fields) differ, one line each."""
    hints = typing.get_type_hints(cls)
    fields = [field.name for field in dataclasses.fields(cls)]
    problems = [f"{where}{name}: a field of {cls.__name__} that SCHEMA.md does not document"
                for name in fields if name not in documented]
    problems += [f"{where}{name}: documented in SCHEMA.md, not a field of {cls.__name__}"
                 for name in documented if name not in fields]
    for name in fields:
        inner = inner_dataclass(hints[name])
        if inner is None or name not in documented:
            continue
        if documented[name] is None:
            problems.append(f"{where}{name}: SCHEMA.md lists none of {inner.__name__}'s fields")
        else:
            problems += schema_problems(inner, documented[name], f"{where}{name}.")
    return problems


def all_schema_problems(schema: str) -> list[str]:
    return (schema_problems(Results, results_keys(schema)) + schema_problems(Entry, entry_keys(schema), "entry: ")
            + schema_problems(DatasetsFile, datasets_keys(schema), "datasets.json: "))


def test_schema_md_documents_every_field_of_the_results_and_entry_dataclasses_and_no_other():
    problems = all_schema_problems(SCHEMA.read_text(encoding="utf-8"))
    assert problems == [], "leaderboards/SCHEMA.md:\n" + "\n".join(problems)


def test_the_schema_parser_reads_nested_keys_as_schema_md_writes_them():
    cell = ("`a`, `b` (not `c`; `d`), `e` (each: `f`, `g` (`h`), `i`); `j`: `{\"k\", \"l\"}` "
            "(`m`), per metric `{\"n\"}`")
    assert cell_keys(cell) == {"a": None, "b": None, "e": {"f": None, "g": None, "i": None},
                               "j": {"k": None, "l": None}, "n": None}


def _swap(schema: str, old: str, new: str) -> str:
    assert schema.count(old) == 1, f"the control's anchor is not unique: {old}"
    return schema.replace(old, new)


@pytest.mark.parametrize("edit, problem", [
    (lambda s: _swap(s, ", `dirty` (that checkout", ", dirty (that checkout"),
     "model_source.dirty: a field of ModelSource that SCHEMA.md does not document"),
    (lambda s: _swap(s, "`gpu_model` (the CUDA", "`gpu_count` (GPUs), `gpu_model` (the CUDA"),
     "hardware.gpu_count: documented in SCHEMA.md, not a field of Hardware"),
    (lambda s: _swap(s, "`magnitude`, `claimed`", "`claimed`"),
     "claims.checks.magnitude: a field of ClaimCheck that SCHEMA.md does not document"),
    (lambda s: _swap(s, "| `num_params` | int |", "| `num_layers` | int | layers |\n| `num_params` | int |"),
     "num_layers: documented in SCHEMA.md, not a field of Results"),
    (lambda s: _swap(s, "| `ranking` | object |", "| `rank` | object |"),
     "per_seed.ranking: a field of SeedResult that SCHEMA.md does not document"),
    (lambda s: _swap(s, '"code_commit", "seal"}', '"code_commit"}'),
     "entry: submission.seal: a field of SubmissionInfo that SCHEMA.md does not document"),
    (lambda s: _swap(s, '"split_sets", "split_set_files"}', '"split_sets", "split_set_files", "licence"}'),
     "datasets.json: datasets.licence: documented in SCHEMA.md, not a field of KnownDataset"),
])
def test_the_schema_check_catches_a_missing_or_made_up_field(edit, problem):
    problems = all_schema_problems(edit(SCHEMA.read_text(encoding="utf-8")))
    assert problem in problems, problems
