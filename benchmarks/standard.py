"""Standard suites: a fixed, versioned list of cells (task, zoo, protocol, seeds) that any one model runs.

Run:

    nfnzoo bench suite standard-v1 --model MODEL --out DIR [--data ZOO=FOLDER ...]

A cell names its zoo as the official board pins it (`leaderboards/datasets.json`). That is the
dataset's name and its sha256 `dataset_hash`. So a run anywhere states whether it read the same
bytes.

Our zoos' bytes can differ between machines. `--data ZOO=FOLDER` maps a cell's zoo to a local
folder, or to a Hub repo `ORG/NAME[@REVISION]`. A cell whose run read the pinned hash is ranked in
the suite's table. A cell on other bytes is a *stand-in*, left out of the suite's ranking. In
`DIR/suite.json` it has `stand_in: true` and `ranked: false`. "Stand-in" names only such an unranked
run, never a ranked one.

The folder holds one results file per cell, `DIR/<cell>.json`, with predictions beside it. A cell
the model cannot serve, e.g. on a weight space it does not read, is `DIR/<cell>.skipped` with the
reason. The folder also holds `DIR/table.md` and `DIR/suite.json`. That file records the suite, its
version, the model, and every cell's zoo, hash and status. It also records the `--data` it read:
this machine's record. From it, `leaderboard submit DIR` verifies a zoo new to the board. No results
file or entry holds it.

`nfnzoo leaderboard submit DIR` takes the folder whole. A finished cell is kept, so an interrupted
run resumes. Inside a cell, it resumes from its finished seeds.

A suite's cells never change. Changing one makes the next version (`standard-v2`). Every earlier
version stays runnable as it was; `tests/benchmarks/test_standard_suite.py` pins v1.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from benchmarks.files import write_json_atomic, write_text_atomic
from benchmarks.jobs import stderr_printer
from benchmarks.results import read_results, skip_path, skip_reason, write_skip
from benchmarks.run_options import Placement, RunOptions
from benchmarks.suite import PAPERS_PROTOCOL, TRANSFORMER_PROTOCOL
from zoo.registry import Registry


@dataclasses.dataclass(frozen=True)
class ZooRef:
    """A zoo as the official board pins it: the same name and hash on every machine that has its bytes.

    It also holds the spec and profile that plan its runs. They say how to make a stand-in where the
    zoo cannot be fetched."""
    name: str  # the board's dataset name (leaderboards/datasets.json)
    config: str  # the dataset config inside the zoo
    dataset_hash: str  # sha256 of the config's data (its manifest.json)
    spec: str  # a bundled spec's name, or a spec file under benchmarks/standard_zoos/
    profile: str

    @property
    def source(self) -> str:
        """Its source as the board records a zoo made by `generate_command` (`leaderboards.datasets.zoo_source`)."""
        return f"regenerated from spec {self.spec.removesuffix('.yaml')} ({self.profile})"

    @property
    def generate_command(self) -> str:
        """The command that trains this zoo's runs (the pinned bytes where the arithmetic is the same)."""
        spec = self.spec
        if spec.endswith(".yaml"):
            spec = str(Path(__file__).parent / "standard_zoos" / spec)
        return f"nfnzoo generate {spec} --profile {self.profile}"


@dataclasses.dataclass(frozen=True)
class Cell:
    name: str  # the results file's stem
    task: str
    zoo: ZooRef
    task_overrides: Mapping[str, Any]
    seeds: tuple[int, ...]
    label: str  # what the table shows in its protocol column
    # the model's configuration in this cell: the first of these presets it has (standard-v2 on; a model
    # with none of them, and every model in standard-v1, runs its defaults)
    model_presets: tuple[str, ...] = ()
    group: str | None = None  # the members' monomial group, set on a model whose config takes one (GROUP_FIELD)


def cell_model_overrides(cell: Cell, model: str) -> dict[str, Any]:
    """What model `model` runs with in `cell`.

    That is its first preset of `cell.model_presets`, and the cell's group on the model's group field.
    The field is `group`, or the one its class names in `GROUP_FIELD`."""
    from nfn_models import model_config
    from nfn_models.registry import MODELS

    overrides: dict[str, Any] = {}
    preset = cell_preset(cell, model)
    if preset is not None:
        overrides["preset"] = preset
    field = getattr(MODELS.get(model), "GROUP_FIELD", "group")
    if cell.group is not None and field in {f.name for f in dataclasses.fields(model_config(model))}:
        overrides[field] = cell.group
    return overrides


