"""The Transformer family: the Small Transformer Zoo member of Tran et al. 2025.

The paper is "Equivariant Neural Functional Networks for Transformers" (ICLR 2025).
Its authors are Tran, Vo, The, Tran Huu, Nguyen-Nhat, Tran, Pham and Nguyen.
It comes with the Small Transformer Zoo and released code (github.com/Fsoft-AIC/Transformer-NFN).
The member (its architecture, modules and FLOPs) is in `zoo.families.transformer_model`.
This module is the family: hyperparameters, data, training.

Training follows the released sweeps, `*/sweep_scripts/sweep_config_v2_*.yml`.
It runs 100 epochs of batches of 128, with cross-entropy loss.
L2 is the optimizer's coupled weight decay, on every tensor.
Weights come from a normal of std `init_std`, truncated at +-2 (PyTorch's default bounds, their `init_weights`).
Biases start at zero.
The learning rate warms up linearly over `warmup_epochs`.
Then a cosine decay reaches `final_learning_rate` at the end of training.
That is their LinearLR + CosineAnnealingLR, stepped once per epoch, not per step.
Images enter as (x - 0.5) / 0.5, their Normalize(0.5, 0.5).
While training they are randomly shifted by up to `crop_padding` = 2 pixels, their RandomCrop(28, padding=2).

We change two things.
The "best" checkpoint is picked on a validation split held out of the training data; theirs is picked on the test set.
Every random draw (init, train subset, shuffles, crops, dropout) comes from an explicit seeded generator.

The specs keep the "best" checkpoint (`training.keep_best`).
It is a planned checkpoint of its own per run (`zoo.planning.plan`).
It holds the weights of the epoch with the highest validation accuracy.
Ties go to the lower loss, then the earlier epoch.
The initialization competes too, so a run that never improves still has one.
It is emitted with ``best=True`` at the end of training.
Its row's `epoch` is the real best epoch, and `is_best` is True on that row only.

The released sweeps couple the learning rates and init stds to the optimizer.
Adam and RMSprop take 8 rates in 3e-4..5e-2 and stds in 0.1..0.5.
SGD and SGD-momentum take 8 rates in 1e-3..7e-2 and stds in 0.1..0.3.
The specs state this as a union of two grids (`search_space.grids`), with the real values as hyperparameters.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from zoo.data.images import SOURCE_INFO, TaskData, image_source_names, load_task_data, split_sizes
from zoo.families.transformer_model import (  # noqa: F401  (the member's names, re-exported)
    SmallTransformer,
    TransformerArchitecture,
    forward_flops,
    sinusoidal_encoding,
)
from zoo.families.transformer_population import train_transformer_population
from zoo.families.transformer_recipe import TransformerHParams, learning_rate_at
from zoo.families.base import CheckpointResult, Family, MemberSize, register_family
from zoo.training.population import populations
from zoo.symmetry.attention import AttentionSymmetry
from zoo.training.draws import solo_draws
from zoo.training.train import (CLASSIFICATION_METRICS, batch_starts, evaluate, evaluate_sets, run_train_subset,
                                seeded_generator,
                       steps_per_epoch)
from zoo.weightspace import WeightSpace

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {  # (parameters, learning rate, L2)
    "adam": lambda params, lr, l2: torch.optim.Adam(params, lr=lr, weight_decay=l2),
    "rmsprop": lambda params, lr, l2: torch.optim.RMSprop(params, lr=lr, weight_decay=l2),
    "sgd": lambda params, lr, l2: torch.optim.SGD(params, lr=lr, weight_decay=l2),
    "sgd_momentum": lambda params, lr, l2: torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=l2),
}
INIT_BOUND = 2.0  # truncation of the initial weights, absolute (PyTorch's trunc_normal_ default)
METRICS: dict[str, type] = {**dict.fromkeys(CLASSIFICATION_METRICS, float), "is_best": bool}


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


@register_family("transformer")
class TransformerFamily(Family):
    Architecture = TransformerArchitecture
    HParams = TransformerHParams
    METRICS = METRICS

    # members per population: the family's measured choice (benchmarks/perf/generation.py,
    # docs/performance.md); larger CPU populations are slower once the activations outgrow the caches
    POPULATION_SIZES = {"cpu": 4, "cuda": 256}
    FLOPS_HPARAMS = ("train_fraction",)

    def build(self, architecture: dict, hparams: dict | None = None) -> SmallTransformer:
        dropout = 0.0 if hparams is None else float(hparams["dropout"])
        return SmallTransformer(TransformerArchitecture(**architecture), dropout)

    def weight_space(self, architecture: dict) -> WeightSpace:
        """Every trainable tensor, in forward order; a layer per linear map (Q, K, V, O separately)."""
        return WeightSpace.from_state_dict(self.build(architecture).state_dict())

    def member_size(self, architecture: dict) -> MemberSize:
        """`SmallTransformer`'s parameters: the patch stem, per block Q, K, V, O without bias and the MLP, the head.

        Word vectors are a frozen buffer, not parameters, and their vocabulary is no width.
        Tokens are a width too: the positional encoding and attention scale with them.
        """
        a = TransformerArchitecture(**architecture)
        inner = a.num_heads * a.head_dim
        stem = a.in_channels * a.d_model * a.patch_size ** 2 + a.d_model if a.input == "image_patches" else 0
        block = 4 * a.d_model * inner + (a.d_model + 1) * a.mlp_dim + (a.mlp_dim + 1) * a.d_model
        head = (a.d_model + 1) * a.d_model + (a.d_model + 1) * a.num_classes
        widths = {"d_model": a.d_model, "mlp_dim": a.mlp_dim, "num_heads x head_dim": inner,
                  "num_classes": a.num_classes,
                  "tokens" + (" ((image_size / patch_size)^2)" if a.input == "image_patches" else " (max_length)"):
                      a.num_tokens}
        if a.input == "image_patches":
            widths["in_channels"] = a.in_channels
        return MemberSize(stem + a.num_blocks * block + head, widths, a.num_blocks + 3)

    def symmetry(self, architecture: dict, hparams: dict | None = None) -> AttentionSymmetry:
        """Heads, GL(d_k) x GL(d_v) per head, MLP units with positive scaling, and (no residuals) model dims."""
        arch = TransformerArchitecture(**architecture)
        return AttentionSymmetry(self.weight_space(architecture), arch.num_heads, arch.residual)

    def data_sources(self, architecture: dict) -> list[str]:
        """Image data sets for patches; text data sets (`zoo.data.text`) for word embeddings."""
        if TransformerArchitecture(**architecture).input == "image_patches":
            return image_source_names()
        from zoo.data.text import TEXT_SOURCES

        return TEXT_SOURCES.names()

    def load_data(self, spec) -> TaskData:
        arch = TransformerArchitecture(**spec.architecture)
        if arch.input == "image_patches":
            data = load_task_data(spec.dataset)
            found, expected = tuple(data.train.x.shape[1:]), (arch.in_channels, arch.image_size, arch.image_size)
        else:
            from zoo.data.text import checked_word_embeddings, load_text_task_data

            checked_word_embeddings(arch.word_embeddings, arch.d_model, source_sha256=arch.word_embeddings_sha256,
                                    reduced_sha256=arch.reduced_embeddings_sha256,
                                    tokenizer_sha256=arch.tokenizer_sha256)
            data = load_text_task_data(spec.dataset, arch.max_length, arch.word_embeddings)
            found, expected = tuple(data.train.x.shape[1:]), (arch.max_length,)
        if found != expected or data.num_classes != arch.num_classes:
            raise ValueError(f"{spec.name}: architecture ({arch.input}) expects inputs {expected} and "
                             f"{arch.num_classes} "
                             f"classes; {spec.dataset.name} has {found} and {data.num_classes}")
        return data

    def initial_weights(self, spec, run) -> dict[str, torch.Tensor]:
        """The run's initialization, drawn from its own generator in parameter order (biases 0)."""
        hp, init = TransformerHParams(**run.hparams), seeded_generator(run.seed, "init")
        model = self.build(spec.architecture)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.endswith("weight"):
                    nn.init.trunc_normal_(parameter, 0.0, hp.init_std, -INIT_BOUND, INIT_BOUND, generator=init)
                else:
                    parameter.zero_()
        return _state(model)

    def population_key(self, run) -> tuple:
        return run.hparams["optimizer"], run.hparams["train_fraction"]

    def train_population(self, spec, runs, data: TaskData, emit) -> None:
        """Runs sharing an optimizer and a train fraction (equal steps per epoch) train together.

        They go in chunks of `population_size_on` their device (`zoo.families.transformer_population`).
        """

        size = self.population_size_on(data.train.x.device)
        for population in populations(runs, size, self.population_key):
            train_transformer_population(self, spec, population, data, emit)

    def train_run(self, spec, run, data: TaskData, emit: Callable[[CheckpointResult], None]) -> None:
        for result in self._train(spec, run, data):
            emit(result)

    def _train(self, spec, run, data: TaskData) -> list[CheckpointResult]:
        """Trains one run; returns its checkpoints in plan order (the best is known only at the end)."""
        hp, training = TransformerHParams(**run.hparams), spec.training
        if hp.warmup_epochs > training.epochs:
            raise ValueError(f"{spec.name}: warmup_epochs={hp.warmup_epochs} exceeds training.epochs={training.epochs}")
        model = self.build(spec.architecture, run.hparams)
        model.load_state_dict(self.initial_weights(spec, run))
        optimizer = OPTIMIZERS[hp.optimizer](model.parameters(), hp.learning_rate, hp.l2)
        train = run_train_subset(data.train, hp.train_fraction, run.seed)
        eval_train = train.subset(torch.arange(min(len(train), spec.dataset.eval_train_size)))
        draws, step = solo_draws(training.rng, run.seed, hp.dropout, hp.crop_padding), 0
        if hp.crop_padding and train.x.ndim != 4:
            raise ValueError(f"{spec.name}: crop_padding={hp.crop_padding} needs images; use 0 for {spec.dataset.name}")
        regular = sorted(training.checkpoint_epochs)
        batch_size, eval_batch = training.batch_size, training.eval_batch_size

        def checkpoint_metrics(validation: tuple[float, float]) -> dict[str, float]:
            train_loss, train_accuracy = evaluate(model, eval_train, eval_batch)
            test_loss, test_accuracy = evaluate(model, data.test, eval_batch)
            return dict(zip(CLASSIFICATION_METRICS,
                            (train_loss, train_accuracy, *validation, test_loss, test_accuracy)))

        def score(validation: tuple[float, float]) -> tuple[float, float]:  # higher accuracy, then lower loss
            loss, accuracy = validation
            return (accuracy, -loss) if math.isfinite(loss) else (-math.inf, -math.inf)

        validation = evaluate(model, data.validation, eval_batch)
        best_score, best_epoch, best_weights = score(validation), 0, _state(model)
        kept: dict[int, tuple[dict, dict]] = {}  # epoch -> (weights, metrics)
        if 0 in regular:  # the initialization
            kept[0] = (_state(model), checkpoint_metrics(validation))
        for epoch in range(1, training.epochs + 1):
            for group in optimizer.param_groups:
                group["lr"] = learning_rate_at(epoch, hp, training.epochs)
            model.train()
            order = draws.order(epoch, len(train))
            finite = True
            for start in batch_starts(len(train), training):
                index = order[start:start + batch_size]
                step += 1
                loss = F.cross_entropy(model(draws.crop(step, train.x[index]), masks=draws.masks(step)), train.y[index])
                if not torch.isfinite(loss):
                    finite = False
                    break
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            validation = evaluate(model, data.validation, eval_batch) if finite else (math.nan, math.nan)
            if score(validation)[0] == -math.inf:
                break  # diverged: the remaining regular checkpoints are recorded as such below
            if score(validation) > best_score:
                best_score, best_epoch, best_weights = score(validation), epoch, _state(model)
            if epoch in regular:
                kept[epoch] = (_state(model), checkpoint_metrics(validation))
        last = (_state(model), dict.fromkeys(CLASSIFICATION_METRICS, math.nan))  # for epochs after a divergence
        results = [self._result(epoch, *kept.get(epoch, last)) for epoch in regular]
        if training.keep_best:
            model.load_state_dict(best_weights)
            metrics = checkpoint_metrics(evaluate(model, data.validation, eval_batch))
            results.append(self._result(best_epoch, best_weights, metrics, best=True))
        return results

    @staticmethod
    def _result(epoch: int, weights: dict, metrics: dict, best: bool = False) -> CheckpointResult:
        status = "ok" if all(math.isfinite(v) for v in metrics.values()) else "diverged"
        return CheckpointResult(epoch, weights, {**metrics, "is_best": best}, status, best=best)

    def evaluate(self, spec, hparams: dict, weights: dict[str, torch.Tensor], data: TaskData) -> dict[str, float]:
        """Validation and test metrics of stored weights (train metrics depend on the run's subset)."""
        model = self.build(spec.architecture)
        model.load_state_dict(weights)
        return evaluate_sets(model, {"val": data.validation, "test": data.test}, spec.training.eval_batch_size)

    # --- planning ---------------------------------------------------------------------------

    def forward_flops(self, spec_or_architecture) -> int:
        """FLOPs of one example's forward pass (`transformer_model.forward_flops`).

        Takes an architecture or a spec.
        """
        architecture = getattr(spec_or_architecture, "architecture", spec_or_architecture)
        return forward_flops(TransformerArchitecture(**architecture))

    def examples_per_run(self, spec, hparams: dict) -> int:
        """Training examples one run processes (forward and backward)."""
        seen = math.ceil(float(hparams["train_fraction"]) * self._split_sizes(spec)[0])
        if spec.training.drop_last:
            seen = steps_per_epoch(seen, spec.training) * spec.training.batch_size
        return spec.training.epochs * seen

    def run_flops(self, spec, hparams: dict) -> float:
        """Training (~3 forwards per example), the per-epoch validation, and the checkpoint evaluations."""
        train, validation, test = self._split_sizes(spec)
        seen = math.ceil(float(hparams["train_fraction"]) * train)
        evaluated = min(seen, spec.dataset.eval_train_size) + validation + test
        forward = self.forward_flops(spec.architecture)
        return forward * (3 * self.examples_per_run(spec, hparams) + validation * (spec.training.epochs + 1)
                          + evaluated * (len(spec.training.checkpoint_epochs) + spec.training.keep_best))

    @staticmethod
    def _split_sizes(spec) -> tuple[int, int, int]:
        """(training pool, validation, test) sizes the data loader gives, without loading."""
        if spec.dataset.name in SOURCE_INFO:
            return split_sizes(spec.dataset)
        from zoo.data.text import SOURCE_SIZES

        if spec.dataset.name not in SOURCE_SIZES:
            raise ValueError(f"no planning sizes for data set {spec.dataset.name!r}; "
                             f"known: {sorted(SOURCE_INFO) + sorted(SOURCE_SIZES)}")
        pool, test = SOURCE_SIZES[spec.dataset.name]
        train = pool - spec.dataset.validation_size
        train = min(train, spec.dataset.train_size) if spec.dataset.train_size is not None else train
        test = min(test, spec.dataset.test_size) if spec.dataset.test_size is not None else test
        return train, spec.dataset.validation_size, test
