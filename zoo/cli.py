"""The `nfnzoo` console script: discovers each package's subcommands and dispatches.

Subcommands live with the library they wrap (`zoo.commands`, `benchmarks.commands`,
`leaderboards.commands`) and are found through the `nfnzoo.commands` entry-point group, so
this module imports nothing above `zoo`. A `register(subparsers)` function adds parsers
whose `handler` default is a callable taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points


class CommandError(Exception):
    """A user-facing failure: printed without a traceback, exit code 1 (or `.exit_code`)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nfnzoo", description="Model zoos and benchmarks for neural functional networks.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for entry in sorted(entry_points(group="nfnzoo.commands"), key=lambda e: e.name):
        entry.load()(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except CommandError as error:
        print(f"nfnzoo {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except BrokenPipeError:  # `nfnzoo ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"nfnzoo {args.command}: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
