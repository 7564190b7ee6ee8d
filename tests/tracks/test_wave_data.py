"""The wave-cre track's data: FewRel-format files checked record by record, the split, the markers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from benchmarks.tracks.wave.encoder import MARKERS, EncoderConfig, load_encoder, tokenize
from benchmarks.tracks.wave.relations import Sentence, Source, read_fewrel, read_sources, relation_sequence
from benchmarks.tracks.wave.track import OFFLINE_SOURCES, fewrel_folder


def _record(tokens, head, tail):
    return {"tokens": tokens, "h": ["x", "Q1", [head]], "t": ["y", "Q2", [tail]]}


def _write(path, data):
    path.write_text(json.dumps(data))
    return path


def test_the_offline_files_hold_33_relations_with_checked_spans():
    relations = read_sources(fewrel_folder(), OFFLINE_SOURCES)
    assert len(relations) == 33 and sum(len(v) for v in relations.values()) == 11200 + 8851
    assert sum(name.startswith("wiki:") for name in relations) == 16
    for sentences in relations.values():
        for s in sentences[:50]:
            assert 0 <= s.head[0] <= s.head[1] < len(s.tokens) and 0 <= s.tail[0] <= s.tail[1] < len(s.tokens)


@pytest.mark.parametrize("data, message", [
    ([1, 2], "not FewRel-formatted: expected a JSON object mapping each relation id"),
    ({"P1": [{"tokens": ["a"], "h": ["a", "Q", [[0]]]}]},
     "relation 'P1', record 0: not FewRel-formatted: expected keys"),
    ({"P1": [_record(["a", "b"], [0], [1]), _record(["a", "b"], [0], [5])]},
     "relation 'P1', record 1: the tail entity span [5] is out of range for a sentence of 2 tokens"),
    ({"P1": [{"tokens": ["a"], "h": ["a"], "t": ["a", "Q", [[0]]]}]}, "record 0: the head entity must be"),
    ({"P1": [_record([], [0], [0])]}, "record 0: tokens must be a non-empty list"),
])
def test_a_wrong_file_fails_naming_the_file_relation_and_record(tmp_path, data, message):
    path = _write(tmp_path / "bad.json", data)
    with pytest.raises(ValueError) as error:
        read_fewrel(path, "x")
    assert message in str(error.value) and str(path) in str(error.value)


def test_a_missing_or_non_json_file_and_an_unknown_relation_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.json: no such relation file"):
        read_fewrel(tmp_path / "nothing.json", "x")
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(ValueError, match="text.json: not JSON"):
        read_fewrel(tmp_path / "text.json", "x")
    relations = {"x:P1": [Sentence(("a", "b"), (0, 0), (1, 1), "x:P1")] * 5}
    with pytest.raises(ValueError, match=r"unknown relation id\(s\) \['x:P9'\]"):
        relation_sequence(relations, 1, 2, 1, 0, names=["x:P1", "x:P9"])
    with pytest.raises(ValueError, match="has 5 sentences; 4 train \\+ 2 test"):
        relation_sequence(relations, 1, 4, 2, 0)
    with pytest.raises(ValueError, match="appears in two sources"):
        _write(tmp_path / "a.json", {"P1": [_record(["a", "b"], [0], [1])]})
        read_sources(tmp_path, [Source("a.json", "x"), Source("a.json", "x")])


def test_the_split_is_fixed_across_orders_and_the_orders_differ():
    relations = read_sources(fewrel_folder(), OFFLINE_SOURCES)
    first, second = (relation_sequence(relations, 8, 24, 16, seed) for seed in (2021, 2121))
    assert first.sentences == second.sentences and np.array_equal(first.labels, second.labels)
    assert [len(t.classes) for t in first.tasks] == [5, 4, 4, 4, 4, 4, 4, 4]
    assert [t.classes for t in first.tasks] != [t.classes for t in second.tasks]
    assert sorted(r for t in first.tasks for r in t.classes) == list(range(33))
    for task in first.tasks:
        assert not set(task.train) & set(task.test)
        assert set(first.labels[list(task.train)]) == set(task.classes) == set(first.labels[list(task.test)])
        assert len(task.train) == 24 * len(task.classes) and len(task.test) == 16 * len(task.classes)


@pytest.fixture(scope="module")
def tiny_encoder():
    return load_encoder(EncoderConfig(name="tiny-random"))


def test_markers_surround_the_entities_and_their_positions_are_recorded(tiny_encoder):
    tokenizer, _, _ = tiny_encoder
    sentence = Sentence(("the", "cape", "girardeau", "bridge", "spans", "the", "mississippi", "."), (1, 3), (6, 6), "x")
    bank = tokenize(tokenizer, [sentence], 64)
    pieces = tokenizer.convert_ids_to_tokens(bank.ids[0].tolist())
    e11, e12, e21, e22 = MARKERS
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
    assert pieces[bank.head[0]] == e11 and pieces[bank.tail[0]] == e21
    head = pieces[pieces.index(e11) + 1:pieces.index(e12)]
    assert "".join(p.replace("##", "") for p in head) == "capegirardeaubridge"
    assert pieces[pieces.index(e21) + 1:pieces.index(e22)] == ["mississippi"]


def test_a_long_sentence_is_cut_around_its_entities_and_far_entities_fail(tiny_encoder):
    tokenizer, _, _ = tiny_encoder
    words = tuple(f"w{i}" for i in range(200))
    bank = tokenize(tokenizer, [Sentence(words, (120, 120), (126, 126), "x")], 32)
    pieces = tokenizer.convert_ids_to_tokens(bank.ids[0].tolist())
    assert len(pieces) <= 32 and pieces[bank.head[0]] == MARKERS[0] and pieces[bank.tail[0]] == MARKERS[2]
    with pytest.raises(ValueError, match="sentence 0 .*wordpieces apart, more than max_length 32"):
        tokenize(tokenizer, [Sentence(words, (2, 2), (150, 150), "x")], 32)


def test_padding_is_masked_and_a_prompt_shifts_the_marker_positions(tiny_encoder):
    tokenizer, encoder, _ = tiny_encoder
    short = Sentence(("a", "cat", "sat"), (1, 1), (2, 2), "x")
    long = Sentence(tuple("the old cat sat on the mat near the door".split()), (2, 2), (6, 6), "x")
    bank = tokenize(tokenizer, [short, long], 64)
    with torch.no_grad():
        together = encoder(*bank.batch([0, 1]))
        alone = encoder(*bank.batch([0]))
        assert torch.allclose(together[0], alone[0], atol=1e-5)  # the padding of the short one is masked
        prompt = torch.randn((1, 3, encoder.dim), generator=torch.Generator().manual_seed(0))
        prompted = encoder(*bank.batch([0]), prompt)
        assert prompted.shape == (1, 2 * encoder.dim) and not torch.allclose(prompted, alone, atol=1e-3)
        hidden = encoder.bert(input_ids=bank.batch([0])[0]).last_hidden_state[0]
        assert torch.allclose(alone[0], torch.cat([hidden[bank.head[0]], hidden[bank.tail[0]]]), atol=1e-5)
    assert encoder._prompts is None  # the prompt is only inserted during its own call
