"""INR editing: predict a change of a SIREN's weights so that it renders an edited image.

The task is Zhou et al. 2023 ("Permutation Equivariant Neural Functionals", Sec. 5.3).
Monomial-NFN and MAGEP-NFN reuse it. Take a SIREN w fitted to an image x. An equivariant model f
outputs a weight delta. The edited SIREN is w' = w + s * f(w), with s one learned scalar per weight
tensor. Each scale starts at `delta_scale`, the authors' `LearnedScale` (0.01).

The loss and the metric are the pixel MSE between the render of w' and the edited image edit(x).
It is measured on the SIREN's [-1, 1] intensity scale. The edits are in `benchmarks.edits`: MNIST
dilation and CIFAR-10 contrast. The target comes from the original image. The task reads it from
the zoo's data source by the `image_index` column; the zoo's spec names the source.

Protocol: train on the train split. After each epoch, score the validation MSE and keep the best
epoch's parameters. The authors validate every 1,000 steps and keep the best. Report the test MSE
of the selected model. Beside it, each seed records the test MSE of the unedited SIRENs
(`ranking.mse_unedited`).

The model must offer a weight-space output (`nfn_models.models_with_output("weights")`). These are
NP, HNP, Monomial-NFN, MAGEP-NFN and DWSNet. So are the graph metanetworks NG-GNN, NG-T and
ScaleGMN, and the MLP that outputs the delta. The task builds it with `output="weights"`.

Presets hold facts from the authors' stylize_siren configs.

`nfn` is Adam at 1e-3 with batches of 32, for 50,000 steps (36 epochs of 45,000). The rate warms
up linearly over 1,000 steps, then stays constant.

`budget` is 5 epochs, ~7,000 steps, sized for a CPU machine (docs/tasks.md).

The results' predictions table holds one row per test SIREN. Its `prediction` is the MSE after the
edit, and its `target` the MSE before it. The first seed's renders of the first `examples` test
SIRENs are returned too: original, target and edited. They feed the side-by-side figure
(`nfnzoo bench plot-edits`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

import numpy as np
import pandas
import torch
from torch import nn

from benchmarks.edits import EDITS, apply_edit
from benchmarks.outputs import ModelOutputError, weights_shape_problem
from benchmarks.protocol import ARCHITECTURES_ATTR, SPEC_ATTR
from benchmarks.tasks.base import SPLITS, Task, TaskResult, isolated_rng, require_splits
from benchmarks.tasks.learners import LEARNERS, Problem, check_training
from benchmarks.tasks.registry import register_task
from benchmarks.tasks.rows import augment_rows, kept_metadata, select_rows
from nfn_models import count_parameters, create_model, model_outputs, models_with_output
from zoo.validation.schema import SchemaError, from_data
from zoo.weightspace import WeightBatch, WeightSpace

if TYPE_CHECKING:
    from zoo.data.images import ImageData
    from zoo.loader import ZooSplit


@dataclasses.dataclass(frozen=True)
class INREditingConfig:
    edit: str = "dilate"  # a name in benchmarks.edits.EDITS: "dilate" (MNIST), "contrast" (CIFAR-10)
    epochs: int = 5
    batch_size: int = 32  # the authors'
    lr: float = 1e-3  # the authors'
    weight_decay: float = 0.0
    eval_batch_size: int = 256
    lr_schedule: Literal["constant", "warmup-cosine"] = "constant"
    warmup_epochs: int = 0
    final_lr: float = 0.0
    warmup_steps: int = 0  # a linear warm-up over the first optimizer steps (the authors': 1,000)
    delta_scale: float = 0.01  # the initial per-tensor scale of the model's delta (the authors' LearnedScale)
    checkpoints: Literal["all", "final", "epochs"] = "final"
    checkpoint_epochs: tuple[int, ...] = ()
    examples: int = 8  # test SIRENs whose renders the results keep for the figure

    def validate(self, where: str, key: str) -> None:
        if self.edit not in EDITS.names():
            raise SchemaError(where, "edit", f"expected one of {EDITS.names()}, got {self.edit!r}")
        check_training(self, where)
        if self.delta_scale <= 0:
            raise SchemaError(where, "delta_scale", f"expected a positive scale, got {self.delta_scale}")
        if self.examples < 0:
            raise SchemaError(where, "examples", f"expected a count >= 0, got {self.examples}")


class EditedRender(nn.Module):
    """weights w -> the render of w + s * f(w), flattened (B, P * C).

    Each tensor's scale s is learned."""

    def __init__(self, model: nn.Module, space: WeightSpace, architecture, delta_scale: float):
        super().__init__()
        from zoo.families.inr import coordinate_grid

        self.model, self.space, self.architecture = model, space, architecture
        self.scales = nn.Parameter(torch.full((len(space.tensors),), float(delta_scale)))
        self.register_buffer("coords", coordinate_grid(architecture.image_size))

    def edited(self, weights: WeightBatch) -> WeightBatch:
        delta = self.model(weights)
        problem = weights_shape_problem(delta, weights)  # its values show in the render (`benchmarks.outputs`)
        if problem is not None:
            raise ModelOutputError(problem)
        return WeightBatch(self.space, tuple(w + s * d for w, s, d in zip(weights.tensors, self.scales, delta.tensors)))

    def forward(self, weights: WeightBatch) -> torch.Tensor:
        from zoo.families.inr import siren_forward

        return _signed(siren_forward(self.architecture, self.edited(weights).tensors, self.coords).flatten(1),
                       self.architecture)


