"""The `nfnzoo` console script: discovers each package's subcommands and dispatches.

Subcommands live with the library they wrap (`zoo.commands`, `benchmarks.commands`,
`leaderboards.commands`). They are found through the `nfnzoo.commands` entry-point group, so this module
imports nothing above `zoo`.

A `register(subparsers)` function adds parsers. Each parser's `handler` default takes the parsed
arguments and returns an exit code. `register` may return a callable that gives lines for the top-level
help, such as the models and tasks it registered. It is called only when help is shown, so building the
parser imports no torch. Every option's help shows its default.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import entry_points
from typing import Any, Callable

from zoo import __version__
from zoo.validation.inputs import InputError
from zoo.storage.lock import FolderInUse
from zoo.validation.schema import SchemaError
from zoo.validation.text import visible


class CommandError(Exception):
    """A user-facing failure: printed without a traceback, exit code 1 (or `.exit_code`)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def user_message(error: BaseException) -> str:
    """The one line a user sees for a failure of theirs (or of their disk): an `OSError` names its file.

    A message may quote a file's name or content, so it is made visible (`zoo.validation.text.visible`).
    An escape sequence, a bidi override or an invisible character is printed as its escape (`\\x1b`,
    `\\u202e`), never acted on by the terminal. Line breaks stay: a rejected submission lists its
    problems one a line.
    """
    if isinstance(error, OSError) and not isinstance(error, (InputError,)):
        reason = error.strerror or str(error) or type(error).__name__
        names = [str(name) for name in (error.filename, error.filename2) if name is not None]
        return visible(f"{' -> '.join(names)}: {reason}" if names else reason)
    if isinstance(error, RecursionError):
        return "input nested too deeply"
    return visible(str(error), lines=True)


# what `main` reports in one line, without a traceback: malformed or hostile input (`zoo.validation.inputs`,
# `zoo.validation.schema`), a folder another process is writing (`zoo.storage.lock`), and the operating system's
# refusals (a full disk, a read-only folder, a missing file)
USER_ERRORS = (InputError, SchemaError, FolderInUse, OSError, RecursionError)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the listings' line breaks and appends each option's default to its help."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help may end with a listing, computed only when help is shown."""

    def __init__(self, *args: Any, listing: Callable[[], str] | None = None, **kwargs: Any):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.listing = listing

    def format_help(self) -> str:
        text = super().format_help()
        return f"{text}\n{self.listing().rstrip()}\n" if self.listing is not None else text

    def error(self, message: str):  # type: ignore[override]
        """A usage error quotes the arguments, so it is made visible (a file name may hold an escape).

        Then argparse exits with status 2.
        """
        super().error(visible(message))


def _listing(contributions: list[Callable[[], str]]) -> Callable[[], str]:
    return lambda: "\n\n".join(contribute().rstrip() for contribute in contributions)


def build_parser() -> argparse.ArgumentParser:
    contributions: list[Callable[[], str]] = []
    parser = Parser(prog="nfnzoo", description="Model zoos and benchmarks for neural functional networks.",
                    listing=_listing(contributions))
    parser.add_argument("--version", action="version", version=f"nfnzoo {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for entry in sorted(entry_points(group="nfnzoo.commands"), key=lambda e: e.name):
        contribution = entry.load()(subparsers)
        if contribution is not None:
            contributions.append(contribution)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a command that runs itself again (the portable mode)
    try:
        return int(args.handler(args) or 0)
    except CommandError as error:
        print(f"nfnzoo {args.command}: error: {user_message(error)}", file=sys.stderr)
        return error.exit_code
    except USER_ERRORS as error:  # the one path for a user's bad input, wherever it is found
        print(f"nfnzoo {args.command}: error: {user_message(error)}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `nfnzoo ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"nfnzoo {args.command}: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # `python -m zoo.cli` put the working folder first on the path: nothing more is imported from it
    # (`zoo.named_import`; `python -P -m zoo.cli` never puts it there). Then run the imported module's
    # main, so that the CommandError the subcommands raise (zoo.cli's) is the class caught, not a twin
    # defined in __main__.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    from zoo.cli import main as package_main

    sys.exit(package_main())
