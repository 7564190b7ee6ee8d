"""Small generations whose bytes the repository records (`portable_bytes.json`), and the script that
makes them: `python tests/zoo/portable_probe.py [--mode portable|native] [--record]`.

For each bundled spec's `tiny` profile (CNN, SIREN, transformer) under each draw scheme
(`training.rng`: torch-generator, counter-v1), the first `RUNS` runs of the plan are trained with
`zoo.training.worker.train_runs` (no Ray, one process) and every staged checkpoint file (a
safetensors file: weights, metrics, metadata) is hashed. One generation trains on colour images
converted to grey (`cnn-cifar10-gs`, the `cifar10_gs` source): its `cifar10/cifar10.npz` is a
seeded synthetic stand-in (`synthetic_cifar10`) written into a temporary `NFNZOO_DATA` folder, so
the conversion's bits reach the recorded bytes on a machine without CIFAR-10. It prints the result as JSON: {generation:
{model_id: sha256}}. Run it in the portable mode's environment (`zoo.training.reproducibility`);
the test (`tests/zoo/test_portable_mode.py`) starts it so, from a hostile environment, and compares
with the record; `--record` rewrites the record (only after a deliberate change of the training code
or of the pinned library versions, with the processor named in the record's `recorded_on`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Iterator

RECORD = Path(__file__).with_name("portable_bytes.json")
SCHEMES = ("torch-generator", "counter-v1")
# spec -> the draw schemes it is made under; the colour generation takes one (the conversion is the point)
GENERATIONS = {"cnn-mnist": SCHEMES, "inr-mnist": SCHEMES, "transformer-mnist": SCHEMES,
               "cnn-cifar10-gs": ("torch-generator",)}
SPECS = tuple(GENERATIONS)
COLOUR_SPECS = ("cnn-cifar10-gs",)  # trained on `synthetic_cifar10`, never on a real CIFAR-10
RUNS = 2  # runs of each plan: every checkpoint epoch of each, a few seconds a generation on one core
# the synthetic CIFAR-10's sizes: the `tiny` profile's 1,000 validation + 2,000 training images, 1,000 test
SYNTHETIC_SIZES = {"train": 3000, "test": 1000}


def synthetic_cifar10(root: Path, seed: int = 0) -> Path:
    """Writes `root`/cifar10/cifar10.npz laid out as CIFAR-10's local copy (uint8 (N, 32, 32, 3) images,
    labels 0-9) with uniformly drawn pixels and labels: every colour is equally likely, so the few
    that a float conversion rounds apart by processor are among its 4M pixels. The draws are
    integers from a seeded PCG64, the same bytes on any processor."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arrays = {}
    for split, count in SYNTHETIC_SIZES.items():
        arrays[f"x_{split}"] = rng.integers(0, 256, (count, 32, 32, 3), dtype="uint8")
        arrays[f"y_{split}"] = rng.integers(0, 10, count, dtype="uint8")
    path = root / "cifar10" / "cifar10.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        np.savez(file, **arrays)
    return path


@contextlib.contextmanager
def synthetic_data(name: str) -> Iterator[None]:
    """For a colour spec, `NFNZOO_DATA` names a temporary folder holding `synthetic_cifar10` while it trains."""
    if name not in COLOUR_SPECS:
        yield
        return
    previous = os.environ.get("NFNZOO_DATA")
    with tempfile.TemporaryDirectory() as root:
        synthetic_cifar10(Path(root))
        os.environ["NFNZOO_DATA"] = root
        try:
            yield
        finally:
            if previous is None:
                del os.environ["NFNZOO_DATA"]
            else:
                os.environ["NFNZOO_DATA"] = previous


def generate(mode: str, specs: tuple[str, ...] = SPECS) -> dict[str, dict[str, str]]:
    from zoo.planning.plan import plan_runs
    from zoo.planning.spec import load_spec
    from zoo.storage.staging import Staging
    from zoo.training.worker import train_runs

    found = {}
    for name in specs:
        if name not in GENERATIONS:
            raise SystemExit(f"portable_probe: unknown spec {name!r}; expected one of {', '.join(SPECS)}")
        for scheme in GENERATIONS[name]:
            spec = load_spec(name, "tiny")
            spec = dataclasses.replace(spec, training=dataclasses.replace(spec.training, rng=scheme,
                                                                          reproducibility=mode))
            with tempfile.TemporaryDirectory() as folder, synthetic_data(name):
                staging = Staging(Path(folder))
                train_runs(spec, plan_runs(spec)[:RUNS], staging)
                found[f"{name}/tiny/{scheme}"] = {
                    path.stem: hashlib.sha256(path.read_bytes()).hexdigest()
                    for path in sorted(Path(folder).rglob("*.safetensors"))}
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("portable", "native"), default="portable")
    parser.add_argument("--record", action="store_true", help="rewrite portable_bytes.json with what this run makes")
    parser.add_argument("--specs", default=",".join(SPECS), help="comma-separated bundled specs (default: all of them)")
    args = parser.parse_args()
    found = generate(args.mode, tuple(args.specs.split(",")))
    if args.record:
        from zoo.distributed.machine import describe_machine
        from zoo.training.reproducibility import record

        RECORD.write_text(json.dumps({"recorded_on": describe_machine()["cpu_model"], "runs_per_plan": RUNS,
                                      "reproducibility": record(args.mode), "generations": found},
                                     indent=1, sort_keys=True) + "\n")
    json.dump(found, sys.stdout, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