def _signed(pixels: torch.Tensor, architecture) -> torch.Tensor:
    """A render on [-1, 1], where the task's MSE is measured, whichever range the SIRENs were fitted on.

    The DWSNets INRs fit [0, 1] (`INRArchitecture.intensity_range`)."""
    return pixels * 2 - 1 if architecture.intensity_range == "unit" else pixels


def _inr_architecture(split: "ZooSplit", where: str):
    from zoo.families.inr import INRArchitecture

    metadata = split.metadata
    families = set(metadata["family"].astype(str)) if "family" in metadata else set()
    if families != {"inr"}:
        raise ValueError(f"{where}: the inr-editing task edits SIRENs (an INR zoo such as inr-mnist); these "
                         f"checkpoints are of the families {sorted(families)}")
    if "image_index" not in metadata:
        raise ValueError(f"{where}: the inr-editing task finds each SIREN's source image by the image_index column; "
                         f"the metadata has {sorted(metadata.columns)}")
    architectures = metadata.attrs.get(ARCHITECTURES_ATTR) or {}
    used = sorted(set(metadata["architecture"].astype(str)))
    if len(used) != 1 or used[0] not in architectures:
        raise ValueError(f"{where}: expected one known SIREN architecture, found {used} (load the splits with "
                         "benchmarks.harness.load_splits, which attaches the manifest's architectures)")
    return INRArchitecture(**architectures[used[0]]["architecture"])


SOURCE_IMAGES_ATTR = "source_images"  # metadata.attrs key: the source images, read on the driver


