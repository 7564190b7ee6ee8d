"""Which of a standard suite's cells a model can run, so a table tells "cannot read" from "no entry".

A built-in model can run a cell when every rule of `READ_RULES` passes. Its `weight_spaces` must hold the
kind of the cell's zoo members (`nfn_models.registry.weight_space_kind`). So only transformer readers read
the transformer cell. And the cell's task must take it (`Task.model_problem`). For example, INR
classification trains by gradient steps, so the fitted tree ensembles cannot run it. A model's coverage is
the cells it entered over the cells it can run. The board never imports a submission's code. So for an
outside model it cannot tell which cells it reads: None.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from benchmarks.standard import Cell, ZooRef

# rule name -> why `model` cannot run `cell`, whose members are of weight-space kind `kind` (None: it can)
READ_RULES: dict[str, Callable[[str, Cell, str], str | None]] = {}


def read_rule(name: str):
    """Registers a rule of `READ_RULES`; a duplicate name is an error."""
    def decorator(rule: Callable[[str, Cell, str], str | None]):
        if name in READ_RULES:
            raise ValueError(f"read rule {name!r} is already registered")
        READ_RULES[name] = rule
        return rule
    return decorator


@read_rule("weight space")
def _weight_space(model: str, cell: Cell, kind: str) -> str | None:
    from nfn_models.registry import MODELS, SPACE_GROUPS

    kinds = getattr(MODELS.get(model), "weight_spaces", tuple(SPACE_GROUPS))
    return None if kind in kinds else f"{model} reads {' and '.join(kinds)} weights; {cell.name} holds {kind} members"


@read_rule("task")
def _task(model: str, cell: Cell, kind: str) -> str | None:
    from benchmarks.tasks import get_task_class

    return get_task_class(cell.task).model_problem(model)


def zoo_kind(zoo: ZooRef) -> str:
    """The weight-space kind ("feedforward" or "transformer") of `zoo`'s members, from its spec."""
    import benchmarks.standard
    from nfn_models.registry import weight_space_kind
    from zoo.families import create_family
    from zoo.planning.spec import load_spec
    from zoo.planning.spec_files import resolve_spec_path

    # the spec `ZooRef.generate_command` names: a file under benchmarks/standard_zoos/, else a bundled spec
    path = (Path(benchmarks.standard.__file__).parent / "standard_zoos" / zoo.spec if zoo.spec.endswith(".yaml")
            else resolve_spec_path(zoo.spec))
    spec = load_spec(path, zoo.profile)
    return weight_space_kind(create_family(spec.family).weight_space(spec.architecture))


def cell_kinds(cells: Sequence[Cell]) -> tuple[str, ...]:
    """Each cell's members' weight-space kind."""
    found: dict[str, str] = {}  # zoo name -> kind: each spec read once
    for cell in cells:
        if cell.zoo.name not in found:
            found[cell.zoo.name] = zoo_kind(cell.zoo)
    return tuple(found[cell.zoo.name] for cell in cells)


def cell_reads(model: str, cells: Sequence[Cell], kinds: Sequence[str]) -> tuple[bool | None, ...]:
    """Per cell, whether `model` can run it (every rule passes); None throughout for a model that is not
    built in, whose code the board does not import."""
    from nfn_models.registry import MODELS

    if model not in MODELS.builtin_names():
        return (None,) * len(cells)
    return tuple(all(rule(model, cell, kind) is None for rule in READ_RULES.values())
                 for cell, kind in zip(cells, kinds))
