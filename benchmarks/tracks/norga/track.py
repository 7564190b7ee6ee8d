"""The `norga` track: NoRGa against HiDe-Prompt, L2P, DualPrompt, CODA-Prompt and the bounds.

`nfnzoo track run norga --profile tiny|default [--seeds ...] --out DIR` runs every method of the
profile on each of its class-incremental benchmarks over the seeds and writes, per benchmark and
method, a results file in the harness's format (`<benchmark>/<method>.json`: the final average
accuracy, cumulative average accuracy, final forgetting and, for the methods that infer a task,
the task-identity accuracy, per seed; the accuracy matrices in `<method>.examples.npz`), and
`<benchmark>-accuracy.png`: the average accuracy on the tasks seen so far after each task, one
line per method (mean over seeds).

Profiles:
- `tiny` (the test suite): a randomly initialised tiny ViT, 3 tasks of 2 glyph letters, one
  epoch of everything: the code path, not a result;
- `default` (offline): a ViT pretrained here on 71 glyph letters (`common.backbone`, cached),
  then 10 tasks of 5 held-out letters (test images in unseen faces) and MNIST in 5 tasks of 2
  digits; every method, seeds 42, 40, 44 (the authors').
The backbone's letters and the held-out letters are a fixed split (seed 0), the same for every
run; the class order of a benchmark follows the run's seed.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import platform
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from benchmarks.files import save_figure, write_json_atomic, write_npz_atomic
from benchmarks.results import SCHEMA_VERSION, summarize
from benchmarks.tracks.common.backbone import BackboneConfig, create_vit, pretrained_backbone
from benchmarks.tracks.common.glyphs import letters
from benchmarks.tracks.common.incremental import TaskSequence, glyph_sequence, mnist_sequence
from benchmarks.tracks.norga.bounds import JointTraining, LinearProbe, SequentialFineTuning
from benchmarks.tracks.norga.evaluate import run_sequence
from benchmarks.tracks.norga.hide import HiDeConfig, HiDePrompt
from benchmarks.tracks.norga.learners import Training
from benchmarks.tracks.norga.prompt_baselines import (CodaConfig, CodaPrompt, DualPrompt, DualPromptConfig, L2P,
                                                      L2PConfig)
from benchmarks.tracks.registry import Track, register_track
from zoo.schema import to_data

TASK = "continual-learning"


@dataclasses.dataclass(frozen=True)
class Benchmark:
    source: str  # "glyphs" (held-out letters) or "mnist"
    tasks: int
    train_per_class: int
    test_per_class: int

    @property
    def name(self) -> str:
        return f"{self.source}-{self.tasks}tasks"


@dataclasses.dataclass(frozen=True)
class NorgaProfile:
    backbone: BackboneConfig
    pretrain: bool  # False: the ViT stays randomly initialised (the tiny profile's code path)
    held_out: int  # letters kept out of pretraining, for the glyph benchmark
    benchmarks: tuple[Benchmark, ...]
    methods: tuple[str, ...]
    hide: HiDeConfig
    l2p: L2PConfig
    dualprompt: DualPromptConfig
    coda: CodaConfig
    bounds: Training


def _hide(gate):
    return lambda backbone, classes, tasks, profile, seed: HiDePrompt(
        backbone, classes, tasks, dataclasses.replace(profile.hide, gate=gate), seed)


METHODS: dict[str, Callable] = {
    "norga-tanh": _hide("tanh"), "norga-sigmoid": _hide("sigmoid"), "norga-gelu": _hide("gelu"),
    "hide-prompt": _hide(None),
    "l2p": lambda b, c, t, p, s: L2P(b, c, t, p.l2p, s),
    "dualprompt": lambda b, c, t, p, s: DualPrompt(b, c, t, p.dualprompt, s),
    "coda-prompt": lambda b, c, t, p, s: CodaPrompt(b, c, t, p.coda, s),
    "linear-probe": lambda b, c, t, p, s: LinearProbe(b, c, t, p.bounds, s),
    "sequential-finetune": lambda b, c, t, p, s: SequentialFineTuning(b, c, t, p.bounds, s),
    "joint": lambda b, c, t, p, s: JointTraining(b, c, t, p.bounds, s),
}

_TINY_TRAINING = Training(epochs=1, lr=1e-3, batch_size=8)
PROFILES = {
    "tiny": NorgaProfile(
        backbone=BackboneConfig(embed_dim=16, depth=2, num_heads=2, steps=0), pretrain=False, held_out=6,
        benchmarks=(Benchmark("glyphs", 3, 6, 3),), methods=tuple(METHODS),
        hide=HiDeConfig(layers=(0, 1), length=2, batch_size=8, tii_epochs=1, align_epochs=1, prompt_epochs=1,
                        head_epochs=1, pseudo_per_class=8),
        l2p=L2PConfig(pool_size=4, length=2, top_k=2, training=_TINY_TRAINING),
        dualprompt=DualPromptConfig(g_layers=(0,), g_length=2, e_layers=(1,), e_length=2, training=_TINY_TRAINING),
        coda=CodaConfig(layers=(0, 1), components=6, length=2, training=_TINY_TRAINING),
        bounds=_TINY_TRAINING),
    "default": NorgaProfile(
        backbone=BackboneConfig(embed_dim=64, depth=6, num_heads=4, steps=1500), pretrain=True, held_out=50,
        benchmarks=(Benchmark("glyphs", 10, 60, 20), Benchmark("mnist", 5, 200, 100)), methods=tuple(METHODS),
        hide=HiDeConfig(layers=(0, 1, 2, 3, 4), length=5, batch_size=64),
        l2p=L2PConfig(training=Training(epochs=5, lr=1e-3, batch_size=64)),
        dualprompt=DualPromptConfig(e_length=10, training=Training(epochs=5, lr=1e-3, batch_size=64)),
        coda=CodaConfig(components=50, length=8, training=Training(epochs=5, lr=1e-3, batch_size=64)),
        bounds=Training(epochs=5, lr=1e-4, batch_size=64)),
}


def letter_split(held_out: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(pretraining letters, held-out letters): a fixed seeded split of `glyphs.letters()`."""
    chosen = letters(32)
    order = np.random.default_rng(0).permutation(len(chosen))
    held = tuple(chosen[i] for i in sorted(order[:held_out]))
    return tuple(c for c in chosen if c not in held), held


