"""Benchmark suites: a named matrix of (model, model config, task protocol) entries, as data.

`nfnzoo bench suite NAME --data ZOO --out DIR` runs every entry of a suite over the seeds. It writes
one results file per entry, `DIR/<entry>.json`, with its predictions beside it. It skips entries
whose results file is already there. So an interrupted suite resumes where it stopped; within an
entry, it resumes from its finished seeds (`benchmarks.harness`).

An entry its data cannot serve is recorded as `DIR/<entry>.skipped` with the reason, and the others
go on. An example is a threshold that leaves fewer than two test rows. The suite then prints the
Kendall tau-b table, and writes it to `DIR/table.md`. It shows mean +- std over the seeds, with the
tie ceiling of the test targets. `nfnzoo leaderboard submit DIR/*.json` submits the files to a
leaderboard.

These suites run many models on one zoo. A standard suite (`standard-v1`, `benchmarks.standard`)
runs one model, any model, over fixed cells, each on its own pinned zoo.

The `transformer-generalization` suite runs MLP, STATNN, XGBoost, LightGBM, a random forest and
Transformer-NFN on a transformer zoo. It follows Transformer-NFN's protocol (Tran et al. 2025). That
takes the checkpoint at three quarters of training. Each model is retrained at each accuracy
threshold: 0, 0.2, 0.4, 0.6 and 0.8. It trains 10 epochs here (see `TRANSFORMER_PROTOCOL`). The
`*-paper-t*` entries of MLP, STATNN and Transformer-NFN train the paper's 100. `--only MODEL` runs
every entry of one model, one results file per threshold.

The `inr-classification` and `inr-editing` suites run every model each INR task lists. They run at
budget presets, on the inr-mnist zoo (`INR_CLASSIFIERS`, `INR_EDITORS`).

The `inr-augmentation` suite asks whether group-augmented training SIRENs help NP, at an equal
number of optimizer steps. This is the NFN paper's comparison of its augmented INR copies.

The `cnn-generalization` suite runs every feedforward model on the ReLU and the tanh subsets of a
CNN zoo's final checkpoints. It follows the NFN papers' protocol: sigmoid + BCE on the test
accuracy, Adam 1e-3 without weight decay, batch 8. Zhou et al. 2023 (App.) and Tran et al. 2024
(Sec. 6) train 50 epochs, which `--set task.epochs=50` restores. The default here is 10, the budget
a CPU run affords.

It adds Monomial-NFN and HNP, evaluated on a test split scaled by U[1, 1e3] per hidden unit. That
is the augmentation experiment of Tran et al. 2024, Table 2. The graph metanetworks and probing run
the same protocol at their `generalization-budget` presets, on both subsets and the scaled test.
They are NG-GNN, NG-T, ScaleGMN with the subset's group as its mode, and ProbeGen. ScaleGMN also
runs in mode "permutation" (GMN) on both subsets. `--only ng_gnn` runs one model's entries."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from benchmarks.jobs import stderr_printer
from benchmarks.results import read_results, skip_path, skip_reason, write_skip
from benchmarks.run_options import RunOptions
from zoo.registry import Registry


@dataclasses.dataclass(frozen=True)
class SuiteEntry:
    name: str  # the results file's stem
    model: str
    model_overrides: Mapping[str, Any]
    task_overrides: Mapping[str, Any]
    label: str  # what the table shows in its protocol column


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    task: str
    description: str
    entries: tuple[SuiteEntry, ...]


SUITES: Registry[Callable[[], Suite]] = Registry("benchmark suite")

# The NFN papers' generalization-prediction protocol on the CNN zoos (see the module docstring).
PAPERS_PROTOCOL = {"checkpoints": "final", "loss": "bce", "batch_size": 8, "epochs": 10, "lr": 1e-3,
                   "weight_decay": 0.0}
# The monomial group each activation's nets carry, for the models that take one.
GROUPS = {"relu": "scale", "tanh": "sign"}
FEEDFORWARD_MODELS = ("mlp", "statnn", "np", "hnp", "monomial_nfn", "magep_nfn")
# The config field each model that takes one sets to the subset's group.
GROUP_FIELDS = {"monomial_nfn": "group", "magep_nfn": "group", "scalegmn": "mode"}
TREE_MODELS = ("xgboost", "lightgbm", "random_forest")  # fitted on flattened weights (nfn_models.trees)
# The graph metanetworks and probing, at their `generalization-budget` presets (the papers' widths
# take seconds a Small CNN step on a CPU: docs/performance.md); ScaleGMN's mode is the subset's group.
GRAPH_MODELS = ("ng_gnn", "ng_t", "scalegmn", "probegen")
SCALED_TEST = {"augment_copies": 1, "augment_splits": ["test"], "augment_keep_original": False,
               "augment_scale_range": [1.0, 1000.0]}


@SUITES.register("cnn-generalization")
def cnn_generalization() -> Suite:
    entries = []
    for activation in ("relu", "tanh"):
        for model in FEEDFORWARD_MODELS:
            overrides = _model_overrides(model, activation)
            entries.append(SuiteEntry(f"{model}-{activation}", model, overrides,
                                      {**PAPERS_PROTOCOL, "subset": {"activation": activation}}, activation))
    for activation in ("relu", "tanh"):  # Tran et al. 2025's tree baselines, on the same subsets
        for model in TREE_MODELS:
            entries.append(SuiteEntry(f"{model}-{activation}", model, {},
                                      {**PAPERS_PROTOCOL, "subset": {"activation": activation}}, activation))
    for activation in ("relu", "tanh"):
        for model in GRAPH_MODELS:
            entries.append(SuiteEntry(f"{model}-{activation}", model, _model_overrides(model, activation),
                                      {**PAPERS_PROTOCOL, "subset": {"activation": activation}},
                                      f"{activation}, budget preset"))
    for activation in ("relu", "tanh"):  # ScaleGMN's permutation-only form, GMN (Lim et al. 2024)
        entries.append(SuiteEntry(f"scalegmn-permutation-{activation}", "scalegmn",
                                  {"preset": "generalization-budget", "mode": "permutation"},
                                  {**PAPERS_PROTOCOL, "subset": {"activation": activation}},
                                  f"{activation}, budget preset, mode permutation (GMN)"))
    for model in ("monomial_nfn", "hnp", *GRAPH_MODELS):
        overrides = _model_overrides(model, "relu")
        entries.append(SuiteEntry(f"{model}-relu-scaled-test", model, overrides,
                                  {**PAPERS_PROTOCOL, "subset": {"activation": "relu"}, **SCALED_TEST},
                                  "relu, test scaled U[1,1e3]" + (", budget preset" if model in GRAPH_MODELS else "")))
    return Suite("cnn-generalization", "generalization",
                 "every feedforward model, the tree baselines and the graph metanetworks on the ReLU and tanh subsets "
                 "(final checkpoints, the papers' sigmoid + BCE protocol), plus Monomial-NFN, HNP and the graph "
                 "models on a scale-augmented test split",
                 tuple(entries))


def _model_overrides(model: str, activation: str) -> dict[str, Any]:
    """A model's overrides on a subset.

    A graph model gets its budget preset. A model that takes a group gets the subset's group, in the
    field `GROUP_FIELDS` names."""
    overrides: dict[str, Any] = {"preset": "generalization-budget"} if model in GRAPH_MODELS else {}
    if model in GROUP_FIELDS:
        overrides[GROUP_FIELDS[model]] = GROUPS[activation]
    return overrides


# Transformer-NFN's protocol (the task's `transformer-nfn` preset: the checkpoint at 3/4 of
# training, sigmoid + BCE, batch 16, Adam 1e-3, warm-up then cosine to 1e-5) with 10 epochs and
# one warm-up epoch instead of 100 and 10, so these 30 entries fit a CPU run; the `-paper-` entries
# below keep the paper's.
TRANSFORMER_PROTOCOL = {"preset": "transformer-nfn", "epochs": 10, "warmup_epochs": 1}
THRESHOLDS = (0.0, 0.2, 0.4, 0.6, 0.8)  # the paper's accuracy cut-offs
TRANSFORMER_MODELS = ("mlp", "statnn", "xgboost", "lightgbm", "random_forest", "transformer_nfn")
PAPER_SCHEDULE_MODELS = ("mlp", "statnn", "transformer_nfn")  # those trained by gradient steps
# The graph models that read transformer members, at d 32 (a step of 16 members' 523-node graphs
# costs them far more than Transformer-NFN's: docs/performance.md), threshold 0 only. NG-T does not
# read them: its dense attention over 523^2 node pairs holds 1.1 GB a tensor.
GRAPH_TRANSFORMER_MODELS = {"ng_gnn": "generalization-budget", "scalegmn": "transformer-generalization-budget"}
# Their evaluation batches (no result depends on it): the task's 1,024 members' graphs hold 2.5 GB an
# edge tensor at d 32, so a test pass over all of them at once runs out of memory.
GRAPH_TRANSFORMER_EVAL_BATCH = 64


@SUITES.register("transformer-generalization")
def transformer_generalization() -> Suite:
    entries = [SuiteEntry(f"{model}-t{threshold:g}", model, {}, {**TRANSFORMER_PROTOCOL, "threshold": threshold},
                          f"test accuracy ≥ {threshold:g}")
               for threshold in THRESHOLDS for model in TRANSFORMER_MODELS]
    # The models trained by gradient steps again at the paper's own schedule (the preset's 100
    # epochs, 10 of warm-up; the trees stop early on validation either way): about 10x an entry
    # above, so they are entries of their own, run with `--only transformer_nfn-paper-t0,...`
    entries += [SuiteEntry(f"{model}-paper-t{threshold:g}", model, {},
                           {"preset": "transformer-nfn", "threshold": threshold},
                           f"test accuracy ≥ {threshold:g}, the paper's 100 epochs")
                for threshold in THRESHOLDS for model in PAPER_SCHEDULE_MODELS]
    # The graph metanetworks that read transformer members, on every checkpoint only
    entries += [SuiteEntry(f"{model}-t0", model, {"preset": preset},
                           {**TRANSFORMER_PROTOCOL, "threshold": 0.0, "eval_batch_size": GRAPH_TRANSFORMER_EVAL_BATCH},
                           f"test accuracy ≥ 0, {preset} preset")
                for model, preset in GRAPH_TRANSFORMER_MODELS.items()]
    return Suite("transformer-generalization", "generalization",
                 "MLP, STATNN, the tree ensembles and Transformer-NFN on a transformer zoo's checkpoints at 3/4 of "
                 "training, retrained at each accuracy threshold of Tran et al. 2025 (0 to 0.8); MLP, STATNN and "
                 "Transformer-NFN also at the paper's 100 epochs; NG-GNN and GMN (ScaleGMN's permutation mode) on "
                 "their neural graphs, threshold 0", tuple(entries))


# The INR tasks on the full inr-mnist zoo, each model at its `-budget` preset and the
# task's `budget` preset (5 epochs of 45,000 SIRENs: ~7,000 steps, the paper's 200,000 and
# 50,000; channels cut where a step would take seconds), so a suite fits a CPU run.
# `--set task.preset=nfn` and the models' paper presets are the papers' settings (README).
INR_CLASSIFIERS = ("mlp", "statnn", "np", "hnp", "monomial_nfn", "magep_nfn",
                   "dwsnet", "probegen", "ng_gnn", "ng_t", "scalegmn")  # the last five: graph metanetworks, probing
INR_EDITORS = ("np", "hnp", "monomial_nfn", "magep_nfn", "mlp", "dwsnet", "ng_gnn", "ng_t", "scalegmn")


@SUITES.register("inr-classification")
def inr_classification() -> Suite:
    entries = [SuiteEntry(model, model, {"preset": "inr-classification-budget"}, {"preset": "budget"}, "budget")
               for model in INR_CLASSIFIERS]
    # the weight-space counterpart of the NFN paper's augmented INR copies: K random permutation +
    # sign-flip elements per training SIREN
    entries += [SuiteEntry(f"{model}-aug{copies}", model, {"preset": "inr-classification-budget"},
                           {"preset": "budget", "augment_copies": copies}, f"budget, {copies} group views per SIREN")
                for model, copies in (("mlp", 4), ("np", 1))]
    return Suite("inr-classification", "inr-classification",
                 "MLP, STATNN, NP, HNP, Monomial-NFN, MAGEP-NFN, DWSNet, ProbeGen and the graph metanetworks "
                 "classifying the digit a SIREN encodes (budget presets), plus MLP and NP with group-augmented "
                 "training SIRENs", tuple(entries))


# Does group augmentation help NP classify SIRENs at an equal number of optimizer steps? The NFN
# paper's NP reaches 92.9% with 10 extra fits per training image (69.8% without, as the
# Monomial-NFN paper reports it); here K random permutation + sign-flip views per training SIREN,
# with the epochs cut to AUGMENTATION_EPOCHS / (K + 1) so that every entry takes the steps of
# AUGMENTATION_EPOCHS plain epochs. K = 11 gives 12 rows per image, about the paper's 11.
AUGMENTATION_EPOCHS = 12
AUGMENTATION_VIEWS = (0, 1, 3, 11)


@SUITES.register("inr-augmentation")
def inr_augmentation() -> Suite:
    def entry(copies: int) -> SuiteEntry:
        epochs = AUGMENTATION_EPOCHS // (copies + 1)
        return SuiteEntry(f"np-k{copies}", "np", {"preset": "inr-classification-budget"},
                          {"preset": "budget", "epochs": epochs, "augment_copies": copies},
                          f"{copies} group view{'s' * (copies != 1)} per SIREN, {epochs} epoch{'s' * (epochs != 1)}")

    entries = tuple(entry(copies) for copies in AUGMENTATION_VIEWS)
    return Suite("inr-augmentation", "inr-classification",
                 f"NP classifying SIRENs with K = {', '.join(map(str, AUGMENTATION_VIEWS))} random permutation + "
                 f"sign-flip views per training SIREN, at the optimizer steps of {AUGMENTATION_EPOCHS} plain epochs",
                 entries)


@SUITES.register("inr-editing")
def inr_editing() -> Suite:
    entries = [SuiteEntry(model, model, {"preset": "inr-editing-budget"}, {"preset": "budget"}, "budget, dilate")
               for model in INR_EDITORS]
    return Suite("inr-editing", "inr-editing",
                 "NP, HNP, Monomial-NFN, MAGEP-NFN, DWSNet, the graph metanetworks and an MLP predicting the "
                 "weight delta that dilates the digit a SIREN renders (budget presets)", tuple(entries))


def _field(task: str, key: str) -> str:
    """A task override's field name (its alias resolved)."""
    from benchmarks.tasks import get_task_class

    return getattr(get_task_class(task), "ALIASES", {}).get(key, key)