def cell_preset(cell: Cell, model: str) -> str | None:
    """The preset `model` runs `cell` at: the first of `cell.model_presets` it has, else None (its defaults)."""
    from nfn_models import list_presets

    return next((name for name in cell.model_presets if name in list_presets(model)), None)


def cell_protocol(cell: Cell, model: str) -> str:
    """`cell`'s protocol line as `model` ran it.

    It is the task's protocol, then the model's preset, or "its defaults". The label's closing
    "; ... presets" is dropped, since it speaks for every model."""
    preset = cell_preset(cell, model)
    task_protocol = cell.label.rsplit("; ", 1)[0] if cell.model_presets else cell.label
    return f"{task_protocol}; model at {f'preset {preset}' if preset is not None else 'its defaults'}"


def cell_model_fields(cell: Cell, model: str) -> dict[str, Any]:
    """The model config fields `cell` fixes for `model`, as data: its preset's values and the group field.

    A run of the cell must have recorded these in its `model_config`."""
    from nfn_models.registry import MODELS
    from zoo.validation.schema import to_data

    overrides = cell_model_overrides(cell, model)
    preset = overrides.pop("preset", None)
    fields = dict(to_data(getattr(MODELS.get(model), "PRESETS", {})[preset])) if preset is not None else {}
    return {**fields, **to_data(overrides)}


@dataclasses.dataclass(frozen=True)
class StandardSuite:
    name: str
    description: str
    cells: tuple[Cell, ...]


STANDARD_SUITES: Registry[Callable[[], StandardSuite]] = Registry("standard suite")

# The board's bench zoos (leaderboards/datasets.json), by name and hash.
# cnn-mnist-bench predates the bundled cnn-mnist spec's released-architecture fields: its spec is kept
# as it was (standard_zoos/cnn-mnist-v1.yaml), since today's bundled spec plans another zoo.
CNN_MNIST_BENCH = ZooRef("cnn-mnist-bench", "cnn-mnist",
                         "6e211693486aa28044af8deaca9b97040b2edaefd12a55dc7f80e94edcd01662", "cnn-mnist-v1.yaml",
                         "bench")
INR_MNIST_FAST_FIFTH = ZooRef("inr-mnist-fast-fifth", "inr-mnist",
                              "027bb41fb1d54c519beefc4cb2f537fd2f550e9b51f493bf8ee314c4b781e1d1", "inr-mnist",
                              "fast-fifth")
TRANSFORMER_MNIST_BENCH = ZooRef("transformer-mnist-bench", "transformer-mnist",
                                 "e6f11d37eb4007588ad3afbdb68813d2ed0e372d7ad2510cce35b88f84ee87e8",
                                 "transformer-mnist",
                                 "bench")


@STANDARD_SUITES.register("standard-v1")
def standard_v1() -> StandardSuite:
    """Budgets are sized from the existing suites' recorded timings on a small CPU machine.

    A CNN cell runs the papers' protocol with 10 epochs. An INR cell runs the `budget` preset (5
    epochs) on a fifth of inr-mnist. The transformer cell runs 10 epochs."""
    cells = tuple(
        Cell(f"cnn-generalization-{activation}", "generalization", CNN_MNIST_BENCH,
             {**PAPERS_PROTOCOL, "subset": {"activation": activation}}, (0, 1, 2),
             f"{activation} subset, final checkpoints, sigmoid + BCE, 10 epochs")
        for activation in ("relu", "tanh"))
    cells += (
        Cell("inr-classification", "inr-classification", INR_MNIST_FAST_FIFTH, {"preset": "budget"}, (0, 1, 2),
             "budget preset (5 epochs)"),
        Cell("inr-editing", "inr-editing", INR_MNIST_FAST_FIFTH, {"preset": "budget"}, (0, 1, 2),
             "budget preset (5 epochs), dilate"),
        Cell("transformer-generalization", "generalization", TRANSFORMER_MNIST_BENCH,
             {**TRANSFORMER_PROTOCOL, "threshold": 0.0}, (0, 1, 2),
             "checkpoint at 3/4 of training, 10 epochs (1 warm-up)"),
    )
    return StandardSuite("standard-v1", "generalization on the ReLU and tanh CNNs of cnn-mnist-bench, INR "
                         "classification and editing on inr-mnist-fast-fifth, and generalization on "
                         "transformer-mnist-bench", cells)


