"""HiDe-Prompt's three-part pipeline with prefix prompts, and NoRGa's gate inside it.

The method is Le et al., "Mixture of Experts Meets Prompt-Based Continual Learning" (NeurIPS 2024),
Sec. 5. It builds on HiDe-Prompt (Wang et al., NeurIPS 2023, Sec. 4). A pretrained ViT is frozen,
and each task t has three parts.

1. Task-identity inference (TII) is a residual MLP and a head on the frozen backbone's features.
   They train on task t's classes, with cross-entropy and the other classes masked. They are then
   aligned on Gaussian pseudo-features of every class seen so far (`gaussians.ClassGaussians`). So
   at test time the most likely seen class names the task.
2. Within-task prompt training (WTP) trains task t's prefix prompts and the shared head. The
   prompts start from task t-1's. They train on task t's images through the prompted backbone, with
   the head's logits masked to task t's classes. With NoRGa the prefix scores pass through the gate
   s + alpha * sigma(tau * s) (`prompted_vit.ScoreGate`). Its (alpha, tau) train on the first task
   only, and are frozen after it. With alpha = 0 (`gate=None`) this is HiDe-Prompt itself.
3. Task-adaptive prediction (TAP) retrains the head on Gaussian pseudo-features of every seen
   class's prompted features. Each class goes through its own task's prompt.

At test time TII picks the task, and its prompt gives the feature. The head, masked to the seen
classes, gives the class.

Facts from the authors' code (`Minhchuyentoancbn/MoE_PromptCL`) follow. Prompts sit in layers 0-4,
with length 5 and uniform(-1, 1) init. TII's MLP is D -> 2D -> D with GELU, a residual and a
LayerNorm. It trains with Adam, then SGD for the alignment (momentum 0.9, weight decay 5e-4,
cosine). WTP uses Adam, with the head at a tenth of the prompts' rate. TAP uses SGD.

Two things are cut here to run on a CPU, and `TrackConfig`s record them. The epochs are fewer.
Stage 1 trains on cached frozen features of the unaugmented images; the authors augment each epoch."""

from __future__ import annotations

import dataclasses
import torch
from torch import nn

from benchmarks.tracks.common.incremental import Task
from benchmarks.tracks.common.prompted_vit import PromptedViT, ScoreGate
from benchmarks.tracks.norga.gaussians import ClassGaussians
from benchmarks.tracks.common.learners import Base, freeze, masked


@dataclasses.dataclass(frozen=True)
class HiDeConfig:
    layers: tuple[int, ...] = (0, 1, 2, 3, 4)  # prompted blocks
    length: int = 5  # prefix length (keys and values each)
    gate: str | None = "tanh"  # NoRGa's sigma; None: HiDe-Prompt (alpha = 0)
    batch_size: int = 64
    tii_epochs: int = 10
    tii_lr: float = 1e-3
    align_epochs: int = 10
    align_lr: float = 0.01
    prompt_epochs: int = 5
    prompt_lr: float = 0.015  # the authors' 0.03 x 128 / 256
    head_lr_scale: float = 0.1  # the head's rate in WTP, relative to the prompts'
    head_epochs: int = 10
    head_lr: float = 0.01
    pseudo_per_class: int = 64  # pseudo-features per class per epoch (alignment and TAP)
    features_batch: int = 256  # images per forward when computing features (no gradient)


class TaskIdentityNet(nn.Module):
    """TII: a residual MLP (D -> 2D -> D, GELU) with a LayerNorm, then a linear head over all classes."""

    def __init__(self, dim: int, classes: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(features + self.mlp(features)))


