"""The `norga` track: NoRGa against HiDe-Prompt, L2P, DualPrompt, CODA-Prompt and the bounds.

`nfnzoo track run norga --profile tiny|default|paper|paper-imr [--seeds ...] [--workers N] --out DIR`
runs every method of the profile over the seeds. It does so on each of the profile's
class-incremental benchmarks. Each (benchmark, method, seed) is one resumable job
(`benchmarks.jobs`). Records go under `DIR/jobs/`, and a re-run takes the finished ones.

Per benchmark and method it writes a results file in the harness's format,
`<benchmark>/<method>.json`. Per seed, it holds the final average accuracy, cumulative average
accuracy and final forgetting. Methods that infer a task add the task-identity accuracy. The
accuracy matrices go in `<method>.examples.npz`. It also writes `<benchmark>-accuracy.png`. That is
the average accuracy on the tasks seen so far after each task, one line per method, mean over
seeds.

Profiles:

`tiny` is the test suite's: a randomly initialised tiny ViT, 3 tasks of 2 glyph letters. It trains
one epoch of everything. It checks the code path, not a result.

`default` runs offline. It uses a ViT pretrained here on 71 glyph letters (`common.backbone`,
cached). Its benchmarks are 10 tasks of 5 held-out letters, and MNIST in 5 tasks of 2 digits.
Letters have 40 training images each, and 20 test images in unseen faces. Digits have 120 / 100.
It runs every method with seeds 42, 40, 44, the authors'. Each task trains 4 epochs; joint
training, trained once on everything, takes 12. It is sized for a laptop (60 jobs,
docs/tracks/norga.md). The methods stay apart (README, "Tracks").

`paper` is the paper's setting: timm's ViT-B/16 pretrained on ImageNet-21k, on Split CIFAR-100. It
has 10 tasks, with all 500 training and 100 test images per class. It uses the authors' CIFAR
settings for the supervised ImageNet-21k backbone. Those are a sigmoid gate, prompt length 5, 50
prompt epochs and batch 128.

`paper-imr` runs the same backbone on Split ImageNet-R: 200 classes in 10 tasks, an 80/20 split,
prompt length 20. It reads `$NFNZOO_IMAGENET_R`, or `imagenet-r/` in a data root.

Both paper profiles run wherever timm can fetch the weights, and CIFAR-100 is local or
downloadable. The tests run their code path on a random tiny timm ViT.

The backbone's letters and the held-out letters are a fixed split (seed 0), the same for every
run. The class order of a benchmark follows the run's seed."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from benchmarks.tracks.common.backbone import BackboneConfig, TimmBackbone, load_backbone, state_sha256
from benchmarks.tracks.common.glyphs import letters
from benchmarks.tracks.common.incremental import TaskSequence, folder_sequence, glyph_sequence, source_sequence
from benchmarks.jobs import Job, fingerprint
from benchmarks.tracks.norga.bounds import JointTraining, LinearProbe, SequentialFineTuning
from benchmarks.tracks.norga.evaluate import run_sequence
from benchmarks.tracks.norga.hide import HiDeConfig, HiDePrompt
from benchmarks.tracks.common.learners import Training
from benchmarks.tracks.norga.prompt_baselines import (CodaConfig, CodaPrompt, DualPrompt, DualPromptConfig, L2P,
                                                      L2PConfig)
from benchmarks.tracks.registry import Track, TrackRun, register_track
from benchmarks.tracks.reporting import (job_hardware, per_seed_entries, plot_stage_curves, runs_hardware,
                                         seed_matrices, summary_table, write_track_results)
from zoo.storage.atomic import write_text_atomic
from zoo.validation.schema import to_data

TASK = "continual-learning"
IMAGENET_R_VARIABLE = "NFNZOO_IMAGENET_R"


@dataclasses.dataclass(frozen=True)
class Benchmark:
    source: str  # a key of SEQUENCES: "glyphs" (held-out letters), "mnist", "cifar100", "imagenet-r"
    tasks: int
    train_per_class: int | None  # None: every training image of the class (imagenet-r: images per class, split)
    test_per_class: int | None

    @property
    def name(self) -> str:
        return f"{self.source}-{self.tasks}tasks"


@dataclasses.dataclass(frozen=True)
class NorgaProfile:
    backbone: BackboneConfig | TimmBackbone
    pretrain: bool  # a BackboneConfig is pretrained on glyphs (cached); False: random (the tiny profile)
    held_out: int  # letters kept out of pretraining, for the glyph benchmark
    benchmarks: tuple[Benchmark, ...]
    methods: tuple[str, ...]
    hide: HiDeConfig
    l2p: L2PConfig
    dualprompt: DualPromptConfig
    coda: CodaConfig
    bounds: Training  # the linear probe's and sequential fine-tuning's training
    joint: Training | None = None  # joint training's; None: `bounds`


def _imagenet_r_root() -> Path:
    from zoo.data.images import local_folder

    return local_folder(IMAGENET_R_VARIABLE, "imagenet-r", "ImageNet-R (one folder of images per class)")


SEQUENCES: dict[str, Callable[[Benchmark, tuple[str, ...], int], TaskSequence]] = {
    "glyphs": lambda b, held, seed: glyph_sequence(held, b.tasks, b.train_per_class, b.test_per_class, seed),
    "mnist": lambda b, held, seed: source_sequence("mnist", b.tasks, b.train_per_class, b.test_per_class, seed,
                                                   pad_to=32),
    "cifar100": lambda b, held, seed: source_sequence("cifar100", b.tasks, b.train_per_class, b.test_per_class,
                                                      seed),
    "imagenet-r": lambda b, held, seed: folder_sequence(_imagenet_r_root(), b.tasks, seed,
                                                        limit_per_class=b.train_per_class),
}


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
    "joint": lambda b, c, t, p, s: JointTraining(b, c, t, p.joint or p.bounds, s),
}

_TINY_TRAINING = Training(epochs=1, lr=1e-3, batch_size=8)
_TINY_HIDE = HiDeConfig(layers=(0, 1), length=2, batch_size=8, tii_epochs=1, align_epochs=1, prompt_epochs=1,
                        head_epochs=1, pseudo_per_class=8)
_PAPER = dict(  # the authors' CIFAR-100 scripts for ViT-B/16 on ImageNet-21k (see the reference notes in hide.py)
    pretrain=True, held_out=0, methods=tuple(METHODS),
    hide=HiDeConfig(layers=(0, 1, 2, 3, 4), length=5, batch_size=128, tii_epochs=20, tii_lr=2.5e-4,
                    align_epochs=30, align_lr=0.0025, prompt_epochs=50, prompt_lr=0.015, head_epochs=80,
                    head_lr=0.05, pseudo_per_class=128, features_batch=256),
    l2p=L2PConfig(pool_size=30, length=5, top_k=5, training=Training(epochs=10, lr=0.0025, batch_size=128)),
    dualprompt=DualPromptConfig(training=Training(epochs=20, lr=0.0025, batch_size=128)),
    coda=CodaConfig(components=100, length=8, training=Training(epochs=20, lr=1e-3, batch_size=128)),
    bounds=Training(epochs=20, lr=1e-4, batch_size=128))
PROFILES = {
    "tiny": NorgaProfile(
        backbone=BackboneConfig(embed_dim=16, depth=2, num_heads=2, steps=0), pretrain=False, held_out=6,
        benchmarks=(Benchmark("glyphs", 3, 6, 3),), methods=tuple(METHODS), hide=_TINY_HIDE,
        l2p=L2PConfig(pool_size=4, length=2, top_k=2, training=_TINY_TRAINING),
        dualprompt=DualPromptConfig(g_layers=(0,), g_length=2, e_layers=(1,), e_length=2, training=_TINY_TRAINING),
        coda=CodaConfig(layers=(0, 1), components=6, length=2, training=_TINY_TRAINING),
        bounds=_TINY_TRAINING),
    "default": NorgaProfile(
        backbone=BackboneConfig(embed_dim=64, depth=6, num_heads=4, steps=1500), pretrain=True, held_out=50,
        benchmarks=(Benchmark("glyphs", 10, 40, 20), Benchmark("mnist", 5, 120, 100)), methods=tuple(METHODS),
        hide=HiDeConfig(layers=(0, 1, 2, 3, 4), length=5, batch_size=64, prompt_epochs=4),
        l2p=L2PConfig(training=Training(epochs=4, lr=1e-3, batch_size=64)),
        dualprompt=DualPromptConfig(e_length=10, training=Training(epochs=4, lr=1e-3, batch_size=64)),
        coda=CodaConfig(components=50, length=8, training=Training(epochs=4, lr=1e-3, batch_size=64)),
        bounds=Training(epochs=4, lr=1e-4, batch_size=64),
        # trained once on everything (not after every task): 3x the epochs, to be an upper bound
        joint=Training(epochs=12, lr=1e-4, batch_size=64)),
    "paper": NorgaProfile(backbone=TimmBackbone(), benchmarks=(Benchmark("cifar100", 10, None, None),), **_PAPER),
    "paper-imr": NorgaProfile(
        backbone=TimmBackbone(), benchmarks=(Benchmark("imagenet-r", 10, None, None),),
        **{**_PAPER, "hide": dataclasses.replace(_PAPER["hide"], length=20, prompt_epochs=150, align_lr=0.0025,
                                                 head_lr=0.005, head_epochs=30)}),
}


def letter_split(held_out: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(pretraining letters, held-out letters): a fixed seeded split of `glyphs.letters()`."""
    chosen = letters(32)
    order = np.random.default_rng(0).permutation(len(chosen))
    held = tuple(chosen[i] for i in sorted(order[:held_out]))
    return tuple(c for c in chosen if c not in held), held


