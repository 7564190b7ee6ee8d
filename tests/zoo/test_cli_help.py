"""The help of every `nfnzoo` command: each argument explained, defaults shown, registries listed."""

from __future__ import annotations

import argparse

import pytest

from zoo.cli import build_parser, main
from zoo.planning.spec_files import SPECS_DIR


def all_parsers(parser: argparse.ArgumentParser, path: str = "nfnzoo"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from all_parsers(child, f"{path} {name}")


PARSERS = dict(all_parsers(build_parser()))


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_every_argument_has_help_and_shows_its_default(path):
    parser = PARSERS[path]
    text = parser.format_help()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        name = action.option_strings[-1] if action.option_strings else action.dest
        assert action.help and action.help.strip(), f"{path}: {name} has no help text"
        if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS):
            assert f"default: {action.default}" in text or "default" in action.help, \
                f"{path}: {name}'s default {action.default!r} is not shown"


def test_a_help_check_can_fail():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    with pytest.raises(AssertionError, match="has no help"):
        PARSERS["scratch"] = parser
        try:
            test_every_argument_has_help_and_shows_its_default("scratch")
        finally:
            del PARSERS["scratch"]


def test_top_level_help_lists_models_tasks_specs_and_families(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    from benchmarks.tasks import list_tasks
    from nfn_models import list_models
    from zoo.families import list_families

    for name in [*list_models(), *list_tasks(), *list_families(), *(p.stem for p in SPECS_DIR.glob("*.yaml"))]:
        assert name in out, name


def test_version(capsys):
    import zoo

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"nfnzoo {zoo.__version__}"