class _Attached:
    """A value riding in `DataFrame.attrs`, which pandas deep-copies with every derived frame.

    This holder is copied as itself, since the images are read-only. It pickles with the frame."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict) -> "_Attached":
        return self


def source_images(split: "ZooSplit", where: str) -> "ImageData":
    """The images the zoo's SIRENs were fitted to, indexed by `image_index` (through the zoo's spec)."""
    from zoo.families import create_family
    from zoo.planning.spec import spec_from_data

    if isinstance(split.metadata.attrs.get(SOURCE_IMAGES_ATTR), _Attached):  # read on the driver (`driver_inputs`)
        return split.metadata.attrs[SOURCE_IMAGES_ATTR].value
    spec_data = split.metadata.attrs.get(SPEC_ATTR)
    if not spec_data:
        raise ValueError(f"{where}: the inr-editing task needs the zoo's spec to find the source images; load the "
                         "splits with benchmarks.harness.load_splits (it reads the spec from manifest.json)")
    spec = spec_from_data(dict(spec_data), where="the zoo's spec (manifest.json)")
    try:
        return create_family(spec.family).load_data(spec)
    except Exception as error:  # any failure to reach the data: say what is needed and where it is looked up
        raise ValueError(f"the inr-editing task computes its targets from the images the SIRENs were fitted to "
                         f"(data source {spec.dataset.name!r}, by the image_index column), and they are not "
                         f"reachable here: {error}. Give a local copy (NFNZOO_DATA, or ../shared/data beside the "
                         "project; see zoo/data/images.py) or network access to the source") from error


def _render(architecture, weights: WeightBatch, batch_size: int) -> torch.Tensor:
    from zoo.families.inr import coordinate_grid, siren_forward

    coords = coordinate_grid(architecture.image_size).to(weights.tensors[0].device)
    with torch.no_grad():
        return torch.cat([_signed(siren_forward(architecture, batch.tensors, coords).flatten(1), architecture)
                          for _, batch in weights.batches(batch_size)])


def _mse(targets: np.ndarray, renders: np.ndarray) -> float:
    return float(np.mean((renders - targets) ** 2))


def _as_images(pixels: torch.Tensor, architecture) -> np.ndarray:
    """(k, P * C) on [-1, 1] -> (k, C, H, W) on [0, 1], clipped as the authors display them."""
    size, channels = architecture.image_size, architecture.out_features
    images = pixels.reshape(-1, size, size, channels).permute(0, 3, 1, 2)
    return ((images.clamp(-1, 1) + 1) / 2).cpu().numpy().astype(np.float32)


@register_task("inr-editing")
class INREditingTask(Task):
    """Edit what a SIREN renders by predicting a weight delta (see the module docstring)."""

    Config = INREditingConfig
    metrics = {"mse": False}
    main_metric = "mse"
    PRESETS = {"nfn": {"epochs": 36, "batch_size": 32, "lr": 1e-3, "warmup_steps": 1_000, "delta_scale": 0.01},
               "budget": {"epochs": 5, "batch_size": 32, "lr": 1e-3, "warmup_steps": 1_000, "delta_scale": 0.01}}

    @classmethod
    def model_problem(cls, model: str) -> str | None:
        if "weights" not in model_outputs(model):
            return (f"the inr-editing task needs a model with a weight-space output (a delta); {model!r} "
                    f"has none. The models with one: {models_with_output('weights')}")
        return None

    def model_overrides(self, model: str, overrides: Mapping[str, Any],
                        splits: Mapping[str, "ZooSplit"]) -> dict[str, Any]:
        problem = self.model_problem(model)
        if problem is not None:
            raise ValueError(problem)
        return {**overrides, "output": "weights"}

    def driver_inputs(self, splits: Mapping[str, "ZooSplit"]) -> dict[str, "ZooSplit"]:
        """The training split with the source images attached, read here where the data is.

        So a job on a node without the driver's data folder still finds them, in the object store."""
        from zoo.loader import ZooSplit

        require_splits("inr-editing", splits)
        images = source_images(splits["train"], "train split")
        metadata = splits["train"].metadata.copy()
        metadata.attrs[SOURCE_IMAGES_ATTR] = _Attached(images)
        return {**splits, "train": ZooSplit(splits["train"].weights, metadata)}

    def kept_rows(self, split: str, metadata: pandas.DataFrame) -> np.ndarray:
        config = self.config
        return select_rows(metadata, split, ["image_index"], config.checkpoints, config.checkpoint_epochs)

    def run(self, splits: Mapping[str, "ZooSplit"], model: str, model_overrides: Mapping[str, Any],
            seed: int, device: str | torch.device = "cpu",
            report: Callable[[str], None] | None = None) -> TaskResult:
        require_splits("inr-editing", splits)
        model_overrides = self.model_overrides(model, model_overrides, splits)
        config, device = self.config, torch.device(device)
        architectures = {name: _inr_architecture(splits[name], f"{name} split") for name in SPLITS}
        architecture = architectures["train"]
        if len(set(architectures.values())) != 1:
            raise ValueError(f"the splits hold SIRENs of different architectures: {architectures}")
        images = source_images(splits["train"], "train split")  # before any training: fail early
        examples = {}
        for name in SPLITS:
            keep = select_rows(splits[name].metadata, name, ["image_index"], config.checkpoints,
                               config.checkpoint_epochs)
            weights, _, ids = augment_rows(splits[name], keep, name, seed, 0)
            index = torch.tensor(kept_metadata(splits[name], keep)["image_index"].to_numpy(dtype=np.int64))
            if (index < 0).any() or (index >= len(images)).any():
                raise ValueError(f"{name} split: image_index outside the source's {len(images)} images")
            source = images.x[index]
            if tuple(source.shape[1:]) != (architecture.out_features, architecture.image_size, architecture.image_size):
                raise ValueError(f"{name} split: the source images are {tuple(source.shape[1:])}; the SIRENs render "
                                 f"{architecture.out_features}x{architecture.image_size}x{architecture.image_size}")
            from zoo.families.inr import pixel_targets

            targets = pixel_targets(apply_edit(config.edit, source)).flatten(1)  # (N, P * C) on [-1, 1]
            examples[name] = (weights.to(device=device), targets.to(device), ids)
        (train, train_targets, _), (validation, validation_targets, _), (test, test_targets, test_ids) = \
            (examples[name] for name in SPLITS)

        with isolated_rng(seed, device):
            nfn = create_model(model, train.space, **model_overrides)
            net = EditedRender(nfn, train.space, architecture, config.delta_scale).to(device)
            problem = Problem(train, train_targets, validation, validation_targets, train_targets,
                              nn.functional.mse_loss, _mse, "mse", seed, higher_is_better=False,
                              report=report, out_features=train_targets.shape[1])  # the edited render
            learned = LEARNERS["gradient"](net, problem, config)
            edited = learned.predict(test)
        before = _render(architecture, test, config.eval_batch_size)
        per_member_after = (edited - test_targets).square().mean(dim=1).cpu().numpy().astype(np.float64)
        per_member_before = (before - test_targets).square().mean(dim=1).cpu().numpy().astype(np.float64)
        table = pandas.DataFrame({"model_id": test_ids, "target": per_member_before, "prediction": per_member_after})
        shown = min(config.examples, len(test_ids))
        figure = {"model_id": np.array(test_ids[:shown]), "original": _as_images(before[:shown], architecture),
                  "target": _as_images(test_targets[:shown], architecture),
                  "edited": _as_images(edited[:shown], architecture)}
        return TaskResult(self.score(per_member_before, per_member_after), table, count_parameters(net),
                          learned.selection, {"mse_unedited": float(per_member_before.mean())}, figure,
                          curve=learned.curve)

    # the edited render's error needs the model itself: a board checks the rows and the mean
    RESCORING = "the mean of the submitted per-SIREN MSEs over exactly the pinned test rows (not the renders)"

    @classmethod
    def test_targets(cls, metadata: pandas.DataFrame, task_config: Mapping[str, Any]) -> pandas.DataFrame:
        config = from_data(INREditingConfig, dict(task_config), where="task_config")
        keep = select_rows(metadata, "test", ["image_index"], config.checkpoints, config.checkpoint_epochs)
        ids = metadata.reset_index(drop=True).loc[keep, "model_id"].astype(str).to_numpy()
        return pandas.DataFrame({"model_id": ids, "target": np.full(len(ids), np.nan)})

    @classmethod
    def score(cls, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        """The mean over test SIRENs of each edited render's pixel MSE (`predictions`)."""
        return {"mse": float(np.mean(predictions))}

    @classmethod
    def evaluation_protocol(cls, task_config: Mapping[str, Any]) -> dict[str, Any]:
        return {"edit": task_config.get("edit", "dilate"), "checkpoints": task_config.get("checkpoints", "final")}

    @classmethod
    def describe_protocol(cls, task_config: Mapping[str, Any]) -> str:
        return (f"edit: {task_config.get('edit', 'dilate')} of the source image; checkpoints: "
                f"{task_config.get('checkpoints', 'final')}; loss and metric: pixel MSE on [-1, 1]")
