"""The `token-dynamics` track: token dynamics in self-attention (Pham et al., NeurIPS 2025).

`nfnzoo track run token-dynamics --profile tiny|default [--seeds 0,1,2] [--workers N] [--out DIR]`
runs three parts as resumable jobs (`benchmarks.jobs`).

1. The MiniLM study (`study.minilm_study`) finds every head's regime by the conditions and by
   integration. It writes `minilm-heads.md`.
2. The regime training (`study.regime_run`) trains one tiny transformer per benchmark, regime,
   encoding and seed. Benchmarks are `agnews-chars` and `mnist-rows`. Regimes are `free`, `pd`,
   `hd` and `nd`. Encodings are `absolute`, `rotary` and `rotary-diag`. It writes `training.md`,
   and a results file per (benchmark, regime-encoding) in the harness's format. That file is
   `<benchmark>/<regime>-<encoding>.json`, with task `token-dynamics`.
3. The zoo study (`study.zoo_study`) generates a Transformer-zoo profile without and with residual
   connections. It classifies every member's heads and integrates its first block's heads on
   MNIST, beside its accuracy. It writes `zoo.md` and `zoo.png`. It also writes `zoo-heads.csv`:
   per member, by `model_id`, the quantities a weight-space model can be asked to predict.

It also draws `trajectories.png`: norms and distances against time, per trained regime and for
MiniLM's heads.

Profiles:

- `tiny` is the test suite's. It takes 2 MiniLM heads and 60 training steps of a 16-wide model on
  small subsets. It runs the `pd` and `nd` regimes with absolute and rotary-diag encodings, and
  the zoo's `tiny` profile.
- `default` is the documented run (docs/tracks/token-dynamics.md). It takes all 72 MiniLM heads,
  and every regime and encoding on both benchmarks for 3 seeds. The model is 32 wide, with 2
  layers of 2 heads, trained 800 steps. The zoo uses its `demo` profile: 160 runs per zoo, every
  optimizer, learning rate and init std of the paper's grid."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas

from benchmarks.tasks.token_dynamics import example_predictions
from benchmarks.jobs import Job, fingerprint, run_jobs
from benchmarks.tracks.registry import Track, TrackRun, register_track
from benchmarks.tracks.reporting import runs_hardware, write_results_files
from benchmarks.tracks.tokens.constrained import ENCODINGS, REGIME_NEGATIVE_SHARE, ModelConfig
from benchmarks.tracks.tokens.report import (minilm_table, plot_trajectories, plot_zoo, training_table, zoo_table,
                                             zoo_targets)
from benchmarks.tracks.tokens.study import (MiniLMConfig, OdeConfig, ZooConfig, benchmark_data, minilm_study,
                                            regime_run, zoo_study)
from benchmarks.tracks.tokens.training import BenchmarkConfig, TrainConfig
from zoo.storage.atomic import write_text_atomic
from zoo.validation.schema import to_data

TASK = "token-dynamics"
TRAINING_REGIMES = ("free", *REGIME_NEGATIVE_SHARE)  # standard attention, then the constrained scenarios


@dataclasses.dataclass(frozen=True)
class RegimeBenchmark:
    data: BenchmarkConfig
    model: ModelConfig


@dataclasses.dataclass(frozen=True)
class TokenProfile:
    minilm: MiniLMConfig
    ode: OdeConfig
    benchmarks: tuple[RegimeBenchmark, ...]
    train: TrainConfig
    regimes: tuple[str, ...] = TRAINING_REGIMES
    encodings: tuple[str, ...] = ENCODINGS
    zoo: ZooConfig | None = ZooConfig()


PROFILES = {
    "tiny": TokenProfile(
        minilm=MiniLMConfig(texts=2, max_length=16, layers=(0,), heads=(0, 1)), ode=OdeConfig(steps=20, sequences=2),
        benchmarks=(RegimeBenchmark(BenchmarkConfig("agnews-chars", 64, 16), ModelConfig(16, 2, 1, 32, 32)),
                    RegimeBenchmark(BenchmarkConfig("mnist-rows", 64, 16), ModelConfig(16, 2, 1, 32, 28))),
        train=TrainConfig(steps=6, batch_size=8), regimes=("pd", "nd"), encodings=("absolute", "rotary-diag"),
        zoo=ZooConfig(profile="tiny", in_process=True)),
    "default": TokenProfile(
        minilm=MiniLMConfig(), ode=OdeConfig(),
        benchmarks=(RegimeBenchmark(BenchmarkConfig("agnews-chars", 20000, 1000), ModelConfig(length=64)),
                    RegimeBenchmark(BenchmarkConfig("mnist-rows", 20000, 2000), ModelConfig(length=28))),
        train=TrainConfig(steps=800, batch_size=32), zoo=ZooConfig(profile="demo")),
}


def definition(settings: TokenProfile, bench: RegimeBenchmark) -> dict:
    """The benchmark's definition: what every regime and encoding shares (its hash is the dataset's)."""
    return {"benchmark": {"name": bench.data.name, "train_examples": bench.data.train_examples,
                          "test_examples": bench.data.test_examples, "tokens": bench.model.length},
            "data": to_data(bench.data), "model": to_data(bench.model), "training": to_data(settings.train)}


def _describe(outcome: dict) -> str:
    if "metrics" in outcome:
        m = outcome["metrics"]
        return f"test acc. {m['test_accuracy']:.3f}, loss {m['test_loss']:.3f}"
    if "heads" in outcome:
        return f"{len(outcome['heads'])} MiniLM heads"
    return f"{len(outcome['members'])} zoo members"


@register_track("token-dynamics")
class TokenDynamicsTrack(Track):
    description = ("token dynamics in self-attention: MiniLM's heads by regime, tiny transformers trained in the "
                   "divergent, mixed and convergent regimes with absolute and rotary encodings, and the zoo's heads")
    PROFILES = PROFILES
    DEFAULT_SEEDS = (0, 1, 2)

    def execute(self, run: TrackRun) -> list[Path]:
        profile, settings, seeds, out_dir, say, device = (run.profile, run.settings, run.seeds, run.out_dir,
                                                           run.say, run.device)
        on_device = run.on_device
        jobs = [Job("jobs/minilm", minilm_study, (settings.minilm, settings.ode, device),
                    fingerprint(settings.minilm, settings.ode, *on_device))]
        for bench in settings.benchmarks:
            data = benchmark_data(bench.data, bench.model.length)  # read here: the jobs get it through Ray
            for regime in settings.regimes:
                for encoding in settings.encodings:
                    for seed in seeds:
                        args = (bench.data, bench.model, settings.train, settings.ode, regime, encoding, seed)
                        jobs.append(Job(f"jobs/{bench.data.name}/{regime}-{encoding}/seed{seed}", regime_run,
                                        (*args, data, device), fingerprint(*args, *on_device)))
        if settings.zoo is not None:  # Ray inside: run it in this process, after the pool
            zoo_job = Job("jobs/zoo", zoo_study, (settings.zoo, str(out_dir / "zoos"), settings.ode),
                          fingerprint(settings.zoo, settings.ode))
        outcomes = run.run_jobs(jobs, _describe)
        if settings.zoo is not None:
            outcomes.update(run_jobs([zoo_job], out_dir, 1, say, _describe))
        written = self._report(settings, profile, seeds, outcomes, out_dir, say)
        return written

    def _report(self, settings: TokenProfile, profile: str, seeds: Sequence[int], outcomes: dict, out_dir: Path,
                say: Callable[[str], None]) -> list[Path]:
        minilm = outcomes["jobs/minilm"]
        text = minilm_table(minilm)
        write_text_atomic(out_dir / "minilm-heads.md", text)
        say("\n" + text.split("\n\n| layer")[0])
        written, grouped, drawn = [], {}, {}
        for bench in settings.benchmarks:
            defined = definition(settings, bench)
            for regime in settings.regimes:
                for encoding in settings.encodings:
                    runs = [outcomes[f"jobs/{bench.data.name}/{regime}-{encoding}/seed{s}"] for s in seeds]
                    grouped[(bench.data.name, regime, encoding)] = runs
                    if encoding == settings.encodings[0] and bench is settings.benchmarks[-1]:
                        drawn[f"{regime} ({bench.data.name})"] = runs[0]
                    method = f"{regime}-{encoding}"
                    predictions = [example_predictions(np.asarray(r["example_loss"]), np.asarray(r["example_correct"]),
                                                       s) for s, r in zip(seeds, runs)]
                    per_seed = [{"seed": s, "metrics": r["metrics"], "train_time_s": r["train_time_s"],
                                 "peak_memory_mb": r.get("peak_memory_mb"),
                                 "selection": {"steps": settings.train.steps},
                                 "ranking": {}} for s, r in zip(seeds, runs)]
                    written.append(write_results_files(
                        out_dir / bench.data.name / f"{method}.json", task=TASK, track=self.name, profile=profile,
                        benchmark=bench.data.name, method=method,
                        method_config={"regime": regime, "encoding": encoding,
                                       "head_regimes": [h["regime"] for h in runs[0]["head_regimes"]]},
                        definition=defined, per_seed=per_seed,
                        predictions=pandas.concat(predictions, ignore_index=True),
                        arrays={f"example_loss_seed{s}": np.asarray(r["example_loss"]) for s, r in zip(seeds, runs)},
                        num_params=runs[0]["num_params"], hardware=runs_hardware(runs)))
        table = training_table(grouped, f"Regime training ({profile}, seeds {', '.join(map(str, seeds))})")
        write_text_atomic(out_dir / "training.md", table)
        say("\n" + table)
        plot_trajectories(drawn, minilm, out_dir / "trajectories.png")
        if "jobs/zoo" in outcomes:
            zoo = outcomes["jobs/zoo"]
            table = zoo_table(zoo)
            write_text_atomic(out_dir / "zoo.md", table)
            plot_zoo(zoo, out_dir / "zoo.png")
            write_text_atomic(out_dir / "zoo-heads.csv", zoo_targets(zoo).to_csv(index=False))
            say("\n" + table)
        return written
