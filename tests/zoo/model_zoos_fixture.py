"""A Model Zoos experiment folder made by hand in the Ray Tune layout the reference loader reads
(ModelZoos/ModelZooDataset): `<trial>/params.json`, `<trial>/result.json`, `<trial>/checkpoint_<e>/checkpoints`.

Not copied from any release: the member is written here in plain `torch.nn` from the reference's
facts (an `nn.ModuleList` of conv, 2x2 max pool, activation, dropout where the config has it, ...,
flatten, linear, activation, dropout, linear), so the state dict keys are PyTorch's `module_list.<i>`
for that structure; the result lines score each checkpoint on the first `TEST_IMAGES` MNIST test
images, as the reference's test epoch does (NLL of log-softmax, accuracy), with its normalization.
"""

from __future__ import annotations

import functools
import random
import json
from pathlib import Path

import torch
from torch import nn

from zoo.data.images import SOURCES

NONLINEARITIES = {"leakyrelu": nn.LeakyReLU, "relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid,
                  "silu": nn.SiLU, "gelu": nn.GELU}
MEAN, STD = 0.1307, 0.3081  # torchvision Normalize in the MNIST zoo generators
EXPERIMENT = "tune_zoo_mnist_hyperparameter_10_fixed_seeds"
# (activation, dropout, init) per trial, cycled: both module layouts and several activations
KINDS = [("tanh", 0.0, "uniform"), ("relu", 0.5, "kaiming_normal"), ("gelu", 0.0, "normal"),
         ("sigmoid", 0.5, "kaiming_uniform"), ("leakyrelu", 0.0, "xavier_uniform")]


class ReferenceShapedCNN(nn.Module):
    """CNN-s as the reference builds it: conv 8@5, pool, act, [drop], conv 6@5, pool, act, [drop],
    conv 4@2, act, flatten, linear 36 -> 20, act, [drop], linear 20 -> 10."""

    def __init__(self, channels_in: int = 1, nlin: str = "tanh", dropout: float = 0.0):
        super().__init__()
        act, drop = NONLINEARITIES[nlin], ([nn.Dropout(dropout)] if dropout > 0 else [])
        layers = [nn.Conv2d(channels_in, 8, 5), nn.MaxPool2d(2, 2), act(), *drop]
        layers += [nn.Conv2d(8, 6, 5), nn.MaxPool2d(2, 2), act(), *drop]
        layers += [nn.Conv2d(6, 4, 2), act(), nn.Flatten(), nn.Linear(36, 20), act(), *drop, nn.Linear(20, 10)]
        self.module_list = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.module_list:
            x = layer(x)
        return x


@functools.lru_cache(maxsize=1)
def _mnist_test_set():
    return SOURCES.get("mnist")()[1]


def mnist_test(count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `count` MNIST test images, normalized as the zoo's transform, and their labels."""
    test = _mnist_test_set()
    return (test.x[:count] - MEAN) / STD, test.y[:count]


def _score(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    model.eval()
    with torch.no_grad():
        log_probabilities = torch.log_softmax(model(x), dim=1)
        loss = nn.functional.nll_loss(log_probabilities, y).item()
        return loss, (log_probabilities.argmax(dim=1) == y).float().mean().item()


def trial_name(index: int, seed: int) -> str:
    return f"NN_tune_trainable_5f1a2_{index:05d}_{index}_seed={seed}_2022-06-01_10-{index:02d}-00"


def make_experiment(parent: Path, trials: int = 10, epochs: tuple[int, ...] = (0, 1, 5), scored: bool = False,
                    padded: bool = True) -> Path:
    """Writes `parent/EXPERIMENT` with `trials` trial folders; returns it. With `scored` the result lines
    hold each checkpoint's loss and accuracy on the whole MNIST test set (seconds each on a CPU), else
    made-up numbers."""
    root = parent / EXPERIMENT
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text("{}")  # the experiment's own files sit beside the trials
    x, y = mnist_test(10000) if scored else (None, None)
    for index in range(trials):
        nlin, dropout, init = KINDS[index % len(KINDS)]
        seed = index % 10 + 1
        config = {"model::type": "CNN", "model::channels_in": 1, "model::o_dim": 10, "model::nlin": nlin,
                  "model::dropout": dropout, "model::init_type": init, "optim::optimizer": ["adam", "sgd"][index % 2],
                  "optim::lr": [1e-3, 1e-4][index % 2], "optim::wd": 1e-3, "optim::momentum": 0.9, "seed": seed,
                  "training::batchsize": 10, "training::epochs_train": 50, "cuda": False}
        if config["optim::optimizer"] == "adam":
            del config["optim::momentum"]
        trial = root / trial_name(index, seed)
        trial.mkdir(exist_ok=True)
        (trial / "params.json").write_text(json.dumps(config))
        torch.manual_seed(1000 + index)
        model = ReferenceShapedCNN(1, nlin, dropout)
        lines = []
        for epoch in range(max(epochs) + 1):
            if epoch:
                with torch.no_grad():
                    for parameter in model.parameters():
                        parameter.add_(0.05 * torch.randn_like(parameter))
            if epoch in epochs:
                folder = trial / (f"checkpoint_{epoch:06d}" if padded else f"checkpoint_{epoch}")
                folder.mkdir(exist_ok=True)
                torch.save(model.state_dict(), folder / "checkpoints")
                torch.save({"state": {}, "param_groups": []}, folder / "optimizer")
            test_loss, test_acc = _score(model, x, y) if scored and epoch in epochs else (2.0 + index / 10, epoch / 10)
            lines.append({"train_loss": test_loss + 0.1, "train_acc": test_acc, "test_loss": test_loss,
                          "test_acc": test_acc, "training_iteration": epoch, "trial_id": f"5f1a2_{index:05d}",
                          "config": config})
        (trial / "result.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


def reference_cut(root: Path) -> dict[str, list[Path]]:
    """The reference loader's split of an experiment folder, re-implemented from its rule: the trial
    folders listed (sorted: the listing our split set matches), the global `random` seeded 42 and
    shuffled, cut 70/15/15 by int() (load_dataset.ipynb), the global random state restored after."""
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    state = random.getstate()
    try:
        random.seed(42)
        random.shuffle(folders)
    finally:
        random.setstate(state)
    first = int(0.7 * len(folders))
    second = first + int(0.15 * len(folders))
    return {"train": folders[:first], "validation": folders[first:second], "test": folders[second:]}