class HiDePrompt(Base):
    """The method: `learn(task)` for each task in order, then `predict(images)`."""

    def __init__(self, backbone: nn.Module, classes: int, tasks: int, config: HiDeConfig, seed: int):
        super().__init__(classes, seed, config.features_batch)
        self.config, self.tasks = config, tasks
        self.vit = PromptedViT(freeze(backbone))
        dim, heads, head_dim = backbone.num_features, self.vit.heads, self.vit.head_dim
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            shape = (len(config.layers), 2, tasks, config.length, heads, head_dim)
            self.prompts = nn.Parameter(torch.rand(shape) * 2 - 1)  # uniform(-1, 1), as the authors'
            self.head = nn.Linear(dim, classes)
            self.tii = TaskIdentityNet(dim, classes)
        self.gate = ScoreGate(max(config.layers) + 1, config.gate) if config.gate else None
        self.frozen_stats, self.prompted_stats = ClassGaussians(), ClassGaussians()

    # features ------------------------------------------------------------------------------
    def _prefixes(self, task_ids: torch.Tensor) -> dict:
        """Each sample's task prompt, as per-layer (keys, values) of shape (B, H, L, head_dim)."""
        chosen = self.prompts[:, :, task_ids]  # (layers, 2, B, L, H, d)
        return {layer: (chosen[i, 0].transpose(1, 2), chosen[i, 1].transpose(1, 2))
                for i, layer in enumerate(self.config.layers)}

    def prompted(self, images: torch.Tensor, task_ids: torch.Tensor) -> torch.Tensor:
        return self.vit.features(images, self._prefixes(task_ids), self.gate)

    def frozen_features(self, images: torch.Tensor) -> torch.Tensor:
        return self.frozen(self.vit.features, images)

    # training -----------------------------------------------------------------------------
    def _batches(self, count: int) -> list[torch.Tensor]:
        return self.batches(count, self.config.batch_size)

    def _fit_on_pseudo(self, module: nn.Module, parameters, stats: ClassGaussians, epochs: int, lr: float,
                       forward) -> None:
        """SGD (momentum 0.9, weight decay 5e-4, cosine) on Gaussian pseudo-features of the seen classes."""
        optimizer = torch.optim.SGD(parameters, lr=lr, momentum=0.9, weight_decay=5e-4)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, epochs))
        for _ in range(epochs):
            features, labels = stats.sample(self.config.pseudo_per_class, self.generator)
            for batch in self._batches(len(labels)):
                loss = nn.functional.cross_entropy(masked(forward(features[batch]), self.seen), labels[batch])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            scheduler.step()

    def _train_tii(self, task_index: int, task: Task, features: torch.Tensor) -> None:
        config = self.config
        optimizer = torch.optim.Adam(self.tii.parameters(), lr=config.tii_lr)
        for _ in range(config.tii_epochs):
            for batch in self._batches(len(features)):
                loss = nn.functional.cross_entropy(masked(self.tii(features[batch]), task.classes), task.train.y[batch])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
        self.frozen_stats.add(features, task.train.y)
        if task_index > 0:
            self._fit_on_pseudo(self.tii, self.tii.parameters(), self.frozen_stats, config.align_epochs,
                                config.align_lr, self.tii)

    def _train_prompts(self, task_index: int, task: Task) -> None:
        config = self.config
        if task_index > 0:
            with torch.no_grad():
                self.prompts[:, :, task_index] = self.prompts[:, :, task_index - 1]
        groups = [{"params": [self.prompts], "lr": config.prompt_lr},
                  {"params": self.head.parameters(), "lr": config.prompt_lr * config.head_lr_scale}]
        if self.gate is not None:
            self.gate.requires_grad_(task_index == 0)  # the authors train (alpha, tau) on the first task only
            if task_index == 0:
                groups.append({"params": self.gate.parameters(), "lr": config.prompt_lr})
        optimizer = torch.optim.Adam(groups)
        ids = torch.full((len(task.train),), task_index, dtype=torch.long, device=self.device)
        for _ in range(config.prompt_epochs):
            for batch in self._batches(len(task.train)):
                logits = self.head(self.prompted(task.train.x[batch], ids[batch]))
                loss = nn.functional.cross_entropy(masked(logits, task.classes), task.train.y[batch])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.prompts.grad[:, :, :task_index] = 0  # earlier tasks' prompts stay as they were
                optimizer.step()

    def learn(self, task_index: int, task: Task) -> None:
        """Trains on task `task_index` (tasks come in order, each once)."""
        self.begin(task_index, task)
        self._train_tii(task_index, task, self.frozen_features(task.train.x))
        self._train_prompts(task_index, task)
        ids = torch.full((len(task.train),), task_index, dtype=torch.long, device=self.device)
        self.prompted_stats.add(self.no_grad_batched(self.prompted, task.train.x, ids), task.train.y)
        if task_index > 0:
            self._fit_on_pseudo(self.head, self.head.parameters(), self.prompted_stats, self.config.head_epochs,
                                self.config.head_lr, self.head)

    # inference ----------------------------------------------------------------------------
    def predict(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(predicted classes, predicted tasks) over the classes seen so far."""
        with torch.no_grad():
            identity = masked(self.tii(self.frozen_features(images)), self.seen).argmax(1)
            tasks = self.task_of_class[identity]
            features = self.no_grad_batched(self.prompted, images, tasks)
            return masked(self.head(features), self.seen).argmax(1), tasks
