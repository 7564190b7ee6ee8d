"""Population training of the Transformer family: K runs in one tensor program (`zoo.training.population`).

Every trainable tensor is stacked on a leading member dimension (K, ...).
Each layer is computed for all members at once.
The 4x4 stride-4 patch convolution is a reshape plus a batched matrix product.
Q/K/V/O, the MLP and the head are batched products too.
LayerNorm (without affine) and the pooling run over the member dimension.
The word vectors are frozen and shared.

What differs between members is a tensor or a member's own draws.
They are drawn exactly as the solo `TransformerFamily.train_run` draws them.
Initialization and train subset come from the run's seed.
Batch order, crops and dropout masks come from the population's draws (`zoo.training.draws`, by `training.rng`).
Dropout layers follow the solo order: stem, then attention and MLP of each block.
Each member also has its per-epoch learning rate (warm-up + cosine).
It has its coupled L2 too, as `StackedOptimizer`'s `weight_decay`, which torch.optim applies alike.

A member's training loss or validation may turn non-finite.
It is then recorded as diverged for its remaining checkpoints, zeroed and frozen, as its solo run records it.
Its best checkpoint is still emitted at the end.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from zoo.data.images import TaskData
from zoo.families.base import CheckpointResult
from zoo.families.transformer_model import TransformerArchitecture, sinusoidal_encoding
from zoo.families.transformer_recipe import learning_rate_at
from zoo.training.optim_stacked import StackedOptimizer
from zoo.training.reproducibility import exact_sqrt
from zoo.training.population import MetricSums, _Members, host_weights, masked_step
from zoo.training.train import CLASSIFICATION_METRICS, batch_starts

EVAL_ROWS = 16384  # examples x members per evaluation batch: bounds the (K, B, H, T, T) attention scores


def _linear(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Per-member x W^T + b: h (K, ..., I), weight (K, O, I), bias (K, O) -> (K, ..., O)."""
    K, shape = h.shape[0], h.shape[1:-1]
    flat = h.reshape(K, -1, h.shape[-1])  # (K, N, I)
    out = torch.bmm(flat, weight.transpose(1, 2)) if bias is None else torch.baddbmm(bias.unsqueeze(1), flat,
                                                                                      weight.transpose(1, 2))
    return out.view(K, *shape, weight.shape[1])


