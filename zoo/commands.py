"""`nfnzoo` subcommands of the zoo package: generate, pack, info, verify, publish.

Import and export live in `zoo.imports.commands`. Each command is a thin wrapper: parse arguments, call
the library, print the outcome.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from zoo.cli import CommandError
from zoo.portable_command import portable_child, refuse_a_gpu, refuse_an_unpinnable_processor
from zoo.training.reproducibility import MODES as REPRODUCIBILITY_MODES

if TYPE_CHECKING:
    from zoo.hub.resolve import DataSource


def _generate(args: argparse.Namespace) -> int:
    refuse_an_unpinnable_processor(args)  # before anything imports torch and NumPy
    from zoo.storage.folder import check_writable
    from zoo.storage.lock import FolderLock
    from zoo.planning.plan import plan_runs
    from zoo.planning.spec import load_spec

    try:
        spec = load_spec(args.spec, args.profile, allow_outside_extends=args.allow_extends_anywhere)
    except (FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from None
    for option in ("rng", "reproducibility"):  # part of the spec: its hash and run ids change, the zoo records it
        if getattr(args, option) is not None:
            training = dataclasses.replace(spec.training, **{option: getattr(args, option)})
            spec = dataclasses.replace(spec, training=training)
    draws = "" if spec.training.rng == "torch-generator" else f", training.rng: {spec.training.rng}"
    draws += f", reproducibility: {spec.training.reproducibility}"
    if spec.training.reproducibility == "portable" and not args.dry_run:
        refuse_a_gpu(spec.name, args)
        child = portable_child(args)  # None: this process is the portable one already
        if child is not None:
            return child
    if args.dry_run:  # counted from the spec, never listed (`zoo.planning.plan_size`)
        from zoo.planning.estimate import estimate

        planned = estimate(spec)
        print(f"{spec.name} ({args.profile or 'full'}): {planned.runs:,} runs, {planned.checkpoints:,} "
              f"checkpoints{draws}")
        print("\n".join(planned.lines()[1:]))
        return 0
    runs = plan_runs(spec)
    checkpoints = sum(len(r.checkpoints) for r in runs)
    print(f"{spec.name} ({args.profile or 'full'}): {len(runs):,} runs, {checkpoints:,} checkpoints{draws}")
    from zoo.families import create_family

    importer = create_family(spec.family).IMPORT_ONLY
    if importer is not None:
        raise CommandError(f"{spec.name}: family {spec.family} is import-only (no training recipe); get its members "
                           f"with `nfnzoo import {importer} SOURCE --out DIR`")
    try:
        check_writable(args.out)
    except ValueError as error:
        raise CommandError(str(error)) from None
    # one generate or pack per output folder, held from before Ray starts through our own pack
    with FolderLock(args.out, "nfnzoo generate") as lock:
        return _generate_locked(args, spec, lock)


def _modes(folder: Path) -> set[str]:
    """The reproducibility modes a zoo folder's configs were made in.

    A config made before the modes existed counts as native.
    """
    from zoo.storage.folder import read_manifest
    from zoo.training.reproducibility import mode_of

    try:
        configs = read_manifest(folder)["configs"]
    except (OSError, ValueError, KeyError):
        return set()  # verify itself reports what is wrong with the manifest
    return {mode_of(entry) for entry in configs.values()}


def _generate_locked(args: argparse.Namespace, spec, lock) -> int:
    from zoo.distributed.driver import GenerationInterrupted, generate

    try:
        report = generate(spec, args.out, num_cpus=args.num_cpus, address=args.address,
                          runs_per_trial=args.runs_per_trial, max_failures=args.max_failures,
                          device=args.device, population_size=args.population_size,
                          gpus_per_trial=args.gpus_per_trial)
    except ValueError as error:  # a device that is not there, an output folder that cannot be written
        raise CommandError(str(error)) from None
    except GenerationInterrupted as interrupt:  # SIGINT 130, SIGTERM 143; nothing packed
        raise CommandError(
            f"interrupted ({interrupt.signal_name}); {interrupt.staged:,} of {interrupt.planned:,} planned "
            f"checkpoints are staged in {Path(args.out) / 'staging'} and kept; nothing was packed. "
            "Run the same command again to resume.",
            exit_code=143 if interrupt.signal_name == "SIGTERM" else 130) from None
    print(f"staged {report.written:,} new checkpoints ({report.already_staged:,} already staged) "
          f"in {report.trials} trials" + (f" on {report.nodes} nodes" if report.nodes > 1 else "")
          + f", {report.wall_time_s:.1f} s"
          + (f" (Ray scheduling overhead {100 * report.scheduling_overhead:.0f}% of the workers' time)"
             if report.trials else ""))
    # A zoo with planned checkpoints missing (failed trials, anything) is not packed unless
    # asked for, and the command fails either way: the last complete pack stays as it was.
    packs = not args.no_pack and (not report.missing or args.allow_incomplete)
    if packs:
        _pack(argparse.Namespace(folder=args.out, config=[spec.name], shard_mb=args.shard_mb,
                                 allow_incomplete=args.allow_incomplete, lock=lock))
    if report.missing or report.failed_trials:
        outcome = ("packed incomplete (--allow-incomplete)" if packs and report.missing
                   else "nothing was packed" if report.missing and not args.no_pack else "not packed (--no-pack)")
        failures = "".join(f"\n  {message}" for message in report.failed_trials)
        raise CommandError(
            f"{report.missing:,} of {report.checkpoints:,} planned checkpoints are missing after training and "
            f"retries ({len(report.failed_trials)} failure(s), below); {outcome}. The "
            f"{report.checkpoints - report.missing:,} staged are kept: run the same command again to resume."
            + failures)
    return 0


def _pack(args: argparse.Namespace) -> int:
    from zoo.dataset.pack import pack

    try:
        manifest = pack(args.folder, configs=args.config, max_shard_bytes=int(args.shard_mb * 2**20),
                        allow_incomplete=args.allow_incomplete, lock=getattr(args, "lock", None))
    except (FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from None
    for name in args.config or sorted(manifest["configs"]):
        entry = manifest["configs"][name]
        counts = ", ".join(f"{k} {v:,}" for k, v in entry["splits"].items())
        print(f"packed {name}: {counts} ({len(entry['files'])} shards) -> {Path(args.folder) / 'data' / name}")
        if not entry["complete"]:
            print(f"  warning: incomplete: {entry['packed_checkpoints']:,} of {entry['planned_checkpoints']:,} planned "
                  "checkpoints are packed (the card and `nfnzoo info` say so); re-run `nfnzoo generate` to finish",
                  file=sys.stderr)
    return 0


def _resolve_data(args: argparse.Namespace, config: str | None = None) -> "DataSource":
    """The `zoo.hub.resolve.DataSource` of the positional FOLDER or `--data` (exactly one of them)."""
    from zoo.hub.resolve import resolve_data

    if (args.folder is None) == (args.data is None):
        raise CommandError("give the zoo once: a FOLDER (or ORG/NAME[@REVISION]) argument or --data, not "
                           + ("both" if args.folder is not None else "neither"))
    try:
        source = resolve_data(args.folder if args.folder is not None else args.data, config=config)
    except ValueError as error:
        raise CommandError(str(error)) from None
    if source.repo is not None:
        print(f"{source.given}: dataset repo {source.repo} at commit {source.revision} ({source.folder})",
              file=sys.stderr)
    return source


def _info(args: argparse.Namespace) -> int:
    from zoo.dataset.info import describe, final_breakdown, plot_final

    source = _resolve_data(args, args.config)
    try:
        print(describe(source.folder, args.config))
        if args.by:
            print(final_breakdown(source.folder, args.by, args.config))
        if args.plot:
            print(f"wrote {plot_final(source.folder, args.plot, args.by, args.config)}")
    except (FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from None
    return 0


def _verify(args: argparse.Namespace) -> int:
    from zoo.dataset.verify import verify

    if args.json is not None and not Path(args.json).parent.is_dir():
        raise CommandError(f"--json {args.json}: no folder {Path(args.json).parent} to write the report into")
    source = _resolve_data(args)
    if args.retrain and _modes(source.folder) & {"portable"}:  # retrained in the mode it was made in
        child = portable_child(args)
        if child is not None:
            return child
    report = verify(source.folder, recompute=args.recompute, seed=args.seed, allow_incomplete=args.allow_incomplete,
                    retrain=args.retrain, full=args.full)
    print(f"checked {report.files_checked} shards, {report.rows_checked:,} rows")
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for result in report.recomputed:
        worst = max(abs(m["recomputed"] - m["stored"]) for m in result["metrics"].values())
        print(f"  recomputed {result['config']}/{result['split']} {result['model_id']}: max |diff| {worst:.2e}")
    for result in report.retrained:
        verdict = "identical" if result["identical"] else "DIFFERENT"
        mode = result.get("reproducibility", "native")
        print(f"  retrained {result['config']} run {result['run_id']} ({mode} mode): "
              f"{result['checkpoints']} checkpoints {verdict}")
    if args.json:
        hub = {"repo": source.repo, "revision": source.revision} if source.repo is not None else {}
        from zoo.storage.atomic import write_text_atomic

        write_text_atomic(args.json, json.dumps({**report.__dict__, **hub}, indent=2, default=str))
    if len(report.problems) == 1:  # one problem, one line
        raise CommandError(report.problems[0])
    if not report.ok:
        raise CommandError(f"{len(report.problems)} problems:\n  " + "\n  ".join(report.problems))
    print("ok")
    return 0


def _publish(args: argparse.Namespace) -> int:
    from zoo.hub.publish import PublishError, publish

    try:
        published = publish(args.folder, args.repo, private=args.private, revision=args.revision)
    except PublishError as error:
        raise CommandError(str(error)) from None
    print(f"published {args.folder} -> {args.repo}")
    print("\n".join(f"  {line}" for line in published.lines()))
    return 0


def _listing() -> str:
    """The bundled specs and the zoo families, for `nfnzoo --help`."""
    from zoo.families import list_families
    from zoo.planning.spec_files import SPECS_DIR

    specs = ", ".join(sorted(p.stem for p in SPECS_DIR.glob("*.yaml")))
    return f"bundled specs (nfnzoo generate NAME): {specs}\nzoo families: {', '.join(list_families())}"


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= `minimum` (Ray reads 0 CPUs as "all", so it is refused)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def _positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _gpu_share(text: str) -> float:
    """An argparse type: a GPU share, a number in (0, 64]."""
    value = _positive_float(text)
    if value > 64:
        raise argparse.ArgumentTypeError(f"must be at most 64 GPUs, got {text}")
    return value


def register(subparsers) -> Callable[[], str]:
    p = subparsers.add_parser("generate", help="train a zoo from a spec with Ray, then pack it")
    p.add_argument("spec", help="a spec file, or the name of a bundled spec (e.g. cnn-mnist)")
    p.add_argument("--profile", help="a profile of the spec, e.g. tiny (default: the full spec)")
    p.add_argument("--out", default=None, help="output folder (default: runs/<config>)")
    p.add_argument("--num-cpus", type=_at_least(1), default=None,
                   help="CPUs of the local Ray instance (default: all of this machine's)")
    p.add_argument("--address", default=None,
                   help="join this Ray cluster, HOST:PORT or auto (or set RAY_ADDRESS); its nodes need share no "
                        "folder with this one: data and checkpoints travel through Ray")
    p.add_argument("--runs-per-trial", type=_at_least(1), default=None,
                   help="runs trained by one Ray trial (default: spread over the workers, at most 256)")
    p.add_argument("--max-failures", type=_at_least(0), default=2,
                   help="times a failed trial (an error, or its node lost) is started again for what it had not "
                        "sent (default: 2)")
    p.add_argument("--device", default=None,
                   help="where populations train: auto (default; CUDA when the Ray cluster has GPUs), cpu, cuda, "
                        "cuda:N (or set NFNZOO_DEVICE)")
    p.add_argument("--gpus-per-trial", type=_gpu_share, default=None,
                   help="GPUs a trial asks Ray for, fractions to share one (e.g. 0.25); implies --device cuda "
                        "(default: an equal share of the cluster's GPUs among its CPUs, at most 1)")
    p.add_argument("--population-size", type=_at_least(1), default=None,
                   help="runs trained together in one process (default: the family's choice for the device)")
    p.add_argument("--rng", choices=["torch-generator", "counter-v1"], default=None,
                   help="per-step draws (the spec's training.rng; default: what the spec says, torch-generator "
                        "if it says nothing): counter-v1 draws a whole population's batch orders, crops and "
                        "dropout masks on its device; it changes the spec's hash and run ids")
    p.add_argument("--reproducibility", choices=REPRODUCIBILITY_MODES, default=None,
                   help="the spec's training.reproducibility (default: what the spec says, native if it says "
                        "nothing): portable pins ATen, MKL, oneDNN and NumPy to x86-64-v3 so that any x86-64 "
                        "server makes the same bytes; it changes the spec's hash and run ids")
    p.add_argument("--shard-mb", type=_positive_float, default=256, help="target shard size in MiB (default: 256)")
    p.add_argument("--no-pack", action="store_true", help="stage checkpoints only")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="pack even if some planned checkpoints are missing (the command still fails)")
    p.add_argument("--dry-run", action="store_true", help="print the plan's size and stop")
    p.add_argument("--allow-extends-anywhere", action="store_true",
                   help="let the spec's `extends` name a file outside its own folder tree (by default only "
                        "bundled specs and files beside or below the spec)")
    p.set_defaults(handler=lambda a: _generate(_default_out(a)))

    p = subparsers.add_parser("pack", help="pack a staging folder into Parquet shards, card and manifest")
    p.add_argument("folder", help="the folder `nfnzoo generate` wrote (with specs/ and staging/)")
    p.add_argument("--config", action="append", help="pack only this config (repeatable)")
    p.add_argument("--shard-mb", type=_positive_float, default=256, help="target shard size in MiB")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="pack even if some planned checkpoints are not staged (the zoo is marked incomplete)")
    p.set_defaults(handler=_pack)

    p = subparsers.add_parser("info", help="counts, accuracy distribution and architecture of a packed zoo")
    _add_data_arguments(p)
    p.add_argument("--config", default=None, help="the config to describe (default: the zoo's only one)")
    p.add_argument("--by", default=None, metavar="COLUMN",
                   help="also break the final epoch's accuracy down by a metadata column, e.g. activation")
    p.add_argument("--plot", default=None, metavar="PNG", help="also write a histogram of the final epoch's accuracy")
    p.set_defaults(handler=_info)

    p = subparsers.add_parser("verify", help="check shards against the manifest; optionally recompute metrics")
    _add_data_arguments(p)
    p.add_argument("--full", action="store_true",
                   help="check every shard's sha256 (what the dataset hash and the Hub rest on), not only its fast "
                        "xxh3 checksum (what every load checks; `publish` always checks sha256)")
    p.add_argument("--recompute", type=int, default=0, metavar="N", help="re-evaluate N random checkpoints")
    p.add_argument("--retrain", type=int, default=0, metavar="N",
                   help="train N random runs again and compare their checkpoints bit for bit (same machine: identical)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed for picking the checkpoints to recompute or runs to retrain")
    p.add_argument("--json", default=None, help="also write the report as JSON")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="accept a zoo packed with fewer checkpoints than planned (a warning, not a failure)")
    p.set_defaults(handler=_verify)

    p = subparsers.add_parser(
        "publish", help="upload a packed zoo to a Hugging Face Hub dataset repo as one tagged commit",
        description="Verifies the folder, then sends one commit: its shards, card and manifest, and the\n"
                    "deletion of the repo's shards of its configs that its manifest does not list. Configs\n"
                    "already in the repo are kept (card and manifest merged; the folder's version of a\n"
                    "config wins). The commit is tagged v<package version>-<content hash[:8]>; pin it with\n"
                    "load_dataset(..., revision=TAG) or --data ORG/NAME@TAG.")
    p.add_argument("folder", help="a packed zoo folder; it is verified before anything is uploaded")
    p.add_argument("--repo", required=True, help="ORG/NAME of the dataset repo")
    p.add_argument("--private", action="store_true", help="create the repo as private (if it does not exist yet)")
    p.add_argument("--revision", default=None,
                   help="branch to commit to, created if missing (default: the repo's default branch)")
    p.set_defaults(handler=_publish)

    from zoo.imports.commands import register as register_imports  # imports no torch

    register_imports(subparsers)
    return _listing


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The zoo to read, as a positional FOLDER or as `--data` (as `bench run` spells it)."""
    from zoo.hub.resolve import DATA_HELP  # imports no Hub client

    parser.add_argument("folder", nargs="?", default=None, metavar="FOLDER", help=DATA_HELP)
    parser.add_argument("--data", default=None, metavar="DATA", help="the same as FOLDER, spelled as in `bench run`")


def _default_out(args: argparse.Namespace) -> argparse.Namespace:
    if args.out is None:
        args.out = str(Path("runs") / Path(args.spec).stem)
    return args
