"""docs/reproducing.md stays true: every `nfnzoo` command on it parses with the CLI, and every format, model,
task, preset and split set it names exists (with a negative control). That each block runs to a result, on a
folder in its release's own layout, is tests/test_reproducing_runs.py."""

from __future__ import annotations

import importlib
import inspect
import re
import shlex
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reproducing.md"


def _commands(text: str) -> list[list[str]]:
    """The `nfnzoo ...` lines of the page's bash blocks, as argument lists."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("nfnzoo ")]


def _problems(commands: list[list[str]]) -> list[str]:
    """What on the page names something that does not exist (or does not parse)."""
    from benchmarks.tasks.registry import list_task_presets, list_tasks
    from nfn_models.registry import list_models, list_presets
    from zoo.cli import build_parser
    from zoo.imports import IMPORTERS, list_importers

    parser, problems = build_parser(), []
    split_sets_of = {}  # zoo folder -> the source of the importer that wrote it
    for argv in commands:
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            problems.append(f"does not parse: nfnzoo {shlex.join(argv)}")
            continue
        if argv[0] == "import":
            if args.format not in list_importers():
                problems.append(f"unknown format {args.format}")
                continue
            module = importlib.import_module(IMPORTERS.get(args.format).__module__)
            sources = [inspect.getsource(module)] + [inspect.getsource(importlib.import_module(name)) for name in
                                                     (f"{module.__name__}_splits",) if importlib.util.find_spec(name)]
            split_sets_of[args.out] = "\n".join(sources)
        if argv[:2] != ["bench", "run"]:
            continue
        if args.task not in list_tasks():
            problems.append(f"unknown task {args.task}")
        if args.model not in list_models():
            problems.append(f"unknown model {args.model}")
        for setting in args.set or []:
            key, value = setting.split("=", 1)
            if key == "task.preset" and value not in list_task_presets(args.task):
                problems.append(f"task {args.task} has no preset {value}")
            if key == "model.preset" and args.model in list_models() and value not in list_presets(args.model):
                problems.append(f"model {args.model} has no preset {value}")
            named = re.search(rf"[\"'`]{re.escape(value)}[\"'`]", split_sets_of.get(args.data, ""))
            if key == "task.splits" and not named:  # a name the importer's module (or its _splits) spells out
                problems.append(f"{args.data}: its importer records no split set {value}")
    return problems


def test_every_command_on_the_page_parses_and_names_what_exists():
    commands = _commands(PAGE.read_text())
    assert len(commands) >= 15
    assert _problems(commands) == []


@pytest.mark.parametrize("edit, expected", [
    (("--model hnp", "--model hnpp"), "unknown model hnpp"),
    (("task.preset=nfn", "task.preset=nfm"), "task generalization has no preset nfm"),
    (("task.splits=monomial-nfn-relu", "task.splits=monomial-relu"), "records no split set monomial-relu"),
    (("--nfn-split", "--nfn-splits"), "does not parse"),
])
def test_a_wrong_name_on_the_page_is_caught(edit, expected):
    """The negative control: the same page with one name changed."""
    text = PAGE.read_text()
    assert edit[0] in text
    problems = _problems(_commands(text.replace(edit[0], edit[1], 1)))
    assert any(expected in problem for problem in problems), problems