class PopulationTransformer:
    """The `SmallTransformer` forward for K stacked members.

    `embedding` is a solo model's stem; only its frozen word table is read, for `word_embeddings`.
    """

    def __init__(self, arch: TransformerArchitecture, embedding, device: torch.device):
        self.arch, self.embedding = arch, embedding.to(device)
        self.positional_encoding = sinusoidal_encoding(arch.num_tokens, arch.d_model).to(device)

    def stem(self, params: dict, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x: (K, B, C, H, W) images or (K, B, T) tokens -> (K, B, T, D) and a padding mask (K, B, T)."""
        a = self.arch
        if a.input == "word_embeddings":
            table, mask = self.embedding(x.reshape(-1, x.shape[-1]))  # loads the shared frozen table once
            return table.view(*x.shape, a.d_model), mask.view(x.shape)
        K, B, C, H, W = x.shape
        p = a.patch_size
        x = (x - a.pixel_mean) / a.pixel_std
        patches = x.view(K, B, C, H // p, p, W // p, p).permute(0, 1, 3, 5, 2, 4, 6)  # (K, B, H/p, W/p, C, p, p)
        patches = patches.reshape(K, B, (H // p) * (W // p), C * p * p)
        weight = params["embedding.conv1.weight"].flatten(2)  # (K, D, C p p)
        return _linear(patches, weight, params["embedding.conv1.bias"]), None  # (K, B, T, D)

    def attention(self, params: dict, prefix: str, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """softmax(q k^T / sqrt(d)) v per member, sequence and head, through torch's fused attention kernel.

        It beats the explicit product-softmax-product (docs/performance.md).
        It also keeps no (K, B, H, T, T) score tensor in memory.
        It equals the solo module's to float32 rounding.
        """
        a = self.arch
        K, B, T, _ = x.shape
        q, k, v = (_linear(x, params[f"{prefix}.{m}.weight"]).view(K * B, T, a.num_heads, a.head_dim).transpose(1, 2)
                   for m in ("queries", "keys", "values"))  # (K B, H, T, d)
        keep = None if mask is None else mask.reshape(K * B, 1, 1, T)  # padding is never attended to
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # (K B, H, T, d)
        return _linear(heads.transpose(1, 2).reshape(K, B, T, -1), params[f"{prefix}.out_projection.weight"])

    def __call__(self, params: dict, x: torch.Tensor, masks: Callable | None = None) -> torch.Tensor:
        """Logits (K, B, classes); `masks(layer, shape)` gives dropout masks (K, *shape) or None."""
        a = self.arch

        def drop(h: torch.Tensor, layer: int) -> torch.Tensor:
            mask = masks(layer, tuple(h.shape[1:])) if masks is not None else None
            return h if mask is None else h * mask

        h, mask = self.stem(params, x)
        h = drop(h + self.positional_encoding[:h.shape[2]], 0)
        width = (a.d_model,)
        for i in range(a.num_blocks):
            prefix = f"encoder.{i}"
            z = drop(self.attention(params, f"{prefix}.attention", F.layer_norm(h, width), mask), 2 * i + 1)
            h = h + z if a.residual else z
            z = F.relu(_linear(F.layer_norm(h, width), params[f"{prefix}.fc1.weight"], params[f"{prefix}.fc1.bias"]))
            z = drop(_linear(z, params[f"{prefix}.fc2.weight"], params[f"{prefix}.fc2.bias"]), 2 * i + 2)
            h = h + z if a.residual else z
        h = F.layer_norm(h, width)
        if mask is None:
            pooled = h.mean(dim=2)  # (K, B, D)
        else:
            weights = mask.to(h.dtype)[..., None]
            pooled = (h * weights).sum(dim=2) / weights.sum(dim=2).clamp_min(1)
        hidden = F.relu(_linear(pooled, params["classifier.fc1.weight"], params["classifier.fc1.bias"]))
        return _linear(hidden, params["classifier.fc2.weight"], params["classifier.fc2.bias"])


@torch.no_grad()
def _evaluate(model: PopulationTransformer, spec, params: dict, members: _Members, data: TaskData,
              only_validation: bool = False) -> list[dict[str, float]]:
    """Each member's metrics (eval mode), as its solo `evaluate` computes them; NaN where not computed."""
    K = len(members)
    batch_size = max(1, min(spec.training.eval_batch_size, EVAL_ROWS // K))
    sums = MetricSums(K, members.device)
    count_train = min(members.subsets.shape[1], spec.dataset.eval_train_size)
    sets = [("val", data.validation)] if only_validation else [("val", data.validation), ("test", data.test)]
    if not only_validation:
        for start in range(0, count_train, batch_size):
            index = members.subsets[:, start:min(start + batch_size, count_train)]  # (K, b)
            sums.add("train", model(params, data.train.x[index]), data.train.y[index])
    for prefix, examples in sets:
        for start in range(0, len(examples), batch_size):
            x, y = examples.x[start:start + batch_size], examples.y[start:start + batch_size]
            sums.add(prefix, model(params, x.expand(K, *x.shape)), y.expand(K, -1))
    sizes = {"train": count_train, "val": len(data.validation), "test": len(data.test)}
    return sums.means({prefix: size for prefix, size in sizes.items() if prefix == "val" or not only_validation})


def _score(metrics: dict[str, float]) -> tuple[float, float]:  # higher accuracy, then lower loss
    loss, accuracy = metrics["val_loss"], metrics["val_accuracy"]
    return (accuracy, -loss) if math.isfinite(loss) else (-math.inf, -math.inf)


def train_transformer_population(family, spec, runs: Sequence, data: TaskData,
                                 emit: Callable[[object, CheckpointResult], None]) -> None:
    """Trains runs that share an optimizer and a train fraction as one population."""
    members = _Members(family, runs, data, spec.training.rng)
    K, training, hparams = len(members), spec.training, members.hparams
    for hp in hparams:
        if hp.warmup_epochs > training.epochs:
            raise ValueError(f"{spec.name}: warmup_epochs={hp.warmup_epochs} exceeds training.epochs={training.epochs}")
        if hp.crop_padding and data.train.x.ndim != 4:
            raise ValueError(f"{spec.name}: crop_padding={hp.crop_padding} needs images; use 0 for {spec.dataset.name}")
    arch = TransformerArchitecture(**spec.architecture)
    model = PopulationTransformer(arch, family.build(spec.architecture).embedding, members.device)
    initial = [family.initial_weights(spec, run) for run in runs]
    names = list(initial[0])
    params = {name: torch.stack([w[name] for w in initial]).to(members.device).requires_grad_() for name in names}
    optimizer = StackedOptimizer(list(params.values()), members.learning_rate, hparams[0].optimizer,
                                 weight_decay=torch.tensor([hp.l2 for hp in hparams], dtype=torch.float64,
                                                           device=members.device),
                                 exact_sqrt=exact_sqrt(spec))
    active = torch.ones(K, dtype=torch.bool)
    regular = sorted(training.checkpoint_epochs)

    def snapshot(source: dict, k: int) -> dict[str, torch.Tensor]:
        return host_weights(source, [k])[k]

    def retire(k: int, epoch: int) -> None:
        """Records member k as diverged at `epoch` and after (as its solo run), then zeroes and freezes it."""
        weights = snapshot(params, k)
        for e in (e for e in regular if e >= epoch):
            emit(members.runs[k], family._result(e, weights, dict.fromkeys(CLASSIFICATION_METRICS, math.nan)))
        active[k] = False
        with torch.no_grad():
            for tensor in params.values():
                tensor[k] = 0.0

    metrics = _evaluate(model, spec, params, members, data, only_validation=0 not in regular)
    best_score = [_score(m) for m in metrics]
    best_epoch = [0] * K
    best = {name: tensor.detach().clone() for name, tensor in params.items()}
    if 0 in regular:
        for k, weights in host_weights(params, range(K)).items():
            emit(members.runs[k], family._result(0, weights, metrics[k]))
    size, step = members.subsets.shape[1], 0
    for epoch in range(1, training.epochs + 1):
        if not active.any():
            break
        optimizer.learning_rate = torch.tensor([learning_rate_at(epoch, hp, training.epochs) for hp in hparams],
                                               dtype=torch.float64, device=members.device)
        orders = members.draws.orders(epoch, size, active)  # (K, N)
        for start in batch_starts(size, training):
            step += 1
            index = members.subsets.gather(1, orders[:, start:start + training.batch_size])  # (K, b)
            x = members.draws.crops(step, data.train.x[index], active)  # (K, b, ...)
            logits = model(params, x, members.draws.masks(step, active))  # (K, b, classes)
            _, b, classes = logits.shape
            losses = F.cross_entropy(logits.reshape(K * b, classes), data.train.y[index].reshape(-1),
                                     reduction="none").view(K, b).mean(1)
            for k in masked_step(losses, active, optimizer):
                retire(k, epoch)
        checkpointing = epoch in regular
        metrics = _evaluate(model, spec, params, members, data, only_validation=not checkpointing)
        alive = [k for k in range(K) if active[k] and _score(metrics[k])[0] != -math.inf]
        improved = [k for k in alive if _score(metrics[k]) > best_score[k]]
        for k in improved:
            best_score[k], best_epoch[k] = _score(metrics[k]), epoch
        if improved:  # one copy per tensor for all improved members
            index = torch.tensor(improved, device=members.device)
            with torch.no_grad():
                for name in names:
                    best[name].index_copy_(0, index, params[name].detach().index_select(0, index))
        if checkpointing:
            for k, weights in host_weights(params, alive).items():
                emit(members.runs[k], family._result(epoch, weights, metrics[k]))
        for k in (k for k in range(K) if active[k] and k not in alive):
            retire(k, epoch)
    if training.keep_best:
        best_metrics = _evaluate(model, spec, best, members, data)
        for k, weights in host_weights(best, range(K)).items():
            emit(members.runs[k], family._result(best_epoch[k], weights, best_metrics[k], best=True))