def select_entries(suite: Suite, only: list[str] | None) -> list[SuiteEntry]:
    """The entries `--only` names; nothing given, every entry.

    An entry's own name picks that entry alone, e.g. `np` in a suite that also has `np-aug1`. A model's
    name that is no entry's picks every entry of that model, e.g. a threshold sweep."""
    names, models = {e.name for e in suite.entries}, {e.model for e in suite.entries}
    wanted = [n.replace("-", "_") if n not in names and n.replace("-", "_") in models else n for n in (only or [])]
    entries = [e for e in suite.entries
               if not wanted or e.name in wanted or (e.model in wanted and e.model not in names)]
    if not entries:
        raise ValueError(f"--only {','.join(only or [])} matches no entry of suite {suite.name!r}; its entries: "
                         f"{', '.join(e.name for e in suite.entries)}")
    return entries


def run_suite(name: str, data_path: str | Path, out_dir: str | Path, options: RunOptions,
              only: list[str] | None = None) -> list[tuple[SuiteEntry, dict]]:
    """Runs the suite's missing entries, with the data loaded once; returns every chosen entry's results.

    `options.task_overrides` apply to every entry, e.g. {"epochs": 50}. The entries fix their models'
    overrides. `only` keeps the entries with those names. It also keeps every entry of a model named
    that is not itself an entry's name.

    Every missing entry's seeds are jobs of one pool (`benchmarks.jobs`). They are Ray tasks, unless
    `options.placement` has one worker and no `address`. Their records stay under
    `<out_dir>/<entry>.seeds/` until the entry's results file is written."""
    from benchmarks.harness import describe_seed, load_splits, prepare_run, raise_unservable, split_set_of
    from benchmarks.jobs import JobsFailed, run_jobs
    from benchmarks.tasks import create_task
    from nfn_models import model_config

    suite = SUITES.get(name)()
    entries = select_entries(suite, only)
    if options.model_overrides:
        raise ValueError(f"suite {name} fixes its entries' models; model overrides "
                         f"{sorted(options.model_overrides)} have no entry to go to")
    extra, placement = dict(options.task_overrides), options.placement
    resolved = {}
    for entry in entries:  # --set wins over an entry's value, unless it makes two entries one
        key = json.dumps([entry.model, entry.model_overrides,
                          {_field(suite.task, k): v for k, v in {**entry.task_overrides, **extra}.items()}],
                         sort_keys=True, default=str)
        if key in resolved:
            raise ValueError(f"with --set {', '.join(sorted(extra))} the suite's entries {resolved[key]} and "
                             f"{entry.name} would be the same run under two names; leave out what the suite varies")
        resolved[key] = entry.name
    for entry in entries:  # every override checked before any data is loaded or model trained
        create_task(suite.task, **{**entry.task_overrides, **extra})
        model_config(entry.model, **entry.model_overrides)
    device = placement.job_device()
    out_dir = Path(out_dir)
    # the results already in --out are read (bounded, schema-checked) first: a damaged one is an
    # error naming it before hours go into the others
    kept = {e.name: read_results(out_dir / f"{e.name}.json") for e in entries
            if os.path.lexists(out_dir / f"{e.name}.json")}
    todo = [e for e in entries if e.name not in kept and not skip_path(out_dir, e.name).exists()]
    say = stderr_printer(f"suite {name}")
    say(f"{len(entries)} entries, {len(entries) - len(todo)} already in {out_dir}")
    if todo:
        splits, dataset = load_splits(data_path, None, split_set_of(extra))
        prepared, jobs = {}, []
        for entry in todo:
            try:
                entry_options = options.replace(model_overrides=entry.model_overrides,
                                                task_overrides={**entry.task_overrides, **extra})
                run = prepare_run(suite.task, entry.model, splits, dataset, entry_options,
                                  out_dir / f"{entry.name}.json", device=device, label=f"suite {name}: {entry.name}")
            except ValueError as error:  # the data cannot serve this protocol (e.g. a threshold leaves < 2 rows)
                _skip(say, out_dir, entry, error)
                continue
            prepared[entry.name] = run
            # keyed by the entry: the records land in <entry>.seeds/, where `bench run` keeps them
            jobs += [dataclasses.replace(job, key=f"{entry.name}.seeds/{job.key}") for job in run.jobs]
        start = time.perf_counter()
        failures: list[tuple[str, BaseException]] = []
        try:
            outcomes = run_jobs(jobs, out_dir, placement.workers, say, describe_seed, address=placement.address,
                                gpus_per_job=placement.gpus_per_job)
        except JobsFailed as failed:
            outcomes, failures = failed.outcomes, failed.errors
        unfinished = []
        for entry_name, run in prepared.items():
            prefix = f"{entry_name}.seeds/"
            errors = [(key, error) for key, error in failures if key.startswith(prefix)]
            if errors and all(isinstance(error, ValueError) for _, error in errors):
                _skip(say, out_dir, next(e for e in todo if e.name == entry_name),
                      errors[0][1])  # the data cannot serve it
            elif errors:
                unfinished += errors
            else:
                run.finish({key.removeprefix(prefix): outcome for key, outcome in outcomes.items()
                            if key.startswith(prefix)})
        say(f"{len(prepared)} entries run in {time.perf_counter() - start:.0f} s")
        if unfinished:  # after the others are written: a seed out of memory is its one line, else JobsFailed
            failed = JobsFailed(f"{len(unfinished)} job(s) failed ({', '.join(k for k, _ in unfinished)}); the "
                                f"entries that finished are written in {out_dir}. First: {unfinished[0][0]}: "
                                f"{unfinished[0][1]}", unfinished,
                                {key: outcome for key, outcome in outcomes.items()  # the failed entries' kept seeds
                                 if any(key.startswith(k.split("/")[0] + "/") for k, _ in unfinished)})
            raise_unservable(failed, out_dir)
            raise failed
    for entry in entries:
        if (record := skip_path(out_dir, entry.name)).exists():
            say(f"{entry.name} was skipped ({skip_reason(record)}); delete {record.name} to retry it")
    return [(e, kept[e.name] if e.name in kept else read_results(out_dir / f"{e.name}.json")) for e in entries
            if os.path.lexists(out_dir / f"{e.name}.json")]