def _sequence(benchmark: Benchmark, held: tuple[str, ...], seed: int) -> TaskSequence:
    if benchmark.source not in SEQUENCES:
        raise ValueError(f"unknown benchmark source {benchmark.source!r}; expected one of {sorted(SEQUENCES)}")
    return SEQUENCES[benchmark.source](benchmark, held, seed)


def _backbone_spec(settings: NorgaProfile) -> BackboneConfig | TimmBackbone:
    if isinstance(settings.backbone, BackboneConfig):
        return dataclasses.replace(settings.backbone, letters=letter_split(settings.held_out)[0])
    return settings.backbone


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


def run_job(settings: NorgaProfile, benchmark: Benchmark, method: str, seed: int, sequence: TaskSequence,
            backbone: torch.nn.Module, backbone_sha256: str, device: str = "cpu") -> dict:
    """One method on one benchmark with one seed (a job): the matrix and metrics.

    The driver read the sequence's images and the backbone (`NorgaTrack.run`). The backbone's weights
    are checked here against the checksum the driver computed. So a job runs on the weights the run
    records. The learner is built on the CPU, for its seeded init. It then moves to `device` with the
    images."""
    import time

    from benchmarks.memory import peak_mb, reset_peak

    arrived = state_sha256(backbone)
    if arrived != backbone_sha256:
        raise ValueError(f"the backbone arrived with sha256 {arrived[:12]}…, not the driver's {backbone_sha256[:12]}…")
    reset_peak(device)
    learner = METHODS[method](copy.deepcopy(backbone), sequence.num_classes, len(sequence.tasks), settings, seed)
    learner.to(device)
    sequence = sequence.to(device)
    start = time.perf_counter()
    outcome = run_sequence(learner, sequence)
    metrics = dict(outcome["metrics"])
    if outcome["task_identity_accuracy"] is not None:
        metrics["task_identity_accuracy"] = outcome["task_identity_accuracy"]
    return {"metrics": metrics, "accuracy_matrix": outcome["accuracy_matrix"],
            "train_time_s": time.perf_counter() - start, "num_params": _parameters(learner),
            "peak_memory_mb": peak_mb(device), "hardware": job_hardware(device)}


