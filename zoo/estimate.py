"""Planning estimates of a spec: size, parameters, training FLOPs, bytes, without training."""

from __future__ import annotations

import dataclasses

from zoo.families import create_family
from zoo.plan import plan_runs
from zoo.spec import ZooSpec

ROW_OVERHEAD_BYTES = 2048  # safetensors header (~1.4 KB for a small CNN) + Parquet framing + metadata columns


@dataclasses.dataclass(frozen=True)
class Estimate:
    runs: int
    checkpoints: int
    params: int  # per checkpoint
    training_flops: float  # all runs: training and checkpoint evaluation
    dataset_bytes: int  # the packed dataset, approximately

    def lines(self) -> list[str]:
        return [f"runs: {self.runs:,}; checkpoints: {self.checkpoints:,}",
                f"parameters per checkpoint: {self.params:,}",
                f"training FLOPs (training + evaluation): {self.training_flops:.3e}",
                f"expected dataset size: {self.dataset_bytes / 1e9:.3f} GB"]


def estimate(spec: ZooSpec) -> Estimate:
    family = create_family(spec.family)
    runs = plan_runs(spec)
    params = family.weight_space(spec.architecture).num_params
    checkpoints = sum(len(r.checkpoints) for r in runs)
    flops = sum(family.run_flops(spec, run.hparams) for run in runs)
    return Estimate(len(runs), checkpoints, params, flops, checkpoints * (4 * params + ROW_OVERHEAD_BYTES))
