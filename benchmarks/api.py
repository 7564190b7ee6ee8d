"""The Python API for benchmarking any model: `benchmarks.evaluate(model, task=..., data=...)`.

`model` is whatever names a model. It may be a registered name (`"statnn"`) or an import path
(`"mypkg.models:MyNFN"`). It may be an installed package's `nfnzoo.models` entry point. It may be a
model class with the registry's contract (`nfn_models.registry.check_model_contract`). It may be a
factory `weight_space -> nn.Module`. A class or a factory is registered as a plugin under `name`.
By default that is its import path `module:QualifiedName`.

The results record the model's board name as their `model`. That is `name` where given, with any
form of `model`. Else it is the registered name of a built-in or an entry point. Else it is the
class's `BOARD_NAME`, or its own name (a factory's function name). How the model was loaded goes in
their `model_source` (`benchmarks.model_identity`).

The run is `benchmarks.harness.run_benchmark`'s, as `nfnzoo bench run` does it. It follows the same
protocol, and writes the same results file with its predictions sidecar. It keeps the same
resumable seed records. A re-run after an interruption runs only the missing seeds. The records are
keyed by the model's name and config, so give each different model its own `name`.

A class or a factory defined in a notebook runs in this process. Ray workers (`workers > 1`,
`address`) import the model by its name. So give them an import path or an entry point."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from torch import nn

from benchmarks.harness import run_benchmark
from benchmarks.model_identity import resolve_model
from benchmarks.results import Results
from benchmarks.run_options import Placement, RunOptions
from nfn_models.registry import MODELS, SPACE_GROUPS
from zoo.registry import PluginError, import_path
from zoo.validation.schema import from_data
from zoo.weightspace import WeightSpace

ModelLike = str | type | Callable[[WeightSpace], nn.Module]


@dataclasses.dataclass(frozen=True)
class FactoryConfig:
    out_features: int = 1  # outputs per checkpoint, which the task sets (10 classes for INR classification)


def factory_model(factory: Callable[..., nn.Module], symmetries: Sequence[str] = (),
                  weight_spaces: Sequence[str] = tuple(SPACE_GROUPS)) -> type:
    """A model class, with the registry's contract, whose models are `factory(weight_space)`.

    A factory that takes `out_features` gets the task's. One that does not serves the tasks with one
    output per checkpoint. `symmetries` are what its models claim (see `check_model`)."""
    takes_outputs = _takes(factory, "out_features")
    label = getattr(factory, "__qualname__", type(factory).__name__)

    class FactoryModel(nn.Module):
        Config = FactoryConfig

        def __new__(cls, weight_space: WeightSpace, out_features: int = 1) -> nn.Module:  # type: ignore[misc]
            if takes_outputs:
                model = factory(weight_space, out_features=out_features)
            elif out_features != 1:
                raise ValueError(f"the task needs {out_features} outputs per checkpoint; the factory {label} "
                                 "takes only weight_space: give it an out_features argument")
            else:
                model = factory(weight_space)
            if not isinstance(model, nn.Module):
                raise TypeError(f"the factory {label} returned {type(model).__name__}; expected a torch.nn.Module")
            if not hasattr(model, "symmetries"):
                model.symmetries = tuple(symmetries)
            return model

    FactoryModel.SOURCE = factory  # its code, for the results' model_source and the default board name
    FactoryModel.symmetries = tuple(symmetries)
    FactoryModel.weight_spaces = tuple(weight_spaces)
    FactoryModel.__qualname__ = FactoryModel.__name__ = f"factory({label})"
    return FactoryModel


def _takes(function: Callable, parameter: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == parameter or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _importable(item: Any) -> bool:
    """Whether `item` is what its import path names.

    That means a class in a module, not one made in `__main__`, and not a function."""
    module = sys.modules.get(getattr(item, "__module__", None) or "")
    if module is None or module.__name__ == "__main__":
        return False
    found: Any = module
    for part in item.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is item


def register(model: ModelLike, name: str | None = None, symmetries: Sequence[str] = ()) -> str:
    """The registered name of `model`, in any form `evaluate` takes.

    A class or a factory is registered, under `name` where given, else its import path."""
    if isinstance(model, str):
        return MODELS.resolve(model)
    if isinstance(model, type):
        for registered, item in MODELS.loaded().items():
            if item is model and not MODELS.is_plugin(registered):
                return registered  # a built-in class: its own name
        return MODELS.add_plugin(name or import_path(model), model,
                                 "import path" if _importable(model) else "object")
    if callable(model):
        return MODELS.add_plugin(name or import_path(model), factory_model(model, symmetries))
    raise PluginError(f"model {model!r:.80}: expected a registered name, an import path MODULE:CLASS, a model class "
                      "or a factory weight_space -> nn.Module")


def evaluate(model: ModelLike, task: str = "generalization", data: str | Path | None = None,
             seeds: Sequence[int] = (0, 1, 2), out: str | Path | None = None, *, config: str | None = None,
             model_overrides: Mapping[str, Any] | None = None, task_overrides: Mapping[str, Any] | None = None,
             name: str | None = None, symmetries: Sequence[str] = (), device: str | None = None,
             workers: int = 1, address: str | None = None, gpus_per_job: float = 0.0,
             progress: bool = True) -> Results:
    """Trains and evaluates `model` on `task` over `seeds` on the zoo `data`; returns the results.

    `model` is a registered name, an import path, an entry point's name, a model class, or a factory
    `weight_space -> nn.Module` (see the module docstring). `task` is a registered task, or a task
    plugin's import path or entry point. `data` is a zoo folder, or a Hub dataset repo
    `ORG/NAME[@REVISION]`. Each of the `seeds` is one resumable job.

    `out` is the results JSON to write, with its predictions sidecar beside it, as
    `nfnzoo bench run --out`. `config` is the dataset config; by default, the dataset's only one.
    `model_overrides` are the model's hyperparameters (`--set model.KEY=VALUE`). `task_overrides` are
    the task's (`--set task.KEY=VALUE`).

    `name` is the model's board name, which the results record (default: see the module docstring). A
    class or a factory is registered under it too. `symmetries` are what a factory's models claim; a
    class states its own. `device` is the torch device, by default CUDA when available. `workers`,
    `address`, `gpus_per_job` and `progress` are `benchmarks.harness.run_benchmark`'s.

    Returns the `benchmarks.results.Results` that `out` holds."""
    if data is None:
        raise ValueError("data: expected a zoo folder or a Hub dataset repo ORG/NAME[@REVISION], got None")
    registered = register(model, name, symmetries)
    options = RunOptions(seeds, model_overrides, task_overrides, Placement(device, workers, address, gpus_per_job),
                         progress)
    results = run_benchmark(task, resolve_model(registered, name), data, config, options, out)
    return from_data(Results, results, where=f"the results of {registered}")
