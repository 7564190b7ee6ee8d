"""`nfnzoo bench ...`: thin CLI wrappers over `benchmarks.harness` and `benchmarks.plots`.

`nfnzoo bench run --task generalization --model statnn --data runs/cnn-mnist [--config NAME]
--seeds 0,1,2 --out results/statnn.json [--set KEY=VALUE ...]` trains and scores one model.
`--data` may also be a Hub dataset repo at a tag, e.g. `--data ORG/NAME@v0.1.0-1a2b3c4d`.

`nfnzoo bench scatter RESULTS... --out plot.png` draws predictions against targets.
`nfnzoo bench plot-edits RESULTS... --out edits.png` draws INR editing's renders side by side.

`nfnzoo bench suite cnn-generalization --data runs/cnn-mnist-bench --out runs/suite
[--set task.epochs=50]` runs a suite of many models on one zoo.
`nfnzoo bench suite standard-v1 --model mypkg.models:MyNFN --out runs/std [--data ZOO=FOLDER ...]`
runs a standard suite for one model.

`nfnzoo bench check-model mypkg.models:MyNFN [--seeds 0,1,2] [--set model.KEY=VALUE]` checks a
model's symmetry claims.

`--set` overrides a hyperparameter: `model.KEY=VALUE` or `task.KEY=VALUE`. A bare `KEY` works when
only one of the model and the task has it. VALUE is read as JSON when it parses (`3`, `1e-3`,
`[64,64]`, `true`). Otherwise it is taken as a string (`relu`). The arguments' parsers and bounds are
`benchmarks.command_arguments`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Callable

from benchmarks.command_arguments import (add_ray_arguments, check_workers, image_rows, parse_seeds,
                                          scoped_overrides, split_overrides)
from zoo.cli import CommandError
from zoo.registry import UnknownNameError
from zoo.validation.schema import SchemaError

if TYPE_CHECKING:
    from benchmarks.run_options import Placement


def _placement(args: argparse.Namespace) -> Placement:
    """Where the command's jobs run, from `--device`, `--workers`, `--address` and `--gpus-per-job`."""
    from benchmarks.run_options import Placement

    return Placement(args.device, check_workers(args.workers), args.address, args.gpus_per_job)


def run_command(args: argparse.Namespace) -> int:
    from benchmarks.harness import run_benchmark
    from benchmarks.jobs import JobsFailed
    from benchmarks.model_identity import resolve_model
    from benchmarks.outputs import ModelOutputError
    from benchmarks.run_options import RunOptions
    from benchmarks.threads import benchmark_threads

    try:
        model_overrides, task_overrides = split_overrides(args.set, args.model, args.task)
        with benchmark_threads():  # chosen, not inherited; the run's first progress line says how many
            options = RunOptions(parse_seeds(args.seeds), model_overrides, task_overrides, _placement(args))
            results = run_benchmark(args.task, resolve_model(args.model, args.name), args.data, args.config, options,
                                    args.out)
    except (UnknownNameError, SchemaError, FileNotFoundError, ValueError, MemoryError, JobsFailed,
            ModelOutputError) as error:
        raise CommandError(str(error)) from None
    for name, summary in results["summary"].items():
        print(f"{name}: {summary['mean']:.4f} ± {summary['std']:.4f}")
    return 0


