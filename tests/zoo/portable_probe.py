"""Small generations whose bytes the repository records (`portable_bytes.json`), and the script that
makes them: `python tests/zoo/portable_probe.py [--mode portable|native] [--record]`.

For each bundled spec's `tiny` profile (CNN, SIREN, transformer) under each draw scheme
(`training.rng`: torch-generator, counter-v1), the first `RUNS` runs of the plan are trained with
`zoo.training.worker.train_runs` (no Ray, one process) and every staged checkpoint file (a
safetensors file: weights, metrics, metadata) is hashed. It prints the result as JSON: {generation:
{model_id: sha256}}. Run it in the portable mode's environment (`zoo.training.reproducibility`);
the test (`tests/zoo/test_portable_mode.py`) starts it so, from a hostile environment, and compares
with the record; `--record` rewrites the record (only after a deliberate change of the training code
or of the pinned library versions, with the processor named in the record's `recorded_on`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import tempfile
from pathlib import Path

RECORD = Path(__file__).with_name("portable_bytes.json")
SPECS = ("cnn-mnist", "inr-mnist", "transformer-mnist")
SCHEMES = ("torch-generator", "counter-v1")
RUNS = 2  # runs of each plan: every checkpoint epoch of each, a few seconds a generation on one core


def generate(mode: str, specs: tuple[str, ...] = SPECS) -> dict[str, dict[str, str]]:
    from zoo.planning.plan import plan_runs
    from zoo.planning.spec import load_spec
    from zoo.storage.staging import Staging
    from zoo.training.worker import train_runs

    found = {}
    for name in specs:
        for scheme in SCHEMES:
            spec = load_spec(name, "tiny")
            spec = dataclasses.replace(spec, training=dataclasses.replace(spec.training, rng=scheme,
                                                                          reproducibility=mode))
            with tempfile.TemporaryDirectory() as folder:
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
    parser.add_argument("--specs", default=",".join(SPECS), help="comma-separated bundled specs (default: all three)")
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
