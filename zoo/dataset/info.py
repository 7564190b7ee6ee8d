"""A human summary of a packed zoo: counts, accuracy distribution, architecture.

The manifest is read through `zoo.storage.folder.read_manifest`: capped, structure checked, shard paths
confined. What only this summary prints (run counts, architectures) is checked here. So a hand-edited
manifest gets one line naming the key.

What it prints is made visible (`zoo.validation.text.visible`). A status or name holding an escape
sequence or a bidi override is shown as its escapes, never acted on by the terminal.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from zoo.families import create_family
from zoo.storage.folder import read_manifest, resolve_config
from zoo.validation.inputs import InputError
from zoo.storage.integrity import check_declared_sizes, read_named
from zoo.planning.spec import SPLIT_NAMES
from zoo.validation.text import visible

BARS = " ▁▂▃▄▅▆▇█"


def shown(lines: list[str]) -> str:
    """The summary's lines for a terminal, made visible (`zoo.validation.text.visible`).

    This covers whatever the manifest or the shards hold: a status, a layer's name, a column's value. A
    line break in such text cannot forge a line.
    """
    return "\n".join(visible(line) for line in lines)


def histogram(values: np.ndarray, bins: int = 20, low: float = 0.0, high: float = 1.0) -> str:
    counts, _ = np.histogram(values, bins=bins, range=(low, high))
    scale = counts.max() or 1
    return "".join(BARS[int(round(c / scale * (len(BARS) - 1)))] for c in counts)


def _described(entry: dict, where: str) -> dict:
    """`entry` if it holds what `describe` prints, beyond `zoo.storage.manifest.check_config`'s structure.

    That is the status and runs per split, and each architecture's parameter count and layers. Else it
    raises an `InputError` naming the key, so a hand-edited manifest gets one line, not a KeyError.
    """
    for key in ("status", "runs"):
        if not isinstance(entry.get(key), dict):
            raise InputError(f"{where}.{key}: expected a mapping")
    missing = [split for split in entry["splits"] if split not in entry["runs"]]
    if missing:
        raise InputError(f"{where}.runs: no run count for the split(s) {missing}")
    for arch_id, info in entry["architectures"].items():
        at = f"{where}.architectures.{ascii(arch_id)[1:-1][:40]}"
        if not isinstance(info, dict) or isinstance(info.get("num_params"), bool) or not isinstance(
                info.get("num_params"), int) or not isinstance(info.get("layers"), list):
            raise InputError(f"{at}: expected {{num_params: an integer, layers: a list}}")
        for index, layer in enumerate(info["layers"]):
            if not (isinstance(layer, dict) and isinstance(layer.get("name"), str)
                    and isinstance(layer.get("role"), str)
                    and isinstance(layer.get("shape"), list)
                    and all(isinstance(n, int) and not isinstance(n, bool) for n in layer["shape"])):
                raise InputError(f"{at}.layers[{index}]: expected {{name, shape: a list of integers, role}}")
    return entry


def _load(folder: Path, config: str | None, columns: tuple[str, ...] = ()):
    manifest = read_manifest(folder)
    config = resolve_config(manifest, config, folder)
    entry = _described(manifest["configs"][config], f"{folder / 'manifest.json'}: configs.{config}")
    files = [folder / f["path"] for f in entry["files"]]
    if not files:
        raise ValueError(f"{folder} config {config!r} is empty: no shards (0 of {entry['planned_checkpoints']:,} "
                         "planned checkpoints packed); run `nfnzoo generate` to train it")
    metric, low, high = create_family(entry["family"]).HEADLINE
    check_declared_sizes(files)  # a shard's footer and pages vouch for their sizes before anything is read
    available = pq.read_schema(files[0]).names
    unknown = [c for c in columns if c not in available]
    if unknown:
        raise ValueError(f"{folder} config {config!r} has no column {unknown[0]!r}; its columns: "
                         f"{', '.join(available)}")
    wanted = list(dict.fromkeys(["epoch", "status", metric, "run_id", *columns,
                                 *(["is_best"] if "is_best" in available else [])]))
    frame = read_named(files, lambda: pq.read_table(files, columns=wanted).to_pandas())
    return config, entry, frame, (metric, low, high)


def _final(frame):
    """Each run's checkpoint at the last epoch, without the best-validation copies (`is_best`)."""
    ok = frame[frame["status"] == "ok"]
    if "is_best" in ok:
        ok = ok[~ok["is_best"].astype(bool)]
    return ok[ok["epoch"] == ok["epoch"].max()]


def final_breakdown(folder: str | Path, column: str, config: str | None = None) -> str:
    """The headline metric at each run's final epoch, one line (quantiles, histogram) per value of `column`."""
    folder = Path(folder)
    config, entry, frame, (metric, low, high) = _load(folder, config, (column,))
    final = _final(frame)
    lines = [f"{metric} at the final epoch ({int(final['epoch'].max()) if len(final) else '-'}) by {column} (ok rows):",
             f"  {column[:12]:<12} (  runs)        min    q25    median q75    max    histogram {low:g}..{high:g}"]
    for value, group in final.groupby(column):
        q = np.quantile(group[metric], [0, 0.25, 0.5, 0.75, 1])
        lines.append(f"  {str(value)[:12]:<12} ({len(group):>6,} runs)   " + " ".join(f"{v:.3f}" for v in q)
                     + f"  |{histogram(group[metric].to_numpy(), low=low, high=high)}|")
    return shown(lines)