def _sequence(benchmark: Benchmark, held: tuple[str, ...], seed: int) -> TaskSequence:
    if benchmark.source == "glyphs":
        return glyph_sequence(held, benchmark.tasks, benchmark.train_per_class, benchmark.test_per_class, seed)
    if benchmark.source == "mnist":
        return mnist_sequence(benchmark.tasks, benchmark.train_per_class, benchmark.test_per_class, seed)
    raise ValueError(f"unknown benchmark source {benchmark.source!r}; expected glyphs or mnist")


def _parameters(learner) -> int:
    seen, total = set(), 0
    for value in vars(learner).values():
        tensors = value.parameters() if isinstance(value, torch.nn.Module) else (
            [value] if isinstance(value, torch.nn.Parameter) else [])
        for tensor in tensors:
            if tensor.requires_grad and id(tensor) not in seen:
                seen.add(id(tensor))
                total += tensor.numel()
    return total


@register_track("norga")
class NorgaTrack(Track):
    description = "prompt-based continual learning: NoRGa vs HiDe-Prompt, L2P, DualPrompt, CODA-Prompt and bounds"
    PROFILES = PROFILES
    DEFAULT_SEEDS = (42, 40, 44)

    def run(self, profile: str, seeds: Sequence[int], out_dir: Path,
            progress: Callable[[str], None] | None = None) -> list[Path]:
        settings = self.profile(profile)
        say = progress or (lambda message: None)
        pretraining, held = letter_split(settings.held_out)
        config = dataclasses.replace(settings.backbone, letters=pretraining)
        if settings.pretrain:
            say(f"backbone: pretraining (or loading) a ViT on {len(pretraining)} glyph letters")
            backbone, record = pretrained_backbone(config, progress=None)
        else:
            with torch.random.fork_rng():
                torch.manual_seed(config.seed)
                backbone = create_vit(config).eval()
            record = {"sha256": None, "random_init": True}
        written = []
        for benchmark in settings.benchmarks:
            written += self._benchmark(settings, profile, benchmark, held, backbone, record, list(seeds),
                                       Path(out_dir), say)
        return written

    def _benchmark(self, settings, profile, benchmark, held, backbone, record, seeds, out_dir, say) -> list[Path]:
        definition = {"benchmark": dataclasses.asdict(benchmark), "held_out": list(held) if benchmark.source == "glyphs"
                      else None, "backbone": to_data(settings.backbone), "backbone_sha256": record.get("sha256")}
        dataset_hash = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()
        sequences = {seed: _sequence(benchmark, held, seed) for seed in seeds}
        curves, paths = {}, []
        for method in settings.methods:
            per_seed, matrices, params = [], {}, 0
            for seed in seeds:
                sequence = sequences[seed]
                learner = METHODS[method](copy.deepcopy(backbone), sequence.num_classes, len(sequence.tasks),
                                          settings, seed)
                start = time.perf_counter()
                outcome = run_sequence(learner, sequence)
                params = _parameters(learner)
                metrics = dict(outcome["metrics"])
                if outcome["task_identity_accuracy"] is not None:
                    metrics["task_identity_accuracy"] = outcome["task_identity_accuracy"]
                per_seed.append({"seed": seed, "metrics": metrics, "train_time_s": time.perf_counter() - start,
                                 "peak_memory_mb": None, "selection": {}, "ranking": {}})
                matrices[f"accuracy_matrix_seed{seed}"] = np.array(
                    [[np.nan if v is None else v for v in row] for row in outcome["accuracy_matrix"]])
                say(f"{benchmark.name} {method} seed {seed}: " + " ".join(f"{k}={v:.3f}" for k, v in metrics.items()))
            curves[method] = np.mean([np.nanmean(m, axis=0) for m in matrices.values()], axis=0)
            path = out_dir / benchmark.name / f"{method}.json"
            write_npz_atomic(path.with_name(f"{method}.examples.npz"), matrices)
            results = {
                "schema_version": SCHEMA_VERSION, "task": TASK, "model": method,
                "model_config": _method_config(method, settings), "task_config": {
                    "track": self.name, "profile": profile, "benchmark": dataclasses.asdict(benchmark)},
                "dataset": {"path": f"track:{self.name}/{benchmark.name}", "config": benchmark.name,
                            "dataset_hash": dataset_hash, "family": "track"},
                "seeds": seeds, "per_seed": per_seed, "summary": summarize([e["metrics"] for e in per_seed]),
                "num_params": params, "package_version": _version(), "created": _now(),
                "hardware": {"platform": platform.platform(), "python": platform.python_version(),
                             "torch": torch.__version__, "device": "cpu"},
                "predictions": None, "examples": f"{method}.examples.npz"}
            write_json_atomic(path, results)
            paths.append(path)
        _plot(curves, benchmark.name, out_dir / f"{benchmark.name}-accuracy.png")
        return paths


def _method_config(method: str, settings: NorgaProfile) -> dict:
    if method.startswith(("norga", "hide")):
        config = to_data(settings.hide)
        config["gate"] = None if method == "hide-prompt" else method.split("-", 1)[1]
        return config
    part = {"l2p": settings.l2p, "dualprompt": settings.dualprompt, "coda-prompt": settings.coda}.get(method)
    return to_data(part if part is not None else settings.bounds)


def _version() -> str:
    import zoo

    return zoo.__version__


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _plot(curves: dict[str, np.ndarray], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for method, curve in curves.items():
        axis.plot(np.arange(1, len(curve) + 1), curve, marker="o", label=method)
    axis.set_xlabel("tasks learned")
    axis.set_ylabel("average accuracy on the tasks seen (mean over seeds)")
    axis.set_title(title)
    axis.legend(fontsize="small", ncol=2)
    save_figure(figure, path)