# standard-v2's zoos: bundled specs' `suite-v2` profiles, made in the portable reproducibility mode
# (zoo/training/reproducibility.py), so any x86-64-v3 machine regenerates these bytes and is ranked
# (`nfnzoo generate <spec> --profile suite-v2`; times on docs/reproducibility.md).
CNN_MNIST_SUITE_V2 = ZooRef("cnn-mnist-suite-v2", "cnn-mnist",
                            "391f00067b9d483b6c81ea23392583ec6fb026cb2b486738441a3d9e8fd986a9", "cnn-mnist", "suite-v2")
INR_MNIST_SUITE_V2 = ZooRef("inr-mnist-suite-v2", "inr-mnist",
                            "c788c0c6da81e5f4d9d8a060820e1f76f4a024c04b6d1ff6b26e1e7431be7ce4", "inr-mnist", "suite-v2")
TRANSFORMER_MNIST_SUITE_V2 = ZooRef("transformer-mnist-suite-v2", "transformer-mnist",
                                    "699952649d5b4fd7d6f31ac8acb1114ad39f0a7ef27748a4aef0a4fd64f7ea53",
                                    "transformer-mnist", "suite-v2")

# standard-v2's INR classification protocol: the task's `budget` preset with 10 epochs and a 300-step
# warm-up. 4,500 training SIRENs are 141 steps an epoch, so the budget preset's 5 epochs never left its
# 1,000-step warm-up (why HNP and the MLP sat at chance in standard-v1's cell); in a 30-epoch pilot (seed 0,
# 500-step warm-up) HNP's validation accuracy peaked at epoch 4 and STATNN's early too, so 10 epochs hold
# what the budget presets learn at a third of the cost.
INR_V2_PROTOCOL = {"preset": "budget", "epochs": 10, "warmup_steps": 300}
# standard-v2's transformer protocol: Transformer-NFN's preset at 40 epochs, 4 of warm-up (the preset's
# one in ten), so that a model takes about the steps standard-v1's cell gave it (its 1,456 training
# members x 10 epochs at batch 16: 910; here 336 members x 40: 840). At 10 epochs (210 steps) every
# Transformer-NFN seed was still improving at its last epoch (test tau 0.07-0.29, behind STATNN's 0.50).
# Every evaluation batch at 64 members (no result depends on it): the graph models' edge tensors over
# 1,024 members' neural graphs outgrow a small machine's memory (benchmarks.suite).
TRANSFORMER_V2_PROTOCOL = {"preset": "transformer-nfn", "epochs": 40, "warmup_epochs": 4, "threshold": 0.0,
                           "eval_batch_size": 64}


@STANDARD_SUITES.register("standard-v2")
def standard_v2() -> StandardSuite:
    """standard-v1's four weight-reading cells, on zoos any x86-64 machine regenerates (the portable mode).

    Each model runs at its budget preset for the cell's task, where it has one (`Cell.model_presets`).
    The graph models' paper widths take seconds a Small CNN step on a CPU (docs/performance.md). The members' group
    goes on the field of a model that takes one. INR editing is left out, since its cost per seed is
    classification's. The four cells already cover the three families; standard-v1 keeps it."""
    cells = tuple(
        Cell(f"cnn-generalization-{activation}", "generalization", CNN_MNIST_SUITE_V2,
             {**PAPERS_PROTOCOL, "subset": {"activation": activation}}, (0, 1, 2),
             f"{activation} subset, final checkpoints, sigmoid + BCE, 10 epochs; budget presets",
             model_presets=("generalization-budget",), group=group)
        for activation, group in (("relu", "scale"), ("tanh", "sign")))
    cells += (
        Cell("inr-classification", "inr-classification", INR_MNIST_SUITE_V2, INR_V2_PROTOCOL, (0, 1, 2),
             "budget preset at 10 epochs (300 warm-up steps); inr-classification-budget presets",
             model_presets=("inr-classification-budget",)),
        Cell("transformer-generalization", "generalization", TRANSFORMER_MNIST_SUITE_V2, TRANSFORMER_V2_PROTOCOL,
             (0, 1, 2), "checkpoint at 3/4 of training, 40 epochs (4 warm-up); budget presets",
             model_presets=("transformer-generalization-budget", "generalization-budget")),
    )
    return StandardSuite("standard-v2", "generalization on the ReLU and tanh CNNs of cnn-mnist-suite-v2, INR "
                         "classification on inr-mnist-suite-v2 and generalization on transformer-mnist-suite-v2: "
                         "zoos made in the portable mode, models at their budget presets", cells)


