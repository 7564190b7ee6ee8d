"""The reference learners around the prompt methods: a linear probe, sequential fine-tuning, joint training.

The linear probe trains a linear head on the frozen backbone's feature, task after task. Logits are
masked to the current task's classes. It shows what the pretrained features give unprompted.

Sequential fine-tuning is the lower bound. It trains the whole ViT and the head on each task in
turn, and keeps nothing of earlier tasks. This shows catastrophic forgetting.

Joint training is the upper bound. It trains the whole ViT and the head once, after the last task,
on every task's data, with all classes unmasked. It shows what a learner that keeps all data
reaches. It is evaluated at that stage only (`final_only`). Training it at every stage would cost T
trainings on growing data: 13x a sequential run's images for 10 tasks. So it reports FAA, and no
CAA or forgetting."""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.tracks.common.incremental import Task
from benchmarks.tracks.common.prompted_vit import PromptedViT
from benchmarks.tracks.common.learners import Base, Training, freeze, masked


class LinearProbe(Base):
    def __init__(self, backbone: nn.Module, classes: int, tasks: int, training: Training, seed: int):
        super().__init__(classes, seed)
        self.backbone, self.training = PromptedViT(freeze(backbone)), training
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.head = nn.Linear(backbone.num_features, classes)

    def learn(self, task_index: int, task: Task) -> None:
        self.begin(task_index, task)
        features = self.frozen(self.backbone, task.train.x)
        self.fit([{"params": self.head.parameters()}], self.training, features, task.train.y,
                 lambda x, y: F.cross_entropy(masked(self.head(x), task.classes), y))

    def predict(self, images: torch.Tensor) -> tuple[torch.Tensor, None]:
        with torch.no_grad():
            return masked(self.head(self.frozen(self.backbone, images)), self.seen).argmax(1), None


class _FineTuned(Base):
    def __init__(self, backbone: nn.Module, classes: int, tasks: int, training: Training, seed: int):
        super().__init__(classes, seed)
        self.model = PromptedViT(copy.deepcopy(backbone))  # trained: the caller's backbone stays as it is
        for parameter in self.model.parameters():
            parameter.requires_grad_(True)
        self.training = training
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.head = nn.Linear(backbone.num_features, classes)

    def _train(self, images: torch.Tensor, labels: torch.Tensor, allowed) -> None:
        self.model.train()
        self.fit([{"params": self.model.parameters()}, {"params": self.head.parameters()}], self.training,
                 images, labels, lambda x, y: F.cross_entropy(masked(self.head(self.model(x)), allowed), y))
        self.model.eval()

    def predict(self, images: torch.Tensor) -> tuple[torch.Tensor, None]:
        with torch.no_grad():
            return masked(self.head(self.no_grad_batched(self.model, images)), self.seen).argmax(1), None


class SequentialFineTuning(_FineTuned):
    def learn(self, task_index: int, task: Task) -> None:
        self.begin(task_index, task)
        self._train(task.train.x, task.train.y, task.classes)


class JointTraining(_FineTuned):
    final_only = True  # `evaluate.run_sequence` tests it after the last task only

    def __init__(self, backbone: nn.Module, classes: int, tasks: int, training: Training, seed: int):
        super().__init__(backbone, classes, tasks, training, seed)
        self.tasks, self.images, self.labels = tasks, [], []

    def learn(self, task_index: int, task: Task) -> None:
        self.begin(task_index, task)
        self.images.append(task.train.x)
        self.labels.append(task.train.y)
        if task_index == self.tasks - 1:
            self._train(torch.cat(self.images), torch.cat(self.labels), self.seen)
