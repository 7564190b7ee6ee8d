"""Relation-extraction data for the continual tracks: FewRel-format files, checked, split into tasks.

The format is FewRel 1.0's (Han et al., EMNLP 2018); its SemEval-2010 task 8 file has the same
layout. A file is a JSON object mapping a relation id to its sentences. Each sentence is
`{"tokens": [...], "h": [name, entity id, [[token positions]]], "t": [...]}`. The head and tail
entities are (lists of) runs of token positions.

Every record is checked as it is read. Some inputs fail: a sentence whose entity span is out of
range, an unknown relation id, a file that is not FewRel-formatted. The error names the
file, the relation and the record.

A benchmark is a list of sources (`Source`). Each is a file and a prefix for its relation ids,
e.g. `wiki:P177` or `semeval:Cause-Effect(e1,e2)`. It takes every relation of them, or the named
ones. A per-relation train/test split is drawn once with a fixed split seed. So every task order
sees the same examples. A task order is a seeded permutation of the relations, cut into tasks of
near-equal size. `np.array_split` makes 33 relations in 8 tasks into one task of 5 and seven of 4."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from benchmarks.files import read_json

MAX_RELATION_BYTES = 256 * 2**20  # FewRel's train_wiki.json is about 60 MB


@dataclasses.dataclass(frozen=True)
class Sentence:
    tokens: tuple[str, ...]
    head: tuple[int, int]  # first and last token of the head entity (inclusive)
    tail: tuple[int, int]
    relation: str  # the prefixed relation id, e.g. "wiki:P177"


@dataclasses.dataclass(frozen=True)
class Source:
    file: str  # a FewRel-format JSON file (relative to the data folder, or absolute)
    prefix: str  # prepended to its relation ids: "wiki", "semeval"


@dataclasses.dataclass(frozen=True)
class RelationTask:
    classes: tuple[int, ...]  # global relation labels
    train: tuple[int, ...]  # indices into the benchmark's sentences
    test: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class RelationSequence:
    relation_names: tuple[str, ...]  # by global label
    sentences: tuple[Sentence, ...]  # every sentence a task uses
    labels: np.ndarray  # (len(sentences),) global relation label of each
    tasks: tuple[RelationTask, ...]

    @property
    def num_relations(self) -> int:
        return len(self.relation_names)


def _span(entity, tokens: int, where: str, role: str) -> tuple[int, int]:
    if not (isinstance(entity, list) and len(entity) >= 3 and isinstance(entity[2], list) and entity[2]):
        raise ValueError(f"{where}: the {role} entity must be [name, id, [[token positions], ...]], got "
                         f"{entity!r:.120}")
    positions = entity[2][0]
    if not (isinstance(positions, list) and positions and all(isinstance(p, int) for p in positions)):
        raise ValueError(f"{where}: the {role} entity's first span must be a list of token positions, got "
                         f"{positions!r:.120}")
    low, high = min(positions), max(positions)
    if low < 0 or high >= tokens:
        raise ValueError(f"{where}: the {role} entity span {positions} is out of range for a sentence of "
                         f"{tokens} tokens (positions 0-{tokens - 1})")
    return low, high


def read_fewrel(path: str | Path, prefix: str) -> dict[str, list[Sentence]]:
    """Every relation of a FewRel-format file, its sentences checked (errors name the file and record)."""
    path = Path(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path}: no such relation file (a FewRel-format JSON file was expected)")
    try:  # bounded: a regular file of at most MAX_RELATION_BYTES, nesting depth limited
        data = read_json(path, limit=MAX_RELATION_BYTES)
    except ValueError as error:
        raise ValueError(f"{path}: not JSON ({str(error).removeprefix(f'{path}: ')}); "
                         "a FewRel-format file was expected") from None
    if not isinstance(data, dict) or not data or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{path}: not FewRel-formatted: expected a JSON object mapping each relation id to a list "
                         f"of sentences, got {type(data).__name__}")
    relations: dict[str, list[Sentence]] = {}
    for relation, records in data.items():
        name = f"{prefix}:{relation}"
        sentences = []
        for index, record in enumerate(records):
            where = f"{path}: relation {relation!r}, record {index}"
            if not isinstance(record, dict) or not {"tokens", "h", "t"} <= set(record):
                keys = sorted(record) if isinstance(record, dict) else type(record).__name__
                raise ValueError(f"{where}: not FewRel-formatted: expected keys tokens, h, t, got {keys}")
            tokens = record["tokens"]
            if not (isinstance(tokens, list) and tokens and all(isinstance(t, str) for t in tokens)):
                raise ValueError(f"{where}: tokens must be a non-empty list of strings")
            sentences.append(Sentence(tuple(tokens), _span(record["h"], len(tokens), where, "head"),
                                      _span(record["t"], len(tokens), where, "tail"), name))
        relations[name] = sentences
    return relations


def read_sources(folder: str | Path, sources: Sequence[Source]) -> dict[str, list[Sentence]]:
    relations: dict[str, list[Sentence]] = {}
    for source in sources:
        file = Path(source.file) if Path(source.file).is_absolute() else Path(folder) / source.file
        for name, sentences in read_fewrel(file, source.prefix).items():
            if name in relations:
                raise ValueError(f"{file}: relation {name!r} appears in two sources; give them distinct prefixes")
            relations[name] = sentences
    return relations


def relation_sequence(relations: dict[str, list[Sentence]], tasks: int, train_per_relation: int | None,
                      test_per_relation: int | None, order_seed: int, split_seed: int = 0,
                      names: Sequence[str] | None = None, test_fraction: float = 0.25) -> RelationSequence:
    """The relations (all, or `names`), split per relation into train/test once with `split_seed`.

    They are then ordered with `order_seed` and cut into `tasks` tasks. `None` per relation means every
    sentence, with `test_fraction` of them for testing."""
    chosen = sorted(relations) if names is None else list(names)
    unknown = [n for n in chosen if n not in relations]
    if unknown:
        raise ValueError(f"unknown relation id(s) {unknown}; the data hold {len(relations)}: {sorted(relations)}")
    if not 1 <= tasks <= len(chosen):
        raise ValueError(f"{len(chosen)} relations do not split into {tasks} tasks")
    split = np.random.default_rng(split_seed)
    sentences: list[Sentence] = []
    labels: list[int] = []
    train_of, test_of = {}, {}
    for label, name in enumerate(chosen):
        members = relations[name]
        if train_per_relation is None or test_per_relation is None:
            test_n = max(1, int(round(len(members) * test_fraction)))
            train_n = len(members) - test_n
        else:
            train_n, test_n = train_per_relation, test_per_relation
        if train_n + test_n > len(members) or train_n < 2 or test_n < 1:
            raise ValueError(f"relation {name!r} has {len(members)} sentences; {train_n} train + {test_n} test "
                             f"were asked for (at least 2 train and 1 test)")
        picked = split.permutation(len(members))[:train_n + test_n]
        start = len(sentences)
        sentences += [members[i] for i in picked]
        labels += [label] * len(picked)
        train_of[label] = tuple(range(start, start + train_n))
        test_of[label] = tuple(range(start + train_n, start + train_n + test_n))
    order = np.random.default_rng(order_seed).permutation(len(chosen))
    built = []
    for part in np.array_split(order, tasks):
        members = tuple(sorted(int(r) for r in part))
        built.append(RelationTask(members, tuple(i for r in members for i in train_of[r]),
                                  tuple(i for r in members for i in test_of[r])))
    return RelationSequence(tuple(chosen), tuple(sentences), np.asarray(labels, dtype=np.int64), tuple(built))
