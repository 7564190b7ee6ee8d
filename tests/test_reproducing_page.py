"""docs/reproducing.md stays true: every `nfnzoo` command on it parses with the CLI, and every format, model,
task, preset and split set it names exists (with a negative control). The path those commands take runs
end to end in tests/benchmarks/test_split_sets.py on a folder made in the Small CNN Zoo's layout."""

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


def test_the_transformer_nfn_commands_run_on_a_folder_in_the_releases_layout(tmp_path, monkeypatch, capsys):
    """The page's Small Transformer Zoo block, run: import a folder written as the release writes it (its
    best rows' paths included), then the documented `bench run` (shortened to one epoch without warm-up,
    the only edit) and `leaderboard submit` into a fresh board."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "zoo"))
    try:
        from small_transformer_fixture import make_zoo
    finally:
        sys.path.pop(0)
    from zoo.cli import main

    text = PAGE.read_text()
    block = text[text.index("## Transformer-NFN on the Small Transformer Zoo"):]
    commands = _commands(block[:block.index("\n## ", 5)])
    assert [argv[:2] for argv in commands] == [["import", "small-transformer-zoo"], ["bench", "run"],
                                               ["leaderboard", "submit"]]
    make_zoo(tmp_path / "data" / "mnist_transformer", runs=24, best_paths="release")
    (tmp_path / "board").mkdir()
    (tmp_path / "board" / "datasets.json").write_text(json.dumps({"datasets": []}))
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        if argv[:2] == ["bench", "run"]:
            argv = [*argv, "--set", "task.epochs=1", "--set", "task.warmup_epochs=0"]
        if argv[:2] == ["leaderboard", "submit"]:
            argv = [*argv, "--root", "board"]
        assert main(argv) == 0, (argv, capsys.readouterr().err[-2000:])
    results = json.loads((tmp_path / "results" / "transformer-nfn.json").read_text())
    assert results["task_config"]["splits"] == "transformer-nfn" and results["task_config"]["checkpoints"] == "all"
    assert list((tmp_path / "board" / "entries" / "generalization").glob("*/transformer_nfn-*.json"))
