"""The two benchmarks the regimes are trained on, and one training run.

`agnews-chars` is a character-level language model of AG News text. The text is the 7,600
official test articles (`zoo.data.text.ag_news_7600`). Its 5,700-article training pool and
1,900-article test part are used. Articles are joined by newlines. Windows of `length + 1`
characters are cut at seeded random offsets. The model predicts each next character, with causal
attention. The alphabet is the training text's characters seen at least `min_count` times. The
rest map to one unknown symbol. Metrics: the test cross-entropy per character (nats) and
next-character accuracy.

`mnist-rows` reads MNIST digits as sequences of their 28 rows (28 pixels each, in [0, 1]). A linear
map embeds the rows; the output is mean-pooled and classified into 10 digits. Metrics: test
cross-entropy and accuracy, on a seeded subset of the 10,000 test images.

A run trains AdamW for a fixed number of steps on seeded batches, and evaluates once at the end.
The learning rate warms up linearly over 10% of the steps, then follows a cosine to 0. The
gradient norm is clipped at 1. Per test example, it returns the loss and the correct share; a
board re-scores these. Per head, it returns the regime its final parameters satisfy
(`conditions.classify`). That checks that the constraint held through training. The model is built
on the CPU, for its seeded init. It then moves to the run's device with the data. The batch draws
stay on a CPU generator."""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.tracks.tokens.conditions import classify, rotary_regimes
from benchmarks.tracks.tokens.constrained import ModelConfig, RegimeTransformer


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    name: str  # a key of BENCHMARKS
    train_examples: int
    test_examples: int
    min_count: int = 20  # agnews-chars: rarer characters are one unknown symbol


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 0.01


@dataclasses.dataclass
class SequenceData:
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    inputs: int  # vocabulary size, or features per token
    outputs: int
    causal: bool
    embed_tokens: bool
    description: dict


def _windows(text: np.ndarray, count: int, length: int, rng: np.random.Generator) -> np.ndarray:
    if len(text) <= length + 1:
        raise ValueError(f"the text has {len(text)} characters, fewer than one window of {length + 1}")
    starts = rng.integers(0, len(text) - length - 1, size=count)
    return np.stack([text[s:s + length + 1] for s in starts])


def agnews_chars(config: BenchmarkConfig, length: int) -> SequenceData:
    from zoo.data.text import ag_news_7600

    train_texts, _, test_texts, _ = ag_news_7600()
    counts = Counter("\n".join(train_texts))
    alphabet = sorted(c for c, n in counts.items() if n >= config.min_count)
    index = {c: i + 1 for i, c in enumerate(alphabet)}  # 0: unknown

    def encode(texts: list[str]) -> np.ndarray:
        return np.array([index.get(c, 0) for c in "\n".join(texts)], dtype=np.int64)

    rng = np.random.default_rng(0)  # the windows are the benchmark's, the same for every seed
    train = torch.from_numpy(_windows(encode(train_texts), config.train_examples, length, rng))
    test = torch.from_numpy(_windows(encode(test_texts), config.test_examples, length, rng))
    return SequenceData(train[:, :-1], train[:, 1:], test[:, :-1], test[:, 1:], len(alphabet) + 1,
                        len(alphabet) + 1, True, True,
                        {"source": "ag_news_7600", "alphabet": "".join(alphabet), "window": length,
                         "window_seed": 0, "min_count": config.min_count})


def mnist_rows(config: BenchmarkConfig, length: int) -> SequenceData:
    from zoo.data.images import SOURCES

    if length != 28:
        raise ValueError(f"mnist-rows has 28 tokens (the rows), so the model's length must be 28, got {length}")
    train, test, classes = SOURCES.get("mnist")()
    rng = np.random.default_rng(0)
    pick_train = torch.from_numpy(np.sort(rng.permutation(len(train))[:config.train_examples]))
    pick_test = torch.from_numpy(np.sort(rng.permutation(len(test))[:config.test_examples]))
    rows = lambda data, pick: data.x[pick].reshape(len(pick), 28, 28)  # noqa: E731 (pixels in [0, 1])
    return SequenceData(rows(train, pick_train), train.y[pick_train], rows(test, pick_test), test.y[pick_test],
                        28, classes, False, False, {"source": "mnist", "subset_seed": 0})


