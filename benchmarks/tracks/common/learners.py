"""What the tracks' continual learners share: the masked loss, seeded batches, a training loop.

Every learner is class-incremental, with one shared head over all classes. While learning task t,
its logits are masked to task t's classes, as the prompt-based methods' code does. At test time
they are masked to every class seen so far.

A learner is built on the CPU, where its seeded initialisation draws. It then moves with
`learner.to(device)` before it learns; that is zoo/training/device.py's rule. Its random draws keep
coming from CPU generators: batch orders, pseudo-features, prompt inits. So it draws the same
numbers on any device. What it creates while learning, it moves to `learner.device`."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import nn

from benchmarks.tracks.common.incremental import Task


def masked(logits: torch.Tensor, allowed: Sequence[int]) -> torch.Tensor:
    """Logits with every class outside `allowed` at -inf."""
    mask = torch.full((logits.shape[1],), float("-inf"), device=logits.device)
    mask[list(allowed)] = 0.0
    return logits + mask


@dataclasses.dataclass(frozen=True)
class Training:
    epochs: int = 5
    lr: float = 1e-3
    batch_size: int = 64


def moved(value: Any, device: torch.device) -> Any:
    """`value` with its modules, parameters and tensors on `device`.

    This reaches inside lists, tuples and dataclasses too. It returns the same object when nothing in
    it moved."""
    if isinstance(value, nn.Module):
        return value.to(device)
    if isinstance(value, nn.Parameter):
        return value if value.device == device else nn.Parameter(value.detach().to(device), value.requires_grad)
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        items = [moved(item, device) for item in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: moved(getattr(value, f.name), device) for f in dataclasses.fields(value) if f.init}
        changed = {name: new for name, new in fields.items() if new is not getattr(value, name)}
        return dataclasses.replace(value, **changed) if changed else value
    return value


class Base:
    """Seen classes, the class -> task map, a seeded generator and a frozen-feature helper."""

    def __init__(self, classes: int, seed: int, features_batch: int = 256):
        self.classes, self.features_batch = classes, features_batch
        self.generator = torch.Generator().manual_seed(seed)  # on the CPU whatever the device
        self.seen: list[int] = []
        self.task_of_class = torch.full((classes,), -1, dtype=torch.long)
        self.learned = 0
        self.device = torch.device("cpu")

    def to(self, device: torch.device | str) -> "Base":
        """Moves what the learner holds (modules, parameters, tensors, its data) to `device`.

        Call it after construction, before `learn`. An optimizer made earlier would hold the CPU's."""
        device = torch.device(device)
        for name, value in list(vars(self).items()):
            setattr(self, name, moved(value, device))
        self.device = device
        return self

    def begin(self, task_index: int, task: Task) -> None:
        if task_index != self.learned:
            raise ValueError(f"tasks must be learned in order; got task {task_index} after {self.learned} task(s)")
        self.task_of_class[list(task.classes)] = task_index
        self.seen += list(task.classes)
        self.learned += 1

    def batches(self, count: int, size: int) -> list[torch.Tensor]:
        order = torch.randperm(count, generator=self.generator)
        return [order[i:i + size] for i in range(0, count, size)]

    def frozen(self, function: Callable, images: torch.Tensor) -> torch.Tensor:
        """`no_grad_batched(function, images)` for a function that never changes, such as the frozen backbone.

        It is computed once per images tensor, since the evaluation asks for every seen task's test images
        after each task. The cache holds the tensor, so its id cannot be reused."""
        cache = self.__dict__.setdefault("_frozen_cache", {})
        key = (id(function.__func__) if hasattr(function, "__func__") else id(function), id(images))
        if key not in cache:
            cache[key] = (images, self.no_grad_batched(function, images))
        return cache[key][1]

    def no_grad_batched(self, function: Callable, images: torch.Tensor, *extra: torch.Tensor) -> torch.Tensor:
        size = self.features_batch
        with torch.no_grad():
            return torch.cat([function(images[i:i + size], *(e[i:i + size] for e in extra))
                              for i in range(0, len(images), size)])

    def fit(self, groups: Iterable[dict], training: Training, inputs: torch.Tensor, labels: torch.Tensor,
            loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
            after_backward: Callable[[], None] | None = None) -> None:
        """Adam over `groups` for `training.epochs` on (inputs, labels).

        Each seeded batch b computes `loss(inputs[b], labels[b])`; inputs may be row indices into the
        task's data. `after_backward` may zero the gradients of what must not move."""
        optimizer = torch.optim.Adam(list(groups), lr=training.lr)
        for _ in range(training.epochs):
            for batch in self.batches(len(labels), training.batch_size):
                value = loss(inputs[batch], labels[batch])
                optimizer.zero_grad(set_to_none=True)
                value.backward()
                if after_backward is not None:
                    after_backward()
                optimizer.step()


def freeze(module: nn.Module) -> nn.Module:
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module.eval()
