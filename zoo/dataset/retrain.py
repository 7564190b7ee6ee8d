"""Re-training a sample of a packed zoo's runs and comparing them with the stored checkpoints.

`nfnzoo verify FOLDER --retrain N` trains N seeded-random runs of each config again. They come from the
spec in the manifest, through the family's population trainer, on the CPU, as `nfnzoo generate` trains
them there. Every checkpoint they emit is compared with the packed row of the same model id. Weights
must match bit for bit, metrics exactly, and status must be equal.

This is the cheap check of a claim: regenerating a zoo on the same machine gives the same bytes, and so
the same dataset hash. Populations are bitwise independent of their composition and size (README,
"Reproducibility"). So a run trained in a population of its own must reproduce its packed checkpoints
exactly.

A zoo made in the portable mode (`zoo.training.reproducibility`) is retrained in that mode. The command
runs itself again in the mode's environment. So any x86-64-v3 processor must reproduce it.

On another CPU (another SIMD instruction set) or on CUDA the bits may differ. The report then names the
first differing tensor and its largest difference. The manifest may record the machines that trained the
zoo (`zoo.distributed.machine`). If their ATen or oneDNN instruction set is not this machine's, the
report says so, since that explains the difference.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from zoo.families import create_family
from zoo.planning.plan import plan_runs
from zoo.planning.spec import spec_from_data


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def retrain_runs(folder: Path, name: str, entry: dict, count: int, seed: int) -> tuple[list[dict], list[str]]:
    """Retrains `count` runs of config `name`; returns one result per run and the problems found."""
    from zoo.loader import load_split  # torch-heavy; only when retraining

    spec = spec_from_data(entry["spec"], f"{folder}/manifest.json:{name}")
    mode = spec.training.reproducibility
    if mode == "portable":  # `nfnzoo verify --retrain` runs itself in the mode's environment first
        from zoo.training.reproducibility import process_problem

        problem = process_problem()
        if problem is not None:
            return [], [f"{name}: made in the portable mode, which this process does not compute in: {problem}; "
                        "`nfnzoo verify --retrain` sets the mode's environment itself"]
    family = create_family(spec.family)
    stored: dict[str, tuple[object, int]] = {}  # model_id -> (loaded split, row)
    packed_runs: set[str] = set()
    for split in sorted(entry["splits"]):
        loaded = load_split(folder, name, split, check=False)  # verify has just checked every shard
        for row, model_id in enumerate(loaded.metadata["model_id"]):
            stored[model_id] = (loaded, row)
        packed_runs.update(loaded.metadata["run_id"])
    planned = {run.run_id: run for run in plan_runs(spec)}
    packed_runs = sorted(packed_runs)
    rng = np.random.default_rng(seed)
    picked = [str(r) for r in rng.choice(packed_runs, size=min(count, len(packed_runs)), replace=False)]
    unplanned = [run_id for run_id in picked if run_id not in planned]
    if unplanned:
        return [], [f"{name}: packed run {run_id} is not in the plan of the manifest's spec (was the spec edited?)"
                    for run_id in unplanned]
    chosen = [planned[run_id] for run_id in picked]
    data = family.load_data(spec)
    emitted: dict[str, list] = {run.run_id: [] for run in chosen}
    family.train_population(spec, chosen, data, lambda run, result: emitted[run.run_id].append(result))

    results, problems = [], []
    for run in chosen:
        by_id = {}
        for result in emitted[run.run_id]:
            checkpoint = next(c for c in run.checkpoints
                              if c.best == result.best and (result.best or c.epoch == result.epoch))
            by_id[checkpoint.model_id] = result
        differences = []
        for model_id, result in sorted(by_id.items()):
            if model_id not in stored:
                continue  # a checkpoint the packed zoo does not hold (an incomplete pack)
            loaded, row = stored[model_id]
            packed = loaded.weights.state_dict(row)
            for key, tensor in result.weights.items():
                if not torch.equal(packed[key], tensor):
                    gap = float((packed[key].double() - tensor.double()).abs().max())
                    differences.append(f"{model_id}: {key} differs (max |difference| {gap:.3g})")
            metadata = loaded.metadata.iloc[row]
            for key, value in result.metrics.items():
                if not _same(float(metadata[key]), float(value)):
                    differences.append(f"{model_id}: {key} stored {float(metadata[key])!r}, retrained {float(value)!r}")
            if metadata["status"] != result.status:
                differences.append(f"{model_id}: status stored {metadata['status']!r}, retrained {result.status!r}")
        results.append({"config": name, "run_id": run.run_id, "checkpoints": len(by_id), "reproducibility": mode,
                        "identical": not differences, "differences": differences[:5]})
        problems += [f"{name}: retrained run {run.run_id}: {d}" for d in differences[:3]]
    if problems and entry.get("machines"):  # the likely reason, where the manifest records the trainers
        from zoo.distributed.machine import describe_machine, isa_note

        note = isa_note(entry["machines"], describe_machine())
        if note is not None:
            problems.append(f"{name}: {note}")
            for result in results:
                if not result["identical"]:
                    result["note"] = note
    return results, problems