def _describe(outcome: dict) -> str:
    short = {"final_average_accuracy": "FAA", "cumulative_average_accuracy": "CAA", "final_forgetting": "FFM",
             "task_identity_accuracy": "TII"}
    return " ".join(f"{short.get(k, k)} {v:.3f}" for k, v in outcome["metrics"].items())


@register_track("norga")
class NorgaTrack(Track):
    description = "prompt-based continual learning: NoRGa vs HiDe-Prompt, L2P, DualPrompt, CODA-Prompt and bounds"
    PROFILES = PROFILES
    DEFAULT_SEEDS = (42, 40, 44)

    def execute(self, run: TrackRun) -> list[Path]:
        profile, settings, seeds, out_dir, say, device = (run.profile, run.settings, run.seeds, run.out_dir,
                                                           run.say, run.device)
        spec = _backbone_spec(settings)
        say(f"backbone: {type(spec).__name__} (pretrained here on glyphs, or loaded from the cache)"
            if settings.pretrain and isinstance(spec, BackboneConfig) else f"backbone: {spec}")
        steps = getattr(spec, "steps", 0)

        def pretraining(step: int, loss: float) -> None:
            if (step + 1) % 100 == 0 or step + 1 == steps:
                say(f"backbone pretraining: step {step + 1}/{steps}, loss {loss:.3f}")

        backbone, record = load_backbone(spec, settings.pretrain, pretraining)  # read here: the jobs get it through Ray
        if record.get("cached") is False:
            say(f"backbone pretrained in {record['wall_time_s']:.0f} s (accuracy {record['train_accuracy']:.3f} on "
                f"augmented training letters), cached with sha256 {record['sha256'][:12]}…")
        held = letter_split(settings.held_out)[1]
        backbone_sha256 = state_sha256(backbone)
        # each (benchmark, seed)'s images are read here once and shared by its methods' jobs
        sequences = {(b, s): _sequence(b, held, s) for b in settings.benchmarks for s in seeds}
        on_device = run.on_device
        jobs = [Job(f"jobs/{b.name}/{m}/seed{s}", run_job, (settings, b, m, s, sequences[b, s], backbone,
                                                            backbone_sha256, device),
                    fingerprint(spec, record.get("sha256"), b, held if b.source == "glyphs" else None,
                                _method_config(m, settings), s, *on_device))
                for b in settings.benchmarks for m in settings.methods for s in seeds]
        outcomes = run.run_jobs(jobs, _describe)
        written = []
        for benchmark in settings.benchmarks:
            definition = {"benchmark": dataclasses.asdict(benchmark), "backbone": to_data(spec),
                          "held_out": list(held) if benchmark.source == "glyphs" else None,
                          "backbone_sha256": record.get("sha256")}
            curves = {}
            for method in settings.methods:
                runs = [outcomes[f"jobs/{benchmark.name}/{method}/seed{s}"] for s in seeds]
                matrices = seed_matrices(runs, seeds)
                with np.errstate(all="ignore"):
                    stage = [np.array([np.nanmean(m[:t + 1, t]) if np.isfinite(m[:t + 1, t]).all() else np.nan
                                       for t in range(m.shape[0])]) for m in matrices.values()]
                curves[method] = np.mean(stage, axis=0)
                per_seed = per_seed_entries(runs, seeds)
                written.append(write_track_results(
                    out_dir / benchmark.name / f"{method}.json", task=TASK, track=self.name, profile=profile,
                    benchmark=benchmark.name, method=method, method_config=_method_config(method, settings),
                    definition=definition, per_seed=per_seed, matrices=matrices, num_params=runs[0]["num_params"],
                    hardware=runs_hardware(runs)))
            plot_stage_curves(curves, f"{benchmark.name} ({profile}, seeds {', '.join(map(str, seeds))})",
                              out_dir / f"{benchmark.name}-accuracy.png")
            table = summary_table(written[-len(settings.methods):], f"{benchmark.name} ({profile} profile)")
            write_text_atomic(out_dir / f"{benchmark.name}.md", table)
            say("\n" + table)
        return written


def _method_config(method: str, settings: NorgaProfile) -> dict:
    if method.startswith(("norga", "hide")):
        config = to_data(settings.hide)
        config["gate"] = None if method == "hide-prompt" else method.split("-", 1)[1]
        return config
    part = {"l2p": settings.l2p, "dualprompt": settings.dualprompt, "coda-prompt": settings.coda,
            "joint": settings.joint}.get(method)
    return to_data(part if part is not None else settings.bounds)
