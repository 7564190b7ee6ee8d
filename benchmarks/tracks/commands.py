"""`nfnzoo track ...`: list the tracks, run one.

Usage:

    nfnzoo track list
    nfnzoo track run NAME [--profile tiny|default|...] [--seeds 42,40,44 or 0-4] [--workers N] [--out DIR]
        [--address HOST:PORT] [--gpus-per-job G]

A run is resumable. Its finished jobs are kept under DIR/jobs/. The same command again runs only
what is missing, or what a changed setting invalidated.

The jobs are Ray tasks (`benchmarks.jobs`). They run on a local instance of `--workers` CPUs, two
by default; `--workers 1` runs them in this process. Or they run on the cluster at `--address`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from zoo.cli import CommandError


def _seeds(text: str | None, default: tuple[int, ...]) -> list[int]:
    """The track's default seeds, or `--seeds` through the bench commands' bounded parser."""
    from benchmarks.command_arguments import parse_seeds

    return list(default) if text is None else parse_seeds(text)


def list_command(args: argparse.Namespace) -> int:
    from benchmarks.tracks.registry import create_track, list_tracks

    for name in list_tracks():
        track = create_track(name)
        print(f"{name}: {track.description}; profiles {', '.join(sorted(track.PROFILES))}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    from benchmarks.command_arguments import check_workers
    from benchmarks.jobs import stderr_printer
    from benchmarks.tracks.registry import create_track
    from zoo.registry import UnknownNameError

    try:
        track = create_track(args.name)
        track.profile(args.profile)
    except (UnknownNameError, ValueError) as error:
        raise CommandError(str(error)) from None
    seeds = _seeds(args.seeds, track.DEFAULT_SEEDS)
    check_workers(args.workers)
    start = time.perf_counter()
    try:
        out = Path(args.out) if args.out is not None else Path("runs") / f"track-{track.name}-{args.profile}"
        written = track.run(args.profile, seeds, out,
                            progress=stderr_printer(f"track {track.name}"), workers=args.workers,
                            address=args.address, gpus_per_job=args.gpus_per_job)
    except (ValueError, OSError, RuntimeError) as error:
        raise CommandError(str(error)) from None
    for path in written:
        print(path)
    print(f"track {track.name} ({args.profile}, seeds {seeds}): {len(written)} results files in "
          f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `nfnzoo track list` and `nfnzoo track run`."""
    from benchmarks.command_arguments import add_ray_arguments

    track = subparsers.add_parser("track", help="rerun a benchmark track (a study) with one command")
    commands = track.add_subparsers(dest="track_command", required=True, metavar="ACTION")
    listing = commands.add_parser("list", help="the registered tracks and their profiles")
    listing.set_defaults(handler=list_command)
    run = commands.add_parser("run", help="run a track's profile over seeds; results in the harness's format")
    run.add_argument("name", help="a registered track, e.g. norga")
    run.add_argument("--profile", default="default", help="the track's profile (default: default)")
    run.add_argument("--seeds", default=None, help="comma-separated seeds (default: the track's, e.g. 42,40,44)")
    run.add_argument("--out", default=None,
                     help="folder for the results files and plots (a re-run resumes it; default: "
                          "runs/track-NAME-PROFILE)")
    add_ray_arguments(run, "jobs", workers=min(2, os.cpu_count() or 1))  # a track is tens of jobs
    run.set_defaults(handler=run_command)