def _skip(say: Callable[[str], None], out_dir: Path, entry: SuiteEntry, error: BaseException) -> None:
    """Records why the entry's data cannot serve it (kept across resumes) and says so."""
    write_skip(out_dir, entry.name, error)
    say(f"{entry.name} skipped: {error}")


def suite_table(rows: list[tuple[SuiteEntry, dict]]) -> str:
    """The suite's Markdown table: Kendall's tau for generalization, else the task's main metric."""
    if not rows or rows[0][1]["task"] == "generalization":
        return tau_table(rows)
    from benchmarks.tasks import get_task_class

    task = get_task_class(rows[0][1]["task"])
    references = sorted({name for _, r in rows for s in r["per_seed"] for name in s["ranking"]})
    lines = [f"| entry | model | protocol | {task.main_metric} | {' | '.join(references)} | parameters | s per seed |",
             "|---|---|---|---|" + "---|" * len(references) + "---|---|"]
    for entry, r in rows:
        metric = r["summary"][task.main_metric]
        shown = [f"{statistics.mean(s['ranking'][name] for s in r['per_seed'] if name in s['ranking']):.4f}"
                 if any(name in s["ranking"] for s in r["per_seed"]) else "" for name in references]
        seconds = statistics.mean(s["train_time_s"] for s in r["per_seed"])
        lines.append(f"| {entry.name} | {r['model']} | {entry.label} | {metric['mean']:.4f} ± {metric['std']:.4f} | "
                     f"{' | '.join(shown)} | {r['num_params']:,} | {seconds:.0f} |")
    return "\n".join(lines) + "\n"


def tau_table(rows: list[tuple[SuiteEntry, dict]]) -> str:
    """Markdown: entry, model, protocol, and Kendall tau-b mean +- std over the seeds.

    It adds the mean tie ceiling of the test targets, the test-set size and the training time per seed."""
    lines = ["| entry | model | subset / protocol | Kendall tau-b | tie ceiling | test rows | s per seed |",
             "|---|---|---|---|---|---|---|"]
    for entry, r in rows:
        tau = r["summary"]["kendall_tau"]
        ceiling = statistics.mean(s["ranking"]["kendall_tau_ceiling"] for s in r["per_seed"])
        sizes = sorted({int(s["ranking"]["num_targets"]) for s in r["per_seed"]})
        seconds = statistics.mean(s["train_time_s"] for s in r["per_seed"])
        lines.append(f"| {entry.name} | {r['model']} | {entry.label} | {tau['mean']:.3f} ± {tau['std']:.3f} "
                     f"| {ceiling:.3f} | {'/'.join(map(str, sizes))} | {seconds:.0f} |")
    return "\n".join(lines) + "\n"
