"""Every `nfnzoo ...` command the docs show and every `--help` text name only what exists: each model,
task, suite, zoo, cell, preset and entry point they mention is checked against the registries, with the
real parser deciding which token is which argument (and negative controls: a made-up name is flagged)."""

from __future__ import annotations

import argparse
import importlib
import re
import tomllib
from pathlib import Path

import pytest

from benchmarks.standard import STANDARD_SUITES
from benchmarks.suite import SUITES, select_entries
from benchmarks.tasks.registry import TASKS, list_task_presets as task_presets
from nfn_models.registry import MODELS, list_presets as model_presets
from zoo.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "examples" / "my_nfn" / "README.md"])
EXAMPLE = REPO / "examples" / "my_nfn"
EXAMPLE_POINTS = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]["entry-points"]
# what a page may write where a name goes: MODEL, YOUR_MODEL, ..., <cell>, $MODEL
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*|\.\.\.|<[^>]*>|\$\w+")
HYPOTHETICAL_PACKAGES = {"mypkg"}  # the pages' stand-in for the reader's own package


def _walk(parser: argparse.ArgumentParser, path: str = "nfnzoo"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _walk(child, f"{path} {name}")


PARSERS = dict(_walk(build_parser()))


# --- the names -----------------------------------------------------------------------------------

def import_path_problem(value: str) -> str | None:
    """Why `MODULE:ATTR` names nothing (the example package is read, not imported), or None."""
    module, _, attribute = value.partition(":")
    top = module.split(".")[0]
    if top in HYPOTHETICAL_PACKAGES or PLACEHOLDER.fullmatch(module) or PLACEHOLDER.fullmatch(attribute):
        return None
    if top == "my_nfn":
        source = EXAMPLE / (module.replace(".", "/") + ".py")
        found = source.exists() and re.search(rf"^class {re.escape(attribute)}\b", source.read_text(), re.M)
        return None if found else f"import path {value!r}: examples/my_nfn has no {module}.{attribute}"
    try:
        found = hasattr(importlib.import_module(module), attribute)
    except ImportError:
        found = False
    return None if found else f"import path {value!r} imports nothing"


def _entry_points(group: str) -> set[str]:
    return set(EXAMPLE_POINTS.get(group, {}))


def model_problem(value: str) -> str | None:
    if PLACEHOLDER.fullmatch(value):
        return None
    if ":" in value:
        return import_path_problem(value)
    known = set(MODELS.builtin_names()) | _entry_points("nfnzoo.models")
    return None if value in known else f"model {value!r} is no registered model nor examples/my_nfn's entry point"


def task_problem(value: str) -> str | None:
    if PLACEHOLDER.fullmatch(value):
        return None
    if ":" in value:
        return import_path_problem(value)
    return None if value in set(TASKS.builtin_names()) | _entry_points("nfnzoo.tasks") else f"task {value!r} is unknown"


def suite_problem(value: str) -> str | None:
    if PLACEHOLDER.fullmatch(value) or value in SUITES.names() or value in STANDARD_SUITES.names():
        return None
    return f"suite {value!r} is unknown"


# --- commands on a page --------------------------------------------------------------------------

FENCE = re.compile(r"^ *```(\w*)[^\n]*\n(.*?)^ *```", re.M | re.S)
SHELL = {"", "bash", "sh", "shell", "console"}  # a `text` block shows output, not commands


def page_commands(text: str) -> list[str]:
    """The `nfnzoo ...` commands of a Markdown text: in its code blocks (a trailing `\\` joins the next
    line; a `# comment` ends one) and in its inline code spans."""
    commands = []
    for language, block in FENCE.findall(text):
        if language not in SHELL:
            continue
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.split(r"\s#", line)[0]
            commands += [f"nfnzoo {rest}" for rest in re.findall(r"(?:^|[\s(`$])nfnzoo ([^&|;`)]*)", line)]
    inline = FENCE.sub("", text)
    commands += [re.sub(r"\s+", " ", span) for span in re.findall(r"`(nfnzoo [^`]+)`", inline)]
    # not output: "nfnzoo bench: error: ...", a version "nfnzoo X.Y.Z"
    return [command for command in commands if re.match(r"nfnzoo (-|[a-z][\w-]*( |$))", command)]


def _parse(command: str) -> tuple[str, dict[str, list[str]], list[str]]:
    """(command path, {dest: values}, problems): the real parser says which option takes a value."""
    tokens = [t.strip("[]") for t in command.split()[1:]]
    tokens = [t for t in tokens if t and t != "..."]
    path, parser = "nfnzoo", PARSERS["nfnzoo"]
    while tokens and f"{path} {tokens[0]}" in PARSERS:
        path = f"{path} {tokens.pop(0)}"
        parser = PARSERS[path]
    values: dict[str, list[str]] = {}
    problems: list[str] = []
    positionals = [a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    while tokens:
        token = tokens.pop(0)
        if token.startswith("-"):
            option, equals, value = token.partition("=")
            action = parser._option_string_actions.get(option)
            if action is None:
                problems.append(f"{path}: no option {option}")
            elif action.nargs != 0:
                if not equals and tokens:
                    value = tokens.pop(0)
                values.setdefault(action.dest, []).append(value)
        elif subcommands and not positionals:
            problems.append(f"{path}: no command {token!r}")
            break
        elif positionals:
            action = positionals[0] if positionals[0].nargs in ("+", "*") else positionals.pop(0)
            values.setdefault(action.dest, []).append(token)
    return path, values, problems


def command_problems(command: str) -> list[str]:
    """What `command` names that does not exist: its command, options, and the registries' names."""
    path, values, problems = _parse(command)

    def get(dest: str) -> list[str]:
        return values.get(dest, [])

    if path.startswith("nfnzoo bench"):
        problems += [problem for model in get("model") if (problem := model_problem(model))]
        problems += [problem for task in get("task") if (problem := task_problem(task))]
    if path == "nfnzoo bench suite":
        problems += [problem for name in get("name") if (problem := suite_problem(name))]
        problems += _suite_problems(get("name"), get("data"), get("only"))
    for assignment in get("set"):  # model.preset=NAME / task.preset=NAME: a preset the named model or task has
        scope, _, preset = assignment.partition(".preset=")
        owners = {"model": (get("model"), model_presets, MODELS), "task": (get("task"), task_presets, TASKS)}
        if preset and scope in owners and not PLACEHOLDER.fullmatch(preset):
            names, presets, registry = owners[scope]
            problems += [f"{scope} {name!r} has no preset {preset!r}" for name in names
                         if name in registry.builtin_names() and preset not in presets(name)]
    return [f"{problem} (in `{command}`)" for problem in problems]


def _suite_problems(names: list[str], data: list[str], only: list[str]) -> list[str]:
    """A standard suite's `--data ZOO=FOLDER` zoos and `--only` cells, a benchmark suite's `--only` entries."""
    problems = []
    wanted = [name.strip() for value in only for name in value.split(",") if not PLACEHOLDER.fullmatch(name.strip())]
    for name in names:
        if name in STANDARD_SUITES.names():
            suite = STANDARD_SUITES.get(name)()
            zoos, cells = {cell.zoo.name for cell in suite.cells}, {cell.name for cell in suite.cells}
            problems += [f"{name} has no zoo {zoo!r}" for zoo, equals, _ in (d.partition("=") for d in data)
                         if equals and not PLACEHOLDER.fullmatch(zoo) and zoo not in zoos]
            problems += [f"{name} has no cell {cell!r}" for cell in wanted if cell not in cells]
        elif name in SUITES.names() and wanted:
            try:
                select_entries(SUITES.get(name)(), wanted)
            except ValueError as error:
                problems.append(str(error))
    return problems


# --- entry points declared on a page -------------------------------------------------------------

def declared_entry_point_problems(text: str) -> list[str]:
    """The `[project.entry-points."nfnzoo.*"]` tables of a page's TOML: a name no built-in has, a value that
    imports, and, for the example package, exactly what its pyproject.toml declares."""
    problems = []
    for group, body in re.findall(r'\[project\.entry-points\."(nfnzoo\.\w+)"\]\n((?:[^\[\n`][^\n]*\n)*)', text):
        registry = {"nfnzoo.models": MODELS, "nfnzoo.tasks": TASKS}.get(group)
        if registry is None:
            problems.append(f"no entry point group {group!r}")
            continue
        for name, value in re.findall(r'^\s*([\w.-]+)\s*=\s*"([^"]+)"', body, re.M):
            if name in registry.builtin_names():
                problems.append(f"entry point {name!r} takes a built-in's name")
            if problem := import_path_problem(value):
                problems.append(f"entry point {name!r}: {problem}")
            if value.startswith("my_nfn.") and EXAMPLE_POINTS.get(group, {}).get(name) != value:
                problems.append(f"entry point {name} = {value!r} is not what examples/my_nfn declares")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_command_on_a_page_names_what_exists(page):
    text = page.read_text(encoding="utf-8")
    problems = [problem for command in page_commands(text) for problem in command_problems(command)]
    assert problems + declared_entry_point_problems(text) == []


def test_the_pages_show_the_commands_the_check_reads():
    """The parser above finds the commands that matter (a check that reads nothing passes everything)."""
    byo = page_commands((REPO / "docs" / "bring-your-own-nfn.md").read_text(encoding="utf-8"))
    assert any(c.startswith("nfnzoo bench suite standard-v2 ") and "--data" in c for c in byo), byo
    assert any(c.startswith("nfnzoo bench check-model tensor_moments") for c in byo)
    submitting = page_commands((REPO / "docs" / "submitting.md").read_text(encoding="utf-8"))
    assert any(c.startswith("nfnzoo leaderboard submit") for c in submitting)


SAMPLE = """
```bash
nfnzoo bench suite standard-v2 --model my_nfn --out runs/std \\
    --data cnn-mnist-suite-v3=runs/cnn --only cnn-generalization-gelu
nfnzoo bench suite standard-v9 --model tensor_moments --out runs/std  # a comment naming no_such_model
nfnzoo bench run --task generalisation --model my_nfn.models:MyNFN --set model.preset=fast --out r.json
```
Run `nfnzoo bench check-model  statnn_v2` or `nfnzoo bench run --model
mypkg.models:MyNFN --task TASK --bogus 1`.

```toml
[project.entry-points."nfnzoo.models"]
tensor_moments = "my_nfn.model:TensorMomentz"
statnn = "mypkg.models:MyNFN"
```
"""


def test_made_up_names_in_a_sample_page_are_flagged():
    """The negative control: each made-up name of the sample is flagged, and nothing else."""
    problems = [p for command in page_commands(SAMPLE) for p in command_problems(command)]
    problems += declared_entry_point_problems(SAMPLE)
    expected = ["model 'my_nfn' is no registered model", "standard-v2 has no zoo 'cnn-mnist-suite-v3'",
                "standard-v2 has no cell 'cnn-generalization-gelu'", "suite 'standard-v9' is unknown",
                "task 'generalisation' is unknown", "examples/my_nfn has no my_nfn.models.MyNFN",
                "model 'statnn_v2' is no registered model", "nfnzoo bench run: no option --bogus",
                "examples/my_nfn has no my_nfn.model.TensorMomentz",
                "is not what examples/my_nfn declares", "entry point 'statnn' takes a built-in's name"]
    for message in expected:
        assert sum(message in problem for problem in problems) == 1, (message, problems)
    assert len(problems) == len(expected), problems
    assert command_problems("nfnzoo bench run --task generalization --model mlp --set model.preset=fast")  # no such


# --- the --help texts ----------------------------------------------------------------------------

EXAMPLES = {"model": model_problem, "task": task_problem}  # an argument's "e.g. X or Y" names these


def help_problems(path: str, text: str, parser: argparse.ArgumentParser) -> list[str]:
    """What a command's help names that does not exist: its arguments' examples (`e.g. statnn or mlp`),
    import paths and standard suites (a suite named alone where all are meant goes stale), and its listings
    (models, tasks, suites, each standard suite's zoos) against the registries."""
    problems = []
    for action in parser._actions:
        check = EXAMPLES.get(action.dest) or (suite_problem if path == "nfnzoo bench suite" and action.dest == "name"
                                              else None)
        for example in re.findall(r"e\.g\. ([\w.:-]+(?:(?:, | or )[\w.:-]+)*)", action.help or ""):
            problems += [problem for name in re.split(r", | or ", example) if check and (problem := check(name))]
        named = set(re.findall(r"\bstandard-v\d+(?:-\d+x)?\b", action.help or ""))
        if named and named != set(STANDARD_SUITES.names()):
            problems.append(f"{path}: {action.dest}'s help names {sorted(named)} of the standard suites")
    problems += [problem for value in re.findall(r"\b[a-z_][\w.]*:[A-Z]\w*[a-z]\w*", text)
                 if (problem := import_path_problem(value))]
    problems += [f"suite {name!r} is unknown" for name in set(re.findall(r"\bstandard-v\d+(?:-\d+x)?\b", text))
                 if name not in STANDARD_SUITES.names()]
    listings = {r"NFN models \(--model\): (.*)": MODELS.names(), r"benchmark tasks \(--task\): (.*)": TASKS.names(),
                r"benchmark suites \([^)]*\): (.*)": SUITES.names()}
    for pattern, names in listings.items():
        problems += [f"{path}: listed {listed!r}, registered {names}" for listed in re.findall(pattern, text)
                     if listed.split(", ") != names]
    if path == "nfnzoo bench suite":
        listed = dict(re.findall(r"^  (standard-v\d+(?:-\d+x)?): zoos (.*)$", text, re.M))
        registered = {name: ", ".join(sorted({c.zoo.name for c in STANDARD_SUITES.get(name)().cells}))
                      for name in STANDARD_SUITES.names()}
        if listed != registered:
            problems.append(f"{path}: lists the standard suites {listed}, registered {registered}")
    return problems


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_every_help_text_names_what_exists(path):
    assert help_problems(path, PARSERS[path].format_help(), PARSERS[path]) == []


def test_bench_suite_help_lists_every_registered_suite():
    text = PARSERS["nfnzoo bench suite"].format_help()
    for name in [*SUITES.names(), *STANDARD_SUITES.names()]:
        assert re.search(rf"\b{re.escape(name)}\b", text), name


def test_a_help_text_naming_a_made_up_or_a_lone_suite_is_flagged():
    """The negative control: a sample help that names a made-up model, task and import path, one standard
    suite of several, and a listing that lost a suite."""
    parser = argparse.ArgumentParser(prog="nfnzoo bench suite")
    parser.add_argument("--model", help="a registered NFN model, e.g. statnn or stat_nn")
    parser.add_argument("--task", help="a registered task, e.g. generalisation")
    parser.add_argument("name", help="the suite, e.g. standard-v1 (or mypkg.x:Y, or my_nfn.model:Nope)")
    text = parser.format_help() + f"\nbenchmark suites (fixed): {', '.join(SUITES.names()[1:])}\n"
    problems = help_problems("nfnzoo bench suite", text, parser)
    for message in ("model 'stat_nn'", "task 'generalisation'", "name's help names ['standard-v1']",
                    "no my_nfn.model.Nope", "listed ", "lists the standard suites"):
        assert sum(message in problem for problem in problems) == 1, (message, problems)
    assert len(problems) == 6, problems