# standard-v3's INR zoo: suite-v2's recipe on every 2nd MNIST image (22,500 training SIRENs), portable.
INR_MNIST_SUITE_V3 = ZooRef("inr-mnist-suite-v3", "inr-mnist",
                            "64c9831e53c364ad4627566f427bf5f5ce344911411e1689b43b39bd272a7689", "inr-mnist", "suite-v3")


@STANDARD_SUITES.register("standard-v3")
def standard_v3() -> StandardSuite:
    """standard-v2 with its INR classification cell on five times the training SIRENs.

    On suite-v2's 4,500 training SIRENs the weight readers sat within their seeds' spread of each other at
    10 epochs and at 40 (`standard-v2-4x`, their validation curves flat from epoch 10). The protocol is
    v2's; only the zoo grows. The CNN and transformer cells are v2's, so their runs count for both suites."""
    v2 = standard_v2()
    cells = tuple(dataclasses.replace(cell, zoo=INR_MNIST_SUITE_V3) if cell.name == "inr-classification" else cell
                  for cell in v2.cells)
    return StandardSuite("standard-v3", v2.description.replace("inr-mnist-suite-v2", "inr-mnist-suite-v3"), cells)


def scaled(suite: StandardSuite, factor: int) -> StandardSuite:
    """`suite` with every cell trained for `factor` times its steps: its epochs, with warm-up and all else kept.

    This is a protocol of its own. `leaderboards.agreement` sets its ranking beside the suite's."""
    cells = tuple(dataclasses.replace(
        cell, task_overrides={**cell.task_overrides, "epochs": cell.task_overrides["epochs"] * factor},
        label=cell.label.replace(f"{cell.task_overrides['epochs']} epochs",
                                 f"{cell.task_overrides['epochs'] * factor} epochs ({factor}x {suite.name})", 1))
        for cell in suite.cells)
    return StandardSuite(f"{suite.name}-{factor}x", f"{suite.description}; each cell at {factor}x its epochs", cells)


@STANDARD_SUITES.register("standard-v2-4x")
def standard_v2_4x() -> StandardSuite:
    """standard-v2 at four times each cell's epochs: does a cell's ranking hold at a larger budget?"""
    return scaled(standard_v2(), 4)


@STANDARD_SUITES.register("standard-v2-2x")
def standard_v2_2x() -> StandardSuite:
    """standard-v2 at twice each cell's epochs, for a model whose 4x would exceed the 30-minute-a-seed line."""
    return scaled(standard_v2(), 2)


def is_standard(name: str) -> bool:
    return name in STANDARD_SUITES.names()


def parse_data_map(assignments: Sequence[str], suite: StandardSuite) -> dict[str, str]:
    """`ZOO=FOLDER` assignments (a zoo named by the suite's cells) as {zoo name: folder}."""
    zoos = sorted({cell.zoo.name for cell in suite.cells})
    mapping = {}
    for assignment in assignments:
        zoo, equals, folder = assignment.partition("=")
        if not equals or not folder or zoo not in zoos:
            raise ValueError(f"--data: expected ZOO=FOLDER with ZOO one of {', '.join(zoos)} (the zoos of "
                             f"{suite.name}), got {assignment!r}")
        if zoo in mapping:
            raise ValueError(f"--data: {zoo} is given twice")
        mapping[zoo] = folder
    return mapping


def select_cells(suite: StandardSuite, only: Sequence[str] | None) -> tuple[Cell, ...]:
    """The cells `only` names (all of them when None), in the suite's order; an unknown name is an error."""
    if only is None:
        return suite.cells
    names = [cell.name for cell in suite.cells]
    unknown = [name for name in only if name not in names]
    if unknown or not only:
        raise ValueError(f"--only: {suite.name} has no cell {', '.join(map(repr, unknown)) or '(none given)'}; its "
                         f"cells: {', '.join(names)}")
    return tuple(cell for cell in suite.cells if cell.name in only)


