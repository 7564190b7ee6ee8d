"""Planning estimates of a spec: size, parameters, training FLOPs, bytes, without training.

They are computed from the spec by arithmetic, never by building a member or listing the plan.
The member's parameters come from `Family.member_size`.
The runs and their FLOPs come from `zoo.planning.plan_size`.
It groups runs by the hyperparameters their FLOPs depend on.
So a dry run of the largest plan a spec may declare takes the time and memory of a small one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from zoo.families import create_family
from zoo.validation.inputs import InputError, read_json_file
from zoo.planning.plan_size import plan_size
from zoo.planning.spec import ZooSpec

# written by benchmarks.perf.generation --save
THROUGHPUT_FILE = Path(__file__).resolve().parents[1] / "throughput.json"
MAX_THROUGHPUT_BYTES = 2**20  # a few entries per device
ROW_OVERHEAD_BYTES = 2048  # safetensors header (~1.4 KB for a small CNN) + Parquet framing + metadata columns


@dataclasses.dataclass(frozen=True)
class Estimate:
    runs: int
    checkpoints: int
    params: int  # per checkpoint
    training_flops: float  # all runs: training and checkpoint evaluation
    dataset_bytes: int  # the packed dataset, approximately
    device_hours: dict[str, float] = dataclasses.field(default_factory=dict)  # "cpu" (core-hours), "cuda" ...
    sources: dict[str, str] = dataclasses.field(default_factory=dict)  # device -> the rate, where and when measured
    inexact: str | None = None  # why runs and checkpoints are upper bounds (`PlanSize.inexact`), None if exact

    def lines(self) -> list[str]:
        lines = [f"runs: {self.runs:,}; checkpoints: {self.checkpoints:,}",
                 f"parameters per checkpoint: {self.params:,}",
                 f"training FLOPs (training + evaluation): {self.training_flops:.3e}",
                 f"expected dataset size: {self.dataset_bytes / 1e9:.3f} GB"]
        names = {"cpu": "core-hours", "cuda": "GPU-hours"}
        for device, hours in self.device_hours.items():
            lines.append(f"estimated {names.get(device, device + '-hours')}: {hours:,.1f} "
                         f"({self.sources.get(device, 'at the throughput measured by make bench-generation')})")
        if not self.device_hours:
            lines.append("estimated hours: no measured throughput for this family (run make bench-generation --save)")
        if self.inexact:
            lines.append(f"runs and checkpoints are upper bounds: {self.inexact}")
        return lines


def estimate(spec: ZooSpec) -> Estimate:
    family = create_family(spec.family)
    size = plan_size(spec, family.FLOPS_HPARAMS)
    params = family.member_size(spec.architecture).parameters
    checkpoints = size.checkpoints
    flops = sum(count * family.run_flops(spec, dict(group)) for group, count in size.groups.items())
    measured = {device: rates[spec.family] for device, rates in measured_throughput().items() if spec.family in rates}
    hours = {device: flops / rate["flops_per_second"] / 3600 for device, rate in measured.items()}
    return Estimate(size.runs, checkpoints, params, flops, checkpoints * (4 * params + ROW_OVERHEAD_BYTES), hours,
                    {device: source(rate) for device, rate in measured.items()}, size.inexact)


def source(rate: dict) -> str:
    """How a recorded rate was obtained: its GFLOP/s, where, with which draws, and when."""
    parts = [f"at {rate['flops_per_second'] / 1e9:,.1f} GFLOP/s"]
    parts += [str(rate[key]) if key != "rng" else f"training.rng {rate[key]}"
              for key in ("where", "rng") if key in rate]
    parts.append(f"measured {rate.get('measured', 'at an unrecorded date')} by make bench-generation")
    return ", ".join(parts)


def measured_throughput(path: Path | None = None) -> dict[str, dict[str, dict]]:
    """device -> family -> {"flops_per_second", "measured"}, as the generation benchmark saved it."""
    path = path or THROUGHPUT_FILE
    if not path.exists():
        return {}
    data = read_json_file(path, MAX_THROUGHPUT_BYTES, strict=True, what="throughput file")
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of device -> family -> rates")
    rates = {device: rates for device, rates in data.items() if not device.startswith("_")}
    if not all(isinstance(by_family, dict) for by_family in rates.values()):
        raise InputError(f"{path}: expected a mapping of device -> family -> rates")
    return rates