def scatter_command(args: argparse.Namespace) -> int:
    from benchmarks.plots import scatter

    try:
        path = scatter(args.results, args.out)
    except (SchemaError, FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from None
    print(f"wrote {path}")
    return 0


def plot_edits_command(args: argparse.Namespace) -> int:
    from benchmarks.plots import edit_grid

    try:
        path = edit_grid(args.results, args.out, images=args.images)
    except (SchemaError, FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from None
    print(f"wrote {path}")
    return 0


def suite_command(args: argparse.Namespace) -> int:
    from benchmarks.files import write_text_atomic
    from benchmarks.jobs import JobsFailed
    from benchmarks.outputs import ModelOutputError
    from benchmarks.standard import STANDARD_SUITES, is_standard
    from benchmarks.run_options import RunOptions
    from benchmarks.suite import SUITES, run_suite, suite_table
    from benchmarks.threads import benchmark_threads

    if is_standard(args.name):
        return _standard_suite(args)
    if args.name not in SUITES.names():
        raise CommandError(f"unknown suite {args.name!r}; suites: {', '.join(SUITES.names())}; standard suites "
                           f"(with --model): {', '.join(STANDARD_SUITES.names())}")
    if args.model is not None or args.model_name is not None:
        raise CommandError(f"--model and --name go with a standard suite (e.g. standard-v1); {args.name}'s models "
                           "are fixed")
    if len(args.data or []) != 1:
        raise CommandError(f"suite {args.name}: expected one --data (a zoo folder or a Hub repo)")
    args.data, args.seeds = args.data[0], args.seeds or "0,1,2"

    task_overrides = scoped_overrides(args.set, "task", "task.KEY=VALUE (a suite's models are fixed)")
    only = [name.strip() for name in args.only.split(",")] if args.only else None
    try:
        with benchmark_threads():  # chosen, not inherited; each entry's first progress line says how many
            options = RunOptions(parse_seeds(args.seeds), task_overrides=task_overrides, placement=_placement(args))
            rows = run_suite(args.name, args.data, args.out, options, only)
    except (UnknownNameError, SchemaError, FileNotFoundError, ValueError, MemoryError, JobsFailed,
            ModelOutputError) as error:
        raise CommandError(str(error)) from None
    table = suite_table(rows)
    write_text_atomic(f"{args.out}/table.md", table)
    print(table, end="")
    print(f"wrote {args.out}/table.md; submit with: nfnzoo leaderboard submit {args.out}/<entry>.json")
    return 0


def _standard_suite(args: argparse.Namespace) -> int:
    """`bench suite standard-vN --model MODEL`: the suite's fixed cells, each on its own zoo."""
    from benchmarks.jobs import JobsFailed
    from benchmarks.outputs import ModelOutputError
    from benchmarks.standard import STANDARD_SUITES, parse_data_map, run_standard, standard_table
    from benchmarks.threads import benchmark_threads

    fixed = [flag for flag, value in (("--seeds", args.seeds), ("--set", args.set)) if value]
    if fixed:
        raise CommandError(f"{args.name} fixes its cells' protocols and seeds; leave out {', '.join(fixed)}")
    if args.model is None:
        raise CommandError(f"{args.name} runs one model: give --model MODEL")
    try:
        data = parse_data_map(args.data or [], STANDARD_SUITES.get(args.name)())
        only = [name.strip() for name in args.only.split(",")] if args.only is not None else None
        with benchmark_threads():  # chosen, not inherited; each cell's first progress line says how many
            manifest = run_standard(args.name, args.model, args.out, data, _placement(args), only=only,
                                    model_name=args.model_name)
    except (UnknownNameError, SchemaError, FileNotFoundError, ValueError, MemoryError, JobsFailed,
            ModelOutputError) as error:
        raise CommandError(str(error)) from None
    print(standard_table(manifest), end="")
    print(f"wrote {args.out}/suite.json and table.md; submit with: nfnzoo leaderboard submit {args.out}")
    return 0


def check_model_command(args: argparse.Namespace) -> int:
    from benchmarks.check_steps import refuse_early
    from benchmarks.check_process import run_checks
    from benchmarks.check_report import format_table, sizes_note, summary
    from benchmarks.threads import benchmark_threads

    overrides = scoped_overrides(args.set, "model", "model.KEY=VALUE")
    try:  # in a child process: a verdict only on checks that finished (`benchmarks.check_process`)
        spaces = [name.strip() for name in args.spaces.split(",")] if args.spaces is not None else None
        refuse_early(args.model, overrides, spaces)  # a bad argument needs no child (nor its torch start)
        with benchmark_threads() as threads:  # chosen, not inherited; the child runs on this process's count
            checks, sizes = run_checks(args.model, parse_seeds(args.seeds), overrides, spaces)
    except (UnknownNameError, SchemaError, ValueError, TypeError) as error:
        raise CommandError(str(error)) from None
    print(format_table(checks), end="")
    notes, error = summary(args.model, checks)
    notes[:0] = [sizes_note(sizes), f"threads: {threads.describe()}"]
    for note in notes:
        print(note)
    if error is not None:  # a broken output or a false claim
        raise CommandError(error)
    print(f"{args.model}: every claim holds ({sum(c.claimed for c in checks)} checks) and every output is finite "
          "and of the contract's shape")
    return 0


def _suite_listing() -> str:
    from benchmarks.standard import STANDARD_SUITES
    from benchmarks.suite import SUITES

    standard = [STANDARD_SUITES.get(name)() for name in STANDARD_SUITES.names()]
    return "\n".join([f"benchmark suites (models fixed; one --data): {', '.join(SUITES.names())}",
                      "standard suites (--model MODEL; --data ZOO=FOLDER for each zoo):",
                      *(f"  {suite.name}: zoos {', '.join(sorted({cell.zoo.name for cell in suite.cells}))}"
                        for suite in standard)])


def _data_help() -> str:
    from zoo.hub.resolve import DATA_HELP  # no Hub client import: zoo.hub.resolve imports it only to resolve a repo

    return f"{DATA_HELP}; the results record the repo and the commit sha beside the dataset hash"


def _listing() -> str:
    """The registered NFN models and benchmark tasks (imports them, so only when help is shown)."""
    from benchmarks.tasks import list_tasks
    from nfn_models import list_models

    return f"NFN models (--model): {', '.join(list_models())}\nbenchmark tasks (--task): {', '.join(list_tasks())}"


def _add_common_arguments(parser: argparse.ArgumentParser, set_metavar: str, set_help: str,
                          suite: bool = False) -> None:
    """--data, --seeds, --set, --device, --workers, --address and --gpus-per-job, which `run` and `suite` share.

    A `suite`'s --data repeats: a standard suite takes ZOO=FOLDER per zoo, and fixes its seeds."""
    if suite:
        parser.add_argument("--data", action="append", metavar="DATA", help=_data_help() + "; for a standard "
                            "suite, ZOO=FOLDER for each of its zoos (repeatable; the zoos are listed below; a cell "
                            "on the pinned bytes is ranked)")
        parser.add_argument("--seeds", default=None, help="comma-separated seeds or ranges (default: 0,1,2; a "
                            "standard suite fixes its own)")
    else:
        parser.add_argument("--data", required=True, metavar="DATA", help=_data_help())
        parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds or ranges (default: 0,1,2)")
    parser.add_argument("--set", action="append", default=[], metavar=set_metavar, help=set_help)
    parser.add_argument("--device", default=None,
                        help="torch device (default: cuda when available, else cpu; on Ray cuda with --gpus-per-job)")
    add_ray_arguments(parser, "seeds")


NAME_HELP = ("the model's name on the board, which the results record (default: a built-in's or an entry point's "
             "name; for an import path, the class's BOARD_NAME or its own name); 1-64 letters, digits or ._+-")


def register(subparsers: argparse._SubParsersAction) -> Callable[[], str]:
    """Adds `nfnzoo bench run`, `scatter`, `plot-edits`, `suite` and `check-model`; returns the models-and-tasks
    listing."""
    bench = subparsers.add_parser("bench", help="benchmark NFN models on zoo tasks", listing=_listing)
    commands = bench.add_subparsers(dest="bench_command", required=True, metavar="ACTION")

    run = commands.add_parser("run", help="train and evaluate a model on a task over seeds", listing=_listing)
    run.add_argument("--task", required=True, help="a registered task, e.g. generalization; or an import path "
                     "MODULE:CLASS, or an installed package's nfnzoo.tasks entry point")
    run.add_argument("--model", required=True, help="a registered NFN model, e.g. statnn or mlp; or an import path "
                     "MODULE:CLASS (e.g. mypkg.models:MyNFN), or an installed package's nfnzoo.models entry point")
    run.add_argument("--name", default=None, help=NAME_HELP)
    run.add_argument("--config", default=None, help="the dataset config (default: the dataset's only one)")
    run.add_argument("--out", required=True, help="the results JSON to write; predictions go beside it")
    _add_common_arguments(run, "KEY=VALUE", "override a hyperparameter: model.KEY=VALUE or task.KEY=VALUE "
                          "(repeatable; model.preset=NAME starts from a named preset)")
    run.set_defaults(handler=run_command)

    plot = commands.add_parser("scatter", help="plot predicted vs true test accuracy of results files")
    plot.add_argument("results", nargs="+", help="results JSON files (their predictions CSVs beside them)")
    plot.add_argument("--out", required=True, help="the PNG to write")
    plot.set_defaults(handler=scatter_command)

    edits = commands.add_parser("plot-edits", help="INR editing side by side: original render, target and each "
                                "results file's edited render, for a few test SIRENs")
    edits.add_argument("results", nargs="+", help="inr-editing results JSON files (their .examples.npz beside them)")
    edits.add_argument("--out", required=True, help="the PNG to write")
    edits.add_argument("--images", type=image_rows, default=6, help="test SIRENs to show (rows, 1-100; default 6)")
    edits.set_defaults(handler=plot_edits_command)

    suite = commands.add_parser("suite", help="run a registered suite (resumable) and print its table: a benchmark "
                                "suite's fixed models, or one model on a standard suite's cells",
                                listing=_suite_listing)
    suite.add_argument("name", help="a registered suite: a benchmark suite or a standard suite (every one is listed "
                       "below)")
    suite.add_argument("--out", required=True, help="folder for the entries' results files (existing ones are kept)")
    suite.add_argument("--only", default=None, help="comma-separated entry names, or models (every entry of a model "
                       "whose name is no entry's), to run; for a standard suite, its cells to run now (the others "
                       "are kept as an earlier run left them, or recorded as not run; --data is needed only for "
                       "these cells' zoos)")
    suite.add_argument("--model", default=None, help="the model a standard suite runs (any listed below): a "
                       "registered name, an import path MODULE:CLASS or an nfnzoo.models entry point")
    suite.add_argument("--name", dest="model_name", default=None, help=NAME_HELP)
    _add_common_arguments(suite, "task.KEY=VALUE",
                          "override a task hyperparameter of every entry, e.g. task.epochs=50 (repeatable)", suite=True)
    suite.set_defaults(handler=suite_command)

    check = commands.add_parser("check-model", help="check a model's symmetry claims with random group elements "
                                "(exit 1 on a false claim)", listing=_listing)
    check.add_argument("model", help="a registered NFN model, an import path MODULE:CLASS, or an installed "
                       "package's nfnzoo.models entry point")
    check.add_argument("--seeds", default="0,1,2", help="seeds of the members, elements and models (default: 0,1,2)")
    check.add_argument("--set", action="append", default=[], metavar="model.KEY=VALUE",
                       help="override a model hyperparameter (repeatable; the size fields are shrunk already)")
    check.add_argument("--spaces", default=None, help="comma-separated weight spaces to check (default: every one the "
                       "model reads; the spaces are benchmarks.check_model.SPACES)")
    check.set_defaults(handler=check_model_command)
    return _listing