def run_standard(name: str, model: str, out_dir: str | Path, data: Mapping[str, str],
                 placement: Placement = Placement(), only: Sequence[str] | None = None,
                 model_name: str | None = None) -> dict:
    """Runs every missing cell of the standard suite `name` with `model`; returns (and writes) `suite.json`.

    `data` maps a zoo's name to the folder or Hub repo to read it from. A cell whose run reads the
    pinned hash is ranked; one on other bytes is a stand-in. A zoo not in `data` has no published
    location yet. Such a cell cannot run, and the error says which `--data` to give. Every cell's zoo is
    checked before any cell runs.

    `only` names the cells to run now, e.g. those whose zoos are ready. The others keep what an earlier
    run left; a finished cell stays in `suite.json`. Otherwise they are recorded as not run, and a later
    run of the same folder fills them in.

    `placement` is where the cells' jobs run. A cell's seeds are its jobs, and the cells fix seeds and
    overrides. `model_name` is the model's board name (its `name`)."""
    from benchmarks.api import register
    from benchmarks.harness import run_benchmark
    from benchmarks.model_identity import resolve_model

    suite = STANDARD_SUITES.get(name)()
    chosen = select_cells(suite, only)
    resolved = resolve_model(register(model), model_name)  # once, before any cell: a refused name is an error now
    registered, shown = resolved.registered, resolved.name
    missing = {cell.zoo.name: cell.zoo for cell in chosen if cell.zoo.name not in data}
    if missing:
        recipes = "; ".join(f"{zoo}: {ref.generate_command}" for zoo, ref in sorted(missing.items()))
        raise ValueError(f"{name}: no published copy of {', '.join(sorted(missing))} can be fetched yet; give a local "
                         f"copy with --data ZOO=FOLDER for each (a cell on the pinned hash is ranked; on other bytes "
                         f"it is a stand-in, not ranked). To make one: {recipes}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    say = stderr_printer(f"suite {name}")
    earlier = _earlier_sources(out_dir)
    manifest = _write_manifest(suite, registered, shown, out_dir, data, earlier)  # a folder to submit from the start
    for cell in chosen:
        results_path, skipped = out_dir / f"{cell.name}.json", skip_path(out_dir, cell.name)
        if not os.path.lexists(results_path) and not skipped.exists():
            say(f"{cell.name}: {cell.task} on {cell.zoo.name} ({data[cell.zoo.name]}), seeds "
                f"{','.join(map(str, cell.seeds))}")
            try:
                options = RunOptions(cell.seeds, cell_model_overrides(cell, registered), cell.task_overrides,
                                     placement)
                run_benchmark(cell.task, resolved, data[cell.zoo.name], cell.zoo.config, options, results_path)
            except ValueError as error:  # the model or the data cannot serve this cell
                write_skip(out_dir, cell.name, error)
                say(f"{cell.name} skipped: {error}")
            # after every cell: an interrupted run leaves a folder that `leaderboard submit` takes
            manifest = _write_manifest(suite, registered, shown, out_dir, data, earlier)
        elif skipped.exists():
            say(f"{cell.name} was skipped before; delete {skipped} to retry it (e.g. with another --data)")
    return manifest


def _write_manifest(suite: StandardSuite, registered: str, model: str, out_dir: Path, data: Mapping[str, str],
                    earlier: Mapping[str, str]) -> dict:
    """Writes (and returns) `suite.json` and `table.md` from what the folder holds now."""
    records = []
    for cell in suite.cells:
        results_path, skipped = out_dir / f"{cell.name}.json", skip_path(out_dir, cell.name)
        records.append(_cell_record(cell, cell_protocol(cell, registered),
                                    data.get(cell.zoo.name, earlier.get(cell.name, "")),
                                    read_results(results_path) if os.path.lexists(results_path) else None,
                                    skipped))
    # the run is a stand-in where a cell is: one that ran on other bytes than the pinned ones (never a ranked one)
    manifest = {"suite": suite.name, "model": model, "stand_in": any(record["stand_in"] for record in records),
                "cells": records}
    write_json_atomic(out_dir / "suite.json", manifest)
    write_text_atomic(out_dir / "table.md", standard_table(manifest))
    return manifest


def _earlier_sources(out_dir: Path) -> dict[str, str]:
    """{cell: the zoo it read} from the folder's `suite.json` (a resumed or partial run keeps them)."""
    if not (out_dir / "suite.json").exists():
        return {}
    return {cell["cell"]: cell["data"] for cell in read_manifest(out_dir)["cells"]
            if isinstance(cell.get("data"), str)}


def _cell_record(cell: Cell, protocol: str, data: str, results: dict | None, skipped: Path) -> dict:
    from benchmarks.tasks import get_task_class

    record = {"cell": cell.name, "task": cell.task, "zoo": cell.zoo.name, "config": cell.zoo.config,
              "dataset_hash": cell.zoo.dataset_hash, "data": data, "seeds": list(cell.seeds), "protocol": protocol}
    if results is None:  # no run: neither ranked nor a stand-in
        return {**record, "stand_in": False, "status": "skipped",
                "reason": skip_reason(skipped) if skipped.exists() else "not run", "ranked": False}
    metric = get_task_class(cell.task).main_metric
    run_hash = results["dataset"]["dataset_hash"]
    pinned = run_hash == cell.zoo.dataset_hash  # exactly the suite table's rule (`leaderboards.suite_board`)
    return {**record, "stand_in": not pinned, "status": "ran", "results": f"{cell.name}.json",
            "run_dataset_hash": run_hash, "hash_matches": pinned, "ranked": pinned, "metric": metric,
            "mean": results["summary"][metric]["mean"], "std": results["summary"][metric]["std"]}


def standard_table(manifest: dict) -> str:
    """Markdown: one row per cell, its zoo, whether the bytes are the pinned ones, and the metric."""
    ran = [c for c in manifest["cells"] if c["status"] == "ran"]
    stand_ins = [c["cell"] for c in ran if not c["hash_matches"]]
    said = f"{sum(c['hash_matches'] for c in ran)} of {len(ran)} run cells on the pinned zoos, ranked"
    if stand_ins:
        said += f"; stand-ins (other bytes than the pinned ones, not ranked): {', '.join(stand_ins)}"
    lines = [f"{manifest['suite']} with {manifest['model']} ({said})", "",
             "| cell | task | zoo | data | hash | protocol | metric | value |", "|---|---|---|---|---|---|---|---|"]
    for c in manifest["cells"]:
        if c["status"] != "ran":
            lines.append(f"| {c['cell']} | {c['task']} | {c['zoo']} | {c['data']} | | {c['protocol']} | | "
                         f"skipped: {c['reason'][:120]} |")
            continue
        hash_text = (f"{c['run_dataset_hash'][:12]} (pinned): ranked" if c["hash_matches"]
                     else f"{c['run_dataset_hash'][:12]} ≠ pinned {c['dataset_hash'][:12]}: a stand-in, not ranked")
        lines.append(f"| {c['cell']} | {c['task']} | {c['zoo']} | {c['data']} | {hash_text} | {c['protocol']} | "
                     f"{c['metric']} | {c['mean']:.4f} ± {c['std']:.4f} |")
    return "\n".join(lines) + "\n"


def read_manifest(folder: str | Path) -> dict:
    """A standard suite's `suite.json`, read bounded and checked.

    Every cell must be a record with its name and status. A finished cell's results must be a `.json`
    file name inside `folder`, never a path out of it."""
    from benchmarks.files import read_json

    path = Path(folder) / "suite.json"
    manifest = read_json(path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("cells"), list):
        raise ValueError(f"{path}: expected a standard suite's manifest with its cells")
    for cell in manifest["cells"]:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell"), str) or cell.get("status") not in (
                "ran", "skipped"):
            raise ValueError(f"{path}: expected each cell as a record with its name and status, got {cell!r:.80}")
        name = cell.get("results")
        if cell["status"] == "ran" and (not isinstance(name, str) or Path(name).name != name
                                        or not name.endswith(".json")):
            raise ValueError(f"{path}: cell {cell['cell']!r:.80}: its results {name!r:.80} must be a .json file "
                             "name in the folder")
    return manifest
