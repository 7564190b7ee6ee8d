"""Staging throughput: checkpoints sent through Ray to the driver, against written where they were made.

`nfnzoo generate` stages every checkpoint on the driver (`zoo.distributed.driver`,
`zoo.distributed.trial`). A trial on any node encodes it (`encode_staged`). Ray carries the bytes
to the driver. The driver checks the checksum and writes the file (`Staging.write_payload`,
fsynced). So no folder has to be shared by every node.

This measures checkpoints per second both ways, in one run. The size is one paper-scale trial: 256
runs of a bundled spec's full profile, with its real weight shapes.

`local`: the trial's own process encodes and writes each checkpoint (`Staging.write`).

`through Ray`: a generator task encodes and yields them. The driver checks and writes them
(`PayloadWriter`). It uses eight writing threads, so that fsyncs overlap, as `generate` does.

The ratio is through-Ray over local. It then sets the driver's rate beside what one trial makes.
That is the family's FLOPs per run over the measured population throughput of
`zoo/throughput.json`. It is read on one CPU core and on one GPU. So it says how many trials at
once one driver keeps up with. With ``--address`` the task runs on that cluster. It runs on another
node when the driver's own has no free CPU.

Run:

    python -m benchmarks.perf.staging [--spec transformer-mnist] [--runs 256] [--address HOST:PORT]"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

import torch

from zoo.families import create_family
from zoo.planning.plan import plan_runs
from zoo.storage.record import CheckpointRecord
from zoo.planning.spec import ZooSpec, load_spec, spec_from_data
from zoo.planning.spec_files import SPECS_DIR
from zoo.storage.staging import PayloadWriter, Staging, encode_staged

THROUGHPUT = Path(__file__).resolve().parents[2] / "zoo" / "throughput.json"


def trial_records(spec: ZooSpec, runs: int, seed: int = 0) -> list[CheckpointRecord]:
    """One paper-scale trial's checkpoints: `runs` planned runs, each of its planned checkpoints.

    They have the family's real tensor names and shapes. Values are seeded random: bytes, not training."""
    family = create_family(spec.family)
    generator = torch.Generator().manual_seed(seed)
    records = []
    for run in plan_runs(spec)[:runs]:
        shapes = {name: tensor.shape
                  for name, tensor in family.build(spec.architecture, run.hparams).state_dict().items()}
        for checkpoint in run.checkpoints:
            weights = {name: torch.randn(shape, generator=generator) for name, shape in shapes.items()}
            records.append(CheckpointRecord(
                model_id=checkpoint.model_id, run_id=run.run_id, family=spec.family, config=spec.name,
                epoch=checkpoint.epoch, seed=run.seed, hparams=run.hparams, metrics={"test_accuracy": 0.5},
                status="ok", architecture=spec.architecture, weights=weights))
    return records


def write_locally(records: list[CheckpointRecord], folder: Path) -> float:
    """Seconds to encode and write every record into a staging folder, in this process."""
    staging = Staging(folder)
    start = time.perf_counter()
    for record in records:
        staging.write(record)
    return time.perf_counter() - start


def _sender(spec_data: dict, runs: int):
    """The Ray side: builds the records (not timed), then yields ("ready",) and each encoded checkpoint."""
    records = trial_records(spec_from_data(spec_data), runs)
    yield ("ready", len(records))
    for record in records:
        yield ("checkpoint", record.model_id, encode_staged(record))


def send_through_ray(spec: ZooSpec, runs: int, folder: Path) -> tuple[float, str]:
    """Seconds from the trial's first checkpoint to the driver's last write, and the node that sent."""
    import ray

    writer = PayloadWriter(Staging(folder))  # as the driver stages them
    sender = ray.remote(_sender).options(num_cpus=1, num_returns="streaming", max_retries=0)
    stream = sender.remote(spec.to_data(), runs)
    start = None
    for reference in stream:
        event = ray.get(reference)
        if event[0] == "ready":
            start = time.perf_counter()
        else:
            writer.submit(event[1], event[2])
            writer.done()
    failed = [error for _, _, error in writer.done(wait_all=True) if error is not None]
    writer.close()
    if failed:
        raise failed[0]
    return time.perf_counter() - start, "cluster" if ray.nodes() and len(ray.nodes()) > 1 else "local instance"


def checkpoints_per_second_made(spec: ZooSpec, runs: int) -> dict[str, float]:
    """What one trial makes, by device: checkpoints per second from `zoo/throughput.json`."""
    family = create_family(spec.family)
    planned = plan_runs(spec)[:runs]
    flops = sum(family.run_flops(spec, run.hparams) for run in planned)
    checkpoints = sum(len(run.checkpoints) for run in planned)
    rates = json.loads(THROUGHPUT.read_text())
    return {device: checkpoints * rates[device][spec.family]["flops_per_second"] / flops
            for device in ("cpu", "cuda") if spec.family in rates.get(device, {})}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="transformer-mnist",
                        help="a bundled spec; its full profile (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=256, help="runs in the trial (default: 256, the most a trial gets)")
    parser.add_argument("--address", default=None, help="a Ray cluster to join (default: a local instance)")
    args = parser.parse_args(argv)
    from zoo.distributed.ray_session import connected

    spec = load_spec(SPECS_DIR / f"{args.spec}.yaml", None)
    records = trial_records(spec, args.runs)
    size = sum(len(encode_staged(r)) for r in records[:8]) / min(8, len(records))
    digest = hashlib.sha256(b"".join(encode_staged(r) for r in records[:4])).hexdigest()[:12]
    with tempfile.TemporaryDirectory(prefix="nfnzoo-staging-") as scratch:
        local_s = write_locally(records, Path(scratch) / "local")
        with connected(args.address, num_cpus=2):
            ray_s, where = send_through_ray(spec, args.runs, Path(scratch) / "ray")
    n = len(records)
    local_rate, ray_rate = n / local_s, n / ray_s
    print(f"{spec.name}: one trial of {args.runs} runs = {n:,} checkpoints of {size / 1024:.1f} KiB "
          f"({n * size / 2**20:.0f} MiB; first bytes sha256 {digest})")
    print(f"  local write (encode + fsync, trial process) {local_rate:8.0f} checkpoints/s "
          f"{local_rate * size / 2**20:7.1f} MiB/s")
    print(f"  through Ray to the driver ({where})     {ray_rate:8.0f} checkpoints/s "
          f"{ray_rate * size / 2**20:7.1f} MiB/s")
    print(f"  ratio through Ray / local: {ray_rate / local_rate:.2f}")
    for device, made in checkpoints_per_second_made(spec, args.runs).items():
        what = "one CPU core" if device == "cpu" else "one H200"
        print(f"  one trial on {what} makes {made:.3g} checkpoints/s: the driver keeps up with "
              f"{ray_rate / made:,.0f} such trials at once")


if __name__ == "__main__":
    main()
