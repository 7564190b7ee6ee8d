"""`nfnzoo leaderboard ...`: thin CLI wrappers over `leaderboards.submit` and `leaderboards.render`.

`nfnzoo leaderboard submit RESULTS.json|SUITE_DIR [--root DIR] [--dataset DIR] [--code URL --commit SHA]`
submits a results file or a suite's folder.

`nfnzoo leaderboard render [--root DIR] --out DIR` renders a board.

`nfnzoo leaderboard render --docs DIR [--readme FILE] [--check]` renders the docs' regions, from the
official board by default.

`nfnzoo leaderboard pin DATASET_DIR [--config NAME] [--root DIR]` pins a dataset's test metadata.

`nfnzoo leaderboard audit [--root DIR] [--require-verified]` audits a board.

`nfnzoo leaderboard migrate-ids [--root DIR]` renames an older board's entries.

`nfnzoo leaderboard publish --repo ORG/NAME [--root DIR] [--revision BRANCH] [--private]` publishes a board.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from leaderboards import USER_ROOT_VARIABLE, default_root
from zoo.cli import CommandError
from zoo.registry import UnknownNameError
from zoo.validation.schema import SchemaError
from zoo.validation.text import visible


def submit_command(args: argparse.Namespace) -> int:
    from leaderboards import SubmissionRejected, submit

    if Path(args.results).is_dir():
        return _submit_suite_folder(args)
    try:
        accepted = submit(args.results, args.root, args.dataset, code_url=args.code, code_commit=args.commit)
    except SubmissionRejected as error:
        raise CommandError(str(error)) from None
    print(visible(accepted.describe(), lines=True))  # it names the dataset's folder: shown, never acted on
    return 0


def _submit_suite_folder(args: argparse.Namespace) -> int:
    """A standard suite's folder (`bench suite standard-vN --out DIR`): every cell's results file its
    `suite.json` lists.

    Each file is from its own zoo, so --dataset, which names one zoo, does not apply. Each cell is its own
    entry. A rejected cell does not stop the others. A cell already on the board is passed over. So the
    folder can be submitted again once the rejected ones are fixed.
    """
    from benchmarks.files import read_json
    from benchmarks.standard import read_manifest
    from leaderboards import SubmissionRejected, submit
    from leaderboards.entries import content_hash, load_entries
    from leaderboards.submission import stored_results

    if args.dataset is not None:
        raise CommandError("--dataset names one zoo; a suite folder's cells read several: leave it out (the "
                           "folder's suite.json names each cell's zoo folder)")
    folder = Path(args.results)
    try:
        manifest = read_manifest(folder)
    except (OSError, ValueError) as error:
        raise CommandError(f"{folder}: not a standard suite's folder ({error})") from None
    cells = [cell for cell in manifest["cells"] if cell.get("status") == "ran"]
    if not cells:
        raise CommandError(f"{folder}: the suite's folder holds no finished cell")
    root = args.root if args.root is not None else default_root()
    try:
        on_board = {entry.submission.content_hash for _, entry in load_entries(root)} if Path(root).exists() else set()
    except (OSError, ValueError) as error:
        raise CommandError(str(error)) from None
    rejected, read = [], {}
    for cell in cells:
        try:
            data = read_json(folder / cell["results"])
            if content_hash(stored_results(data)) in on_board:  # a retry after a rejected cell
                print(visible(f"{cell['cell']}: already on the board"))
            else:
                accepted = submit(folder / cell["results"], args.root, _zoo_folder(cell), code_url=args.code,
                                  code_commit=args.commit)
                print(visible(f"{cell['cell']}: {accepted.describe()}", lines=True))
            read[cell["cell"]] = (data["model"], data["dataset"]["dataset_hash"])  # checked by submit
        except (SubmissionRejected, OSError, ValueError, KeyError, TypeError) as error:  # that cell's line
            rejected.append(f"{cell['cell']}: {error}")
    if read:
        print(visible(_placements(root, str(manifest.get("suite")), read), lines=True))
    if rejected:
        raise CommandError(f"{len(rejected)} of {len(cells)} cells rejected:\n" + "\n".join(rejected))
    return 0


def _zoo_folder(cell: dict) -> str | None:
    """The local zoo folder a suite cell read: its `--data`, kept in the folder's suite.json, never in the
    results. That folder verifies a zoo the board does not know yet. None for a Hub repo, which the results
    name."""
    data = cell.get("data")
    return data if isinstance(data, str) and data and Path(data).is_dir() else None


def _placements(root, suite: str, read: dict[str, tuple[str, str]]) -> str:
    """Where the rendered board's suite tables (`suites.md`) show each submitted cell, as {cell: (model,
    dataset hash it read)}. A cell shows ranked, in a stand-in table (not ranked), or in none."""
    from benchmarks.standard import STANDARD_SUITES
    from leaderboards.suite_board import board_heading, board_suite_boards, showing

    if suite not in STANDARD_SUITES.names():
        return f"{suite}: no standard suite of this nfnzoo; its cells are in no suite table"
    boards = board_suite_boards(root)
    pinned = {cell.name: cell.zoo.dataset_hash for cell in STANDARD_SUITES.get(suite)().cells}
    lines = [f"{suite} as the rendered board shows it (suites.md):"]
    for name, (model, digest) in read.items():
        bytes_read = (f"dataset {digest[:12]}, the pinned one" if digest == pinned.get(name)
                      else f"dataset {digest[:12]} ≠ pinned {str(pinned.get(name))[:12]}")
        board = showing(boards, suite, name, model, digest)
        if board is None:
            where = "in none of its tables"
        elif not board.stand_in:
            where = f"ranked in {suite}'s table"
        else:
            where = f"a stand-in, not ranked (table \"{board_heading(board)[0]}\")"
            where += "" if board.checked else "; this board could not check it holds the pinned zoo's runs"
        lines.append(f"  {name} ({bytes_read}): {where}")
    return "\n".join(lines)


def render_command(args: argparse.Namespace) -> int:
    from leaderboards import render

    if args.out is None and args.docs is None:
        raise CommandError("render needs --out DIR (the board's Markdown, plots and site) or --docs DIR "
                           "(the results tables in the documentation's pages), or both")
    if args.check and args.out is not None:
        raise CommandError("--check reads the --docs pages and writes nothing; leave out --out")
    if args.docs is None and (args.readme is not None or args.check):
        raise CommandError("--readme and --check go with --docs DIR")
    if args.out is not None:
        try:
            text = render(args.root if args.root is not None else default_root(), args.out)
        except (SchemaError, UnknownNameError, ValueError) as error:
            raise CommandError(str(error)) from None
        print(text, end="")
    return _render_docs(args) if args.docs is not None else 0


def _render_docs(args: argparse.Namespace) -> int:
    """`--docs`: the marked results regions of the documentation, from the official board unless --root."""
    from leaderboards import OFFICIAL_ROOT
    from leaderboards.docs_pages import render_docs, stale_pages

    root = args.root if args.root is not None else OFFICIAL_ROOT
    try:
        if args.check:
            pages, unshown = stale_pages(root, args.docs, args.readme)
        else:
            pages, unshown = render_docs(root, args.docs, args.readme)
    except (OSError, SchemaError, UnknownNameError, ValueError) as error:
        raise CommandError(str(error)) from None
    for page in pages:
        print(f"{'stale' if args.check else 'rendered'} {page}")
    if unshown:
        raise CommandError(f"no page of {args.docs} shows the board's sections {unshown}; add a "
                           "`<!-- nfnzoo:board task=TASK dataset=HASH12 -->` region for each")
    if args.check and pages:
        raise CommandError(f"{len(pages)} page(s) differ from what the board renders now; run "
                           f"`nfnzoo leaderboard render --docs {args.docs}"
                           + (f" --readme {args.readme}" if args.readme else "") + "`")
    return 0


def pin_command(args: argparse.Namespace) -> int:
    from leaderboards.pinned import pin_dataset

    try:
        print(pin_dataset(args.root if args.root is not None else default_root(), args.dataset, args.config))
    except (OSError, SchemaError, ValueError, KeyError) as error:
        raise CommandError(str(error)) from None
    return 0


def audit_command(args: argparse.Namespace) -> int:
    from leaderboards.audit import audit

    root = args.root if args.root is not None else default_root()
    try:
        audits = audit(root, require_verified=args.require_verified)
    except (SchemaError, ValueError) as error:
        raise CommandError(str(error)) from None
    for entry in audits:  # paths and problems quote the board's files: made visible (zoo.validation.text)
        state = "PROBLEM" if entry.problems else ("verified" if entry.verified else "unverified")
        if entry.stray:  # one line naming it
            print(visible(f"{state:10} {entry.path}: {entry.problems[0]}"))
            continue
        print(visible(f"{state:10} {entry.path}"))
        for problem in entry.problems:
            print(visible(f"           - {problem}"))
    failed = sum(bool(entry.problems) for entry in audits)
    entries = [entry for entry in audits if not entry.stray]
    strays = f", {len(audits) - len(entries)} stray paths under entries/" if len(entries) < len(audits) else ""
    print(f"{len(entries)} entries: {sum(e.verified for e in entries)} verified, "
          f"{sum(bool(e.problems) for e in entries)} with problems{strays}")
    return 1 if failed else 0


def migrate_ids_command(args: argparse.Namespace) -> int:
    from leaderboards.migrate_ids import migrate

    try:
        renamed = migrate(args.root if args.root is not None else default_root())
    except (OSError, SchemaError, ValueError) as error:
        raise CommandError(str(error)) from None
    for moved in renamed:
        print(visible(f"renamed {moved.old} -> {moved.new}"))
    print(f"{len(renamed)} entries renamed to <model>-<32 hex digits> ids")
    return 0


def publish_command(args: argparse.Namespace) -> int:
    from leaderboards.publish import publish_board
    from zoo.hub.publish import PublishError

    try:
        published = publish_board(args.root if args.root is not None else default_root(), args.repo,
                                  private=args.private, revision=args.revision)
    except (PublishError, SchemaError, ValueError) as error:
        raise CommandError(str(error)) from None
    print("\n".join(published.lines()))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `nfnzoo leaderboard submit` and `nfnzoo leaderboard render`."""
    board = subparsers.add_parser("leaderboard", help="validate, store and render benchmark submissions")
    commands = board.add_subparsers(dest="leaderboard_command", required=True, metavar="ACTION")
    root_help = (f"the leaderboard folder (default: your own board, ${USER_ROOT_VARIABLE} or runs/leaderboard; "
                 "maintainers pass the checkout's leaderboards/ for the official board)")

    submit = commands.add_parser("submit", help="validate a results file (or a standard suite's folder) and add it "
                                 "to the leaderboard")
    submit.add_argument("results", help="a results JSON written by `nfnzoo bench run`, or the folder of `nfnzoo bench "
                        "suite standard-vN` (every finished cell)")
    submit.add_argument("--root", default=None, help=root_help)
    submit.add_argument("--dataset", default=None, metavar="DIR",
                        help="a local dataset folder to verify an unregistered dataset hash against")
    submit.add_argument("--code", default=None, metavar="URL",
                        help="the https URL of the code that produced the results (shown as the entry's link)")
    submit.add_argument("--commit", default=None, metavar="SHA", help="the commit of that code")
    submit.set_defaults(handler=submit_command)

    render = commands.add_parser("render", help="write the leaderboard's Markdown, plots and static HTML site, "
                                                "and print the tables")
    render.add_argument("--root", default=None, help=root_help)
    render.add_argument("--out", default=None, metavar="DIR",
                        help="the folder to write the Markdown, PNG plots and HTML site to")
    render.add_argument("--docs", default=None, metavar="DIR",
                        help="rewrite the `<!-- nfnzoo:... -->` results regions of the Markdown pages under DIR "
                             "(default board: the official one)")
    render.add_argument("--readme", default=None, metavar="FILE", help="with --docs: also rewrite FILE's regions")
    render.add_argument("--check", action="store_true",
                        help="with --docs: write nothing; exit 1 if a page differs from what the board renders")
    render.set_defaults(handler=render_command)

    pin = commands.add_parser("pin", help="pin a registered dataset's test metadata (what re-scoring reads), "
                                          "or check it against the pinned copy")
    pin.add_argument("dataset", metavar="DATASET_DIR", help="the packed dataset folder")
    pin.add_argument("--config", default=None, help="the dataset config (default: the folder's only one)")
    pin.add_argument("--root", default=None, help=root_help)
    pin.set_defaults(handler=pin_command)

    audit = commands.add_parser("audit", help="re-score every accepted entry from its stored predictions; "
                                              "exit 1 if any fails")
    audit.add_argument("--root", default=None, help=root_help)
    audit.add_argument("--require-verified", action="store_true", help="count an unverified entry as a problem")
    audit.set_defaults(handler=audit_command)

    migrate = commands.add_parser("migrate-ids", help="rename an older board's entries from 8 to 32 hex digits of "
                                                      "their content hash (re-sealed; results unchanged)")
    migrate.add_argument("--root", default=None, help=root_help)
    migrate.set_defaults(handler=migrate_ids_command)

    publish = commands.add_parser("publish", help="push the board (results as Parquet, its files, the rendered site) "
                                                  "to a Hub dataset repo as one tagged commit")
    publish.add_argument("--repo", required=True, metavar="ORG/NAME", help="the Hub dataset repo")
    publish.add_argument("--root", default=None, help=root_help)
    publish.add_argument("--revision", default=None, metavar="BRANCH", help="commit to this branch (created if needed)")
    publish.add_argument("--private", action="store_true", help="create the repo private")
    publish.set_defaults(handler=publish_command)
