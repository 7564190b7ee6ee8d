"""How `nfnzoo generate` (and `verify --retrain` of a portable zoo) enters the portable mode.

The mode is `zoo.training.reproducibility`'s. This module holds what the mode refuses before anything
heavy starts. It also re-runs the same command in a child process with the pinned environment.

A processor without x86-64-v3 is refused before NumPy is imported. A GPU device is refused before the
child and Ray start. Each refusal is one line (`CommandError`).
"""

from __future__ import annotations

import argparse
import os
import sys

from zoo.cli import CommandError


def refuse_an_unpinnable_processor(args: argparse.Namespace) -> None:
    """A portable generation on a processor without x86-64-v3 is refused in one line.

    The refusal comes before NumPy is imported. Validating the spec imports NumPy, and below NumPy's
    baseline that import fails with a traceback. The mode is read from the spec file alone
    (`zoo.planning.declared`), and only when the processor lacks x86-64-v3.
    """
    from zoo.training.reproducibility import processor_problem

    if args.dry_run or args.reproducibility == "native":
        return
    problem = processor_problem()
    if problem is None:
        return
    from zoo.planning.declared import declared_mode

    try:
        mode = args.reproducibility or declared_mode(args.spec, args.profile,
                                                     allow_outside_extends=args.allow_extends_anywhere)
    except (FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from None
    if mode == "portable":
        raise CommandError(problem)


def refuse_a_gpu(spec_name: str, args: argparse.Namespace) -> None:
    """The portable mode trains on the CPU only, so a GPU device is refused in one line.

    So is `auto` on a machine with a GPU. The refusal comes before the pinned child process and Ray
    start (`portable_device_problem`).
    """
    import torch

    from zoo.training.device import portable_device_problem

    local = not args.address and not os.environ.get("RAY_ADDRESS")  # a cluster's GPUs: the driver says
    problem = portable_device_problem(spec_name, args.device, local and torch.cuda.is_available())
    if problem is not None:
        raise CommandError(problem)


def portable_child(args: argparse.Namespace) -> int | None:
    """Under the portable mode, refuses a processor without x86-64-v3 and re-runs this command pinned.

    The mode is `zoo.training.reproducibility`'s. The same command runs again in a child process with
    the pinned environment, and its exit status is returned. Returns None when this process has that
    environment already (it is the child).
    """
    import signal
    import subprocess

    from zoo.training.reproducibility import environment_problem, portable_environment, processor_problem

    problem = processor_problem()
    if problem is not None:
        raise CommandError(problem)
    if environment_problem(os.environ) is None:
        return None
    print("portable mode: running again with " + " ".join(f"{k}={v}" for k, v in portable_environment({}).items()),
          file=sys.stderr, flush=True)
    from zoo.named_import import python_command

    child = subprocess.Popen(python_command("-m", "zoo.cli", *args.argv), env=portable_environment(os.environ))
    forward = lambda signum, frame: child.send_signal(signum)  # noqa: E731 (SIGTERM reaches the child too)
    previous = signal.signal(signal.SIGTERM, forward)
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:  # the child got the SIGINT too (one process group): it stops cleanly
                continue
    finally:
        signal.signal(signal.SIGTERM, previous)