def plot_final(folder: str | Path, out: str | Path, column: str | None = None, config: str | None = None) -> Path:
    """A PNG histogram of the headline metric at the final epoch, stacked by `column` if given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.storage.atomic import replacing

    folder, out = Path(folder), Path(out)
    config, entry, frame, (metric, low, high) = _load(folder, config, (column,) if column else ())
    final = _final(frame)
    groups = list(final.groupby(column)) if column else [("all", final)]
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.hist([g[metric] for _, g in groups], bins=40, range=(low, high), stacked=True,
              label=[f"{column}={v} ({len(g):,})" if column else f"{len(g):,} runs" for v, g in groups])
    axes.set_xlabel(f"{metric} at the final epoch ({int(final['epoch'].max())})")
    axes.set_ylabel("runs")
    axes.set_title(f"{folder.name} [{config}], dataset {entry['dataset_hash'][:12]}")
    axes.legend()
    figure.tight_layout()
    with replacing(out) as temporary:
        figure.savefig(temporary, format="png", dpi=110)
    plt.close(figure)
    return out


def reproducibility_line(entry: dict) -> str:
    """The mode the config was made in (`zoo.training.reproducibility`), and what its bytes depend on."""
    from zoo.training.reproducibility import mode_of

    if mode_of(entry) == "portable":
        versions = (entry.get("reproducibility") or {}).get("versions") or {}
        shown = ", ".join(f"{name} {value}" for name, value in sorted(versions.items()) if value)
        return ("reproducibility: portable (the same bytes on any x86-64-v3 processor with "
                f"{shown or 'the same software'})")
    return "reproducibility: native (the bytes are the training machines' instruction set's own)"


def machine_lines(machines: list[dict] | None) -> list[str]:
    """Where the checkpoints were trained (`zoo.distributed.machine`): bytes are reproducible only
    per instruction set."""
    if machines is None:
        return ["machines: not recorded (packed before nfnzoo recorded them)"]
    lines = []
    for machine in machines:
        gpus = ", ".join(machine["gpu_models"]) or "none"
        # `zoo.storage.manifest` has checked the entry; role and count may be left out
        count = machine.get("checkpoints")
        who = ("packed the zoo (the machines that trained it are unknown)" if machine.get("role") == "packed"
               else f"trained {count:,} checkpoints" if count is not None else "trained checkpoints")
        lines.append(f"machine: {who}: {machine['cpu_model']}; ATen {machine['aten_isa']}, oneDNN "
                     f"{machine['onednn_isa']}; GPUs {gpus} (CUDA {machine['cuda']}); torch {machine['torch']}; "
                     f"{machine['platform']}")
    return lines


def describe(folder: str | Path, config: str | None = None) -> str:
    folder = Path(folder)
    config, entry, frame, (metric, low, high) = _load(folder, config)
    packed, planned = entry["packed_checkpoints"], entry["planned_checkpoints"]
    completeness = [] if entry["complete"] else [
        f"INCOMPLETE: {packed:,} of {planned:,} planned checkpoints are packed "
        f"({planned - packed:,} missing); re-run `nfnzoo generate` to finish it"]
    lines = [f"{folder} [{config}] family={entry['family']} profile={entry['spec'].get('profile') or 'full'}",
             *completeness,
             f"checkpoints: {packed:,} of {planned:,} planned; "
             f"runs: {frame['run_id'].nunique():,}; status: "
             + ", ".join(f"{k} {v:,}" for k, v in entry["status"].items()),
             "splits: " + ", ".join(f"{s} {entry['splits'][s]:,} ({entry['runs'][s]:,} runs)"
                                    for s in SPLIT_NAMES if s in entry["splits"]),
             f"dataset hash: {entry['dataset_hash']}", reproducibility_line(entry),
             *machine_lines(entry.get("machines"))]
    ok = frame[frame["status"] == "ok"]
    lines.append(f"{metric} by epoch (ok rows):".ljust(36)
                 + f"min    q25    median q75    max    histogram {low:g}..{high:g}")
    for epoch, group in ok.groupby("epoch"):
        q = np.quantile(group[metric], [0, 0.25, 0.5, 0.75, 1])
        lines.append(f"  epoch {epoch:>4} ({len(group):>6,} rows)          " + " ".join(f"{v:.3f}" for v in q)
                     + f"  |{histogram(group[metric].to_numpy(), low=low, high=high)}|")
    for arch_id, info in sorted(entry["architectures"].items()):
        lines.append(f"architecture {arch_id}: {info['num_params']:,} parameters")
        for layer in info["layers"]:
            lines.append(f"  {layer['name']:<16} {str(tuple(layer['shape'])):<18} {layer['role']}")
    return shown(lines)
