"""The generalization task's evaluation protocol: which rows of a split count, and augmentation.

Each step is a pure function of a split's metadata. Augmentation also takes its weights and an
explicit `torch.Generator`. So the task (`benchmarks.tasks.generalization`) composes them, and
records the choices in its config, hence in every results file.

Checkpoints: every stored epoch (this package's default), each run's final epoch, or a list of
epochs. Monomial-NFN (Tran et al. NeurIPS 2024), ScaleGMN (Kalogeropoulos et al. NeurIPS 2024) and
Transformer-NFN (Tran et al. ICLR 2025) use final epochs of the CNN zoos of Unterthiner et al.
2020. A run's "best" checkpoint (`zoo.planning.plan`, `training.keep_best`) is not a final one. A
run whose final checkpoint diverged contributes no row.

A metadata subset, e.g. `{activation: relu}`. Monomial-NFN and ScaleGMN report separately on the
ReLU and tanh subsets of the Small CNN Zoo.

An accuracy threshold: members whose target is below it are dropped. Transformer-NFN drops the
untrained-looking members of its zoo this way.

Group augmentation: K random elements of each row's weight-space group, applied to a split. The
group is `zoo.symmetry`'s, from `Family.symmetry(architecture, hparams)`. Monomial-NFN augments its
training set this way. To test robustness it augments its test set too, with scalings drawn from
U[1, 10^k].

A row's group depends on its family, its architecture and its discrete hyperparameters. Take the
activation: ReLU rows get positive scalings, and tanh rows sign flips. The loader's metadata carries
the architecture's id, and the manifest maps ids to architectures. `with_architectures` attaches
them to a split's metadata, as `benchmarks.harness.load_splits` does."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pandas
import torch

from zoo.planning.plan import checkpoint_id
from zoo.weightspace import WeightBatch

if TYPE_CHECKING:
    from zoo.loader import ZooSplit

ARCHITECTURES_ATTR = "architectures"  # metadata.attrs key: architecture id -> manifest entry
SPEC_ATTR = "spec"  # metadata.attrs key: the zoo spec's data (its dataset: where INR editing finds the images)


def with_architectures(split: "ZooSplit", architectures: Mapping[str, Mapping[str, Any]],
                       spec: Mapping[str, Any] | None = None) -> "ZooSplit":
    """A split whose metadata knows its architectures (manifest `architectures`: id -> entry).

    When given, it also knows the spec it was generated from (the manifest config's `spec`). An entry
    is the manifest's `{"family", "architecture", ...}`. The split is not changed. It is returned as it
    is when there is nothing to attach."""
    from zoo.loader import ZooSplit

    if not architectures and not spec:
        return split
    metadata = split.metadata.copy()
    if architectures:
        metadata.attrs[ARCHITECTURES_ATTR] = {key: dict(value) for key, value in architectures.items()}
    if spec:
        metadata.attrs[SPEC_ATTR] = dict(spec)
    return ZooSplit(split.weights, metadata)


def _require(metadata: pandas.DataFrame, columns: Sequence[str], where: str, why: str) -> None:
    missing = sorted(set(columns) - set(metadata.columns))
    if missing:
        raise ValueError(f"{where}: {why} needs the metadata columns {missing}")


def checkpoint_mask(metadata: pandas.DataFrame, checkpoints: str, epochs: Sequence[int], where: str,
                    fraction: float = 0.75) -> np.ndarray:
    """Rows kept by the checkpoint choice: "all", "final" (each run's last epoch), "epochs", or "fraction".

    The "fraction" choice keeps each run's epoch at `fraction` of its last: Transformer-NFN's 75 of 100."""
    if checkpoints == "all":
        return np.ones(len(metadata), dtype=bool)
    _require(metadata, ["run_id", "epoch"], where, f"checkpoints: {checkpoints}")
    if checkpoints == "epochs":
        present = set(metadata["epoch"].tolist())
        absent = sorted(set(epochs) - present)
        if absent:
            raise ValueError(f"{where}: no checkpoints at epochs {absent} (checkpoint_epochs); "
                             f"the split holds the epochs {sorted(present)}")
        return metadata["epoch"].isin(list(epochs)).to_numpy()
    # "final": the last epoch of each run; a best-validation copy of it is a different checkpoint
    best = np.array([model == checkpoint_id(run, "best") for model, run
                     in zip(metadata["model_id"].astype(str), metadata["run_id"].astype(str))], dtype=bool)
    epochs_of_run = metadata["epoch"].where(~best)
    last = epochs_of_run.groupby(metadata["run_id"]).transform("max")
    if checkpoints == "final":
        return ((metadata["epoch"] == last) & ~best).to_numpy()
    wanted = last * fraction
    if not np.allclose(wanted, wanted.round()):
        odd = sorted(set(last[~np.isclose(wanted, wanted.round())].astype(int).tolist()))
        raise ValueError(f"{where}: checkpoints: fraction {fraction} of the runs' last epochs {odd} is not a whole "
                         "epoch (rows of a split set that already chose one checkpoint per run, as the Small "
                         "Transformer Zoo's transformer-nfn set its epoch-75 rows, take --set task.checkpoints=all)")
    chosen = ((metadata["epoch"] == wanted.round()) & ~best).to_numpy()
    runs = set(metadata["run_id"].astype(str))
    found = set(metadata.loc[chosen, "run_id"].astype(str))
    if runs - found:
        example = sorted(runs - found)[0]
        stored = sorted(metadata.loc[metadata["run_id"].astype(str) == example, "epoch"].tolist())
        raise ValueError(f"{where}: {len(runs - found)} runs have no checkpoint at {fraction} of their last epoch "
                         f"(run {example} stores the epochs {stored})")
    return chosen


def subset_mask(metadata: pandas.DataFrame, subset: Mapping[str, Any], where: str) -> np.ndarray:
    """Rows whose every `subset` column holds one of its allowed values (a value or a list)."""
    unknown = sorted(set(subset) - set(metadata.columns))
    if unknown:
        raise ValueError(f"{where}: subset names the unknown metadata columns {unknown}; "
                         f"the columns are {sorted(metadata.columns)}")
    keep = np.ones(len(metadata), dtype=bool)
    for column in sorted(subset):
        allowed = allowed_values(subset[column])
        keep &= metadata[column].isin(allowed).to_numpy()
    return keep


def allowed_values(value: Any) -> list:
    """A subset entry's allowed values: a scalar or a list of them."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


@dataclasses.dataclass(frozen=True)
class RowGroup:
    """Rows (positions) of a split that share one weight-space group."""

    rows: torch.Tensor  # (n,) int64 positions
    symmetry: Any  # a `zoo.symmetry` group: sample / act / inverse / compose
    label: str  # e.g. "cnn/3f2a.../activation=relu", for error messages and the report


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def symmetry_groups(metadata: pandas.DataFrame, weights: WeightBatch, where: str) -> list[RowGroup]:
    """Each row's group, from `create_family(family).symmetry(architecture, hparams)`.

    Rows are grouped by family, architecture id and the family's discrete (non-float) hyperparameter
    columns, such as the activation. Continuous hyperparameters, like learning rate or init scale,
    never change which transformations preserve a network's function."""
    from zoo.families import create_family

    architectures = metadata.attrs.get(ARCHITECTURES_ATTR)
    if not architectures:
        raise ValueError(f"{where}: group augmentation needs each row's architecture; load the splits with "
                         "benchmarks.harness.load_splits, or attach the manifest's `architectures` with "
                         "benchmarks.protocol.with_architectures")
    _require(metadata, ["family", "architecture"], where, "group augmentation")
    frame = metadata.reset_index(drop=True)
    groups = []
    for (family_name, architecture), rows in frame.groupby(["family", "architecture"], sort=True):
        if architecture not in architectures:
            raise ValueError(f"{where}: architecture {architecture!r} is not among the known ones "
                             f"{sorted(architectures)}")
        family = create_family(str(family_name))
        fields = [f.name for f in dataclasses.fields(family.HParams) if f.name in frame.columns]
        discrete = [name for name in fields if not pandas.api.types.is_float_dtype(frame[name])]
        parts = rows.groupby(discrete, sort=True, dropna=False) if discrete else [((), rows)]
        for values, part in parts:
            first = part.iloc[0]
            hparams = {name: _python(first[name]) for name in fields}
            symmetry = family.symmetry(dict(architectures[architecture]["architecture"]), hparams)
            space = getattr(symmetry, "space", weights.space)
            if space.fingerprint() != weights.space.fingerprint():
                raise ValueError(f"{where}: family {family_name!r}'s weight space for architecture "
                                 f"{architecture!r} differs from the split's")
            values = values if isinstance(values, tuple) else (values,)
            label = "/".join([str(family_name), str(architecture), *(f"{n}={v}" for n, v in zip(discrete, values))])
            groups.append(RowGroup(torch.tensor(np.array(part.index), dtype=torch.long), symmetry, label))
    return groups


def sample_element(symmetry: Any, generator: torch.Generator, count: int,
            scale_range: tuple[float, float] | None) -> Any:
    """A group element per row; positive scalings redrawn from U[low, high] when asked."""
    element = symmetry.sample(generator, count)
    if scale_range is None:
        return element
    from zoo.symmetry.feedforward import FeedforwardSymmetry

    if not isinstance(symmetry, FeedforwardSymmetry):
        raise ValueError(f"augment_scale_range redraws hidden-unit scalings; {type(symmetry).__name__} has none")
    if symmetry.mode != "scale":  # sign flips and permutations have no scale to redraw
        return element
    low, high = scale_range
    scales = tuple(low + (high - low) * torch.rand(s.shape, generator=generator) for s in element.scales)
    return dataclasses.replace(element, scales=scales)


def augment(weights: WeightBatch, groups: Sequence[RowGroup], copies: int, generator: torch.Generator, *,
            keep_original: bool = True,
            scale_range: tuple[float, float] | None = None) -> tuple[WeightBatch, np.ndarray, np.ndarray]:
    """The originals (if kept) then `copies` transformed copies of every row, in row order.

    Returns the weights and, per output row, the source row and the copy number (0: the original).
    """
    count = len(weights)
    pieces, sources, numbers = ([weights], [np.arange(count)], [np.zeros(count, dtype=np.int64)]) \
        if keep_original else ([], [], [])
    for number in range(1, copies + 1):
        tensors = [t.clone() for t in weights.tensors]
        for group in groups:
            element = sample_element(group.symmetry, generator, len(group.rows), scale_range)
            moved = group.symmetry.act(element, weights[group.rows])
            for out, tensor in zip(tensors, moved.tensors):
                out[group.rows] = tensor.to(out.dtype)
        pieces.append(WeightBatch(weights.space, tuple(tensors)))
        sources.append(np.arange(count))
        numbers.append(np.full(count, number, dtype=np.int64))
    merged = WeightBatch(weights.space, tuple(torch.cat(parts) for parts in zip(*(p.tensors for p in pieces))))
    return merged, np.concatenate(sources), np.concatenate(numbers)


def architecture_overrides(model_class: type, overrides: Mapping[str, Any],
                           metadata: pandas.DataFrame, where: str) -> dict[str, Any]:
    """`overrides` with the model's `ARCHITECTURE_FIELDS` filled in from the zoo's architecture.

    Those hyperparameters describe the members, not the model. A transformer's head count is not
    visible in its tensors' shapes. A field the overrides leave out takes the architecture's value. One
    they give must agree with it."""
    fields = tuple(getattr(model_class, "ARCHITECTURE_FIELDS", ()))
    architectures = metadata.attrs.get(ARCHITECTURES_ATTR) or {}
    if not fields:
        return dict(overrides)
    if not architectures:
        unset = [name for name in fields if name not in overrides]
        if unset:
            raise ValueError(f"{where}: the model needs the members' {unset}, and the splits carry no architectures; "
                             "load them with benchmarks.harness.load_splits, or set them (model.KEY=VALUE)")
        return dict(overrides)
    used = sorted(set(metadata["architecture"].astype(str))) if "architecture" in metadata else sorted(architectures)
    filled = dict(overrides)
    for name in fields:
        values = {arch: architectures[arch]["architecture"][name] for arch in used
                  if arch in architectures and name in architectures[arch].get("architecture", {})}
        if not values:
            continue
        distinct = set(map(repr, values.values()))
        if len(distinct) > 1:
            raise ValueError(f"{where}: the architectures {sorted(values)} differ in {name} ({values}); "
                             f"a model with one {name} cannot read them all: choose a subset")
        value = next(iter(values.values()))
        if name in filled and filled[name] != value:
            raise ValueError(f"{where}: the model's {name}={filled[name]!r}, but the zoo's members have "
                             f"{name}={value!r}; leave {name} unset to take the zoo's")
        filled[name] = value
    return filled


def hparam_overrides(model_class: type, overrides: Mapping[str, Any], splits: Mapping[str, Any],
                     subset: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`overrides` with the model's `HPARAM_FIELDS` filled in from the rows the task reads.

    `HPARAM_FIELDS` maps a config field to the rows' hyperparameter column, e.g. ProbeGen's
    `member_activation` <- `activation`. The rows are every split's, within the task's `subset` where
    it names that column. One value is taken, and a given one must agree. Several are an error asking
    for a subset. A zoo without the column leaves the field as it is."""
    fields = dict(getattr(model_class, "HPARAM_FIELDS", {}))
    filled = dict(overrides)
    for field, column in fields.items():
        frames = [split.metadata for split in splits.values() if column in split.metadata]
        if not frames:
            continue
        values = {str(v) for frame in frames for v in frame[column].dropna().unique()}
        if column in subset:
            values &= {str(v) for v in allowed_values(subset[column])}
        if len(values) > 1:
            raise ValueError(f"{where}: the rows hold {column} {sorted(values)}; the model reads members of one "
                             f"{column} ({field}): choose a subset, e.g. --set 'task.subset={{\"{column}\": "
                             f"\"{sorted(values)[0]}\"}}'")
        if not values:
            continue
        (value,) = values
        if field in filled and str(filled[field]) != value:
            raise ValueError(f"{where}: the model's {field}={filled[field]!r}, but the rows it reads have "
                             f"{column}={value!r}; leave {field} unset to take the rows'")
        filled[field] = value
    return filled