BENCHMARKS: dict[str, Callable[[BenchmarkConfig, int], SequenceData]] = {
    "agnews-chars": agnews_chars, "mnist-rows": mnist_rows}


def _schedule(step: int, steps: int) -> float:
    warm = max(1, steps // 10)
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))


@torch.no_grad()
def evaluate(model: RegimeTransformer, data: SequenceData, batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Per test example: its mean cross-entropy and its share of correct predictions."""
    model.eval()
    losses, correct = [], []
    for low in range(0, len(data.test_x), batch_size):
        x, y = data.test_x[low:low + batch_size], data.test_y[low:low + batch_size]
        logits = model(x)
        if data.causal:
            loss = F.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(1)
            hit = (logits.argmax(-1) == y).float().mean(1)
        else:
            loss = F.cross_entropy(logits, y, reduction="none")
            hit = (logits.argmax(-1) == y).float()
        losses.append(loss)
        correct.append(hit)
    return torch.cat(losses).double().cpu().numpy(), torch.cat(correct).double().cpu().numpy()


def head_regimes(model: RegimeTransformer, positions: int = 8) -> list[dict]:
    """Per head, its regime by the conditions on (W, V).

    For a constrained rotary model, it adds the regimes of `positions` evenly spaced positions under
    rotation (`conditions.rotary_regimes`). These include the diagonal term of `rotary-diag`."""
    out = []
    rotary = model.encoding != "absolute" and model.regime != "free"
    spots = list(range(0, model.config.length, max(1, model.config.length // positions)))
    for layer, (w, v) in enumerate(model.head_matrices()):
        for h in range(w.shape[0]):
            wh, vh = w[h].detach().double().cpu().numpy(), v[h].detach().double().cpu().numpy()
            r = classify(wh, vh, reduce=model.regime == "free")
            entry = {"layer": layer, "head": h, "regime": r.regime, "negative_share": r.negative_share,
                     "score_min_eigenvalue": r.score_eigenvalues[0], "value_eigenvalues": list(r.value_eigenvalues)}
            if rotary:
                diagonal = (0.0 if model.diagonal is None else
                            F.softplus(model.diagonal[layer, h]).detach().double().cpu().numpy())
                entry["rotary_regimes"] = [x.regime for x in rotary_regimes(wh, vh, spots, diagonal)]
            out.append(entry)
    return out


def train_run(data: SequenceData, model_config: ModelConfig, train: TrainConfig, regime: str, encoding: str,
              seed: int, device: torch.device | str = "cpu") -> tuple[RegimeTransformer, dict]:
    """Trains one model on `device`.

    Returns it (there) and its outcome: metrics, per-example results and head regimes."""
    from zoo.training.device import to_device

    model = RegimeTransformer(model_config, regime, encoding, data.inputs, data.outputs, data.causal,
                              data.embed_tokens, seed).to(device)
    data = to_device(data, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train.lr, weight_decay=train.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _schedule(s, train.steps))
    rng = torch.Generator().manual_seed(seed)
    start, losses = time.perf_counter(), []
    model.train()
    for _ in range(train.steps):
        pick = torch.randint(0, len(data.train_x), (train.batch_size,), generator=rng)
        x, y = data.train_x[pick], data.train_y[pick]
        logits = model(x)
        loss = F.cross_entropy(logits.transpose(1, 2), y) if data.causal else F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    loss, correct = evaluate(model, data)
    finite = bool(np.isfinite(loss).all())
    metrics = {"test_loss": float(loss.mean()) if finite else float("nan"), "test_accuracy": float(correct.mean())}
    return model, {"metrics": metrics, "example_loss": loss.tolist(), "example_correct": correct.tolist(),
                   "train_loss_last": float(np.mean(losses[-max(1, train.steps // 20):])),
                   "train_time_s": seconds, "num_params": sum(p.numel() for p in model.parameters()),
                   "head_regimes": head_regimes(model)}
