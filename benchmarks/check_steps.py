"""The order `nfnzoo bench check-model` runs its checks in, and what it refuses before them.

`check_steps` yields the steps as they run: ("start", a label) before each step that runs the model's code,
then that step's one record. `benchmarks.check_process` runs them in a child process and holds a step
without its record as not finished. `check_model` runs them here and keeps the checks.

Before any child starts, `refuse_early` makes the refusals that need no outside code (a bad `--spaces`, and
a built-in's bad setting). Each check itself is `benchmarks.check_model`'s."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Mapping, Sequence

from benchmarks.check_model import (MAGNITUDES, SEEDS, SMALL, SPACES, Check, Size, build_model, check_denormal,
                                    check_equivariance, check_invariance, check_output, groups, reads,
                                    small_settings, space, weight_output_spaces)
from benchmarks.tasks.limits import model_size_problem
from nfn_models import claimed_symmetries
from nfn_models.registry import MODELS
from zoo.validation.schema import SchemaError


def check_model(name: str, seeds: Sequence[int] = SEEDS, overrides: Mapping[str, Any] | None = None,
                spaces: Sequence[str] | None = None) -> list[Check]:
    """Every check of model `name`, on the weight spaces it reads, or on those of `spaces`.

    `name` is a registered name, an import path or an entry point. `spaces` suits e.g. a setting that
    reads SIRENs only."""
    return [value for kind, value in check_steps(name, seeds, overrides, spaces) if kind == "check"]


def check_steps(name: str, seeds: Sequence[int] = SEEDS, overrides: Mapping[str, Any] | None = None,
                spaces: Sequence[str] | None = None) -> Iterator[tuple[str, Any]]:
    """`check_model`'s steps as they run.

    ("start", a label) comes before each step that runs the model's code. Then comes that step's one
    record: ("loaded", the resolved name), ("size", `Size`) or ("check", `Check`).
    `benchmarks.check_process` holds a step without its record as not finished."""
    _known_spaces(spaces)
    name = yield from _step("import of the model", "loaded", MODELS.resolve, name)
    read = _read(name, spaces)
    for space_name in read:
        yield from _step(f"build on {space_name}", "size", sized, name, space_name, "invariant", overrides)
        broken = False
        with _on_space(name, space_name):
            claims = claimed_symmetries(build_model(name, space_name, 0, overrides=overrides))
            for magnitude in MAGNITUDES:  # the output first: where it breaks the contract no claim is measured
                output = yield from _step(f"output on {space_name} at {magnitude}", "check", check_output,
                                          name, space_name, magnitude, seeds, overrides)
                broken |= output.broken is not None
                for group in groups(space_name) if output.broken is None else ():
                    if magnitude == "unit" or group in claims:
                        check = yield from _step(f"invariance under {group} on {space_name} at {magnitude}", "check",
                                                 check_invariance, name, space_name, group, seeds, overrides, magnitude)
                        broken |= check.broken is not None
            for group in claims if not broken else ():
                yield from _step(f"denormal invariance under {group} on {space_name}", "check", check_denormal,
                                 name, space_name, group, overrides)
    for space_name in [s for s in weight_output_spaces(name) if s in read]:
        yield from _step(f"build with a weight output on {space_name}", "size", sized, name, space_name, "weights",
                         overrides)
        with _on_space(name, space_name):
            claims = claimed_symmetries(build_model(name, space_name, 0, "weights", overrides))
            for magnitude in MAGNITUDES:
                for group in groups(space_name):
                    if magnitude == "unit" or group in claims:
                        yield from _step(f"equivariance under {group} on {space_name} at {magnitude}", "check",
                                         check_equivariance, name, space_name, group, seeds, overrides, magnitude)


def refuse_early(name: str, overrides: Mapping[str, Any] | None = None, spaces: Sequence[str] | None = None) -> None:
    """The refusals that need no outside code, raised where the command runs, before any child starts.

    One is an unknown `--spaces` name. For a built-in model, others are a space set it reads none of,
    and a setting it refuses when built small on a space it reads (`sized`: a bad config key or value,
    a size too large). An import path or an entry point is the author's code: its import and builds run
    only in `check_steps`' child (`benchmarks.check_process`), which makes the same refusals there."""
    _known_spaces(spaces)
    if name in MODELS.builtin_names():
        for space_name in _read(name, spaces):
            sized(name, space_name, "invariant", overrides)


def _known_spaces(spaces: Sequence[str] | None) -> None:
    unknown = sorted(set(spaces or ()) - set(SPACES))
    if unknown or spaces == []:
        raise ValueError(f"--spaces: expected some of {', '.join(sorted(SPACES))}, got {list(spaces or [])}")


def _read(name: str, spaces: Sequence[str] | None) -> list[str]:
    """The spaces model `name` is checked on: those it reads, of `spaces` where given (none is an error)."""
    read = [s for s in sorted(SPACES) if reads(name, s) and (spaces is None or s in spaces)]
    if not read:
        raise ValueError(f"model {name!r} reads none of the spaces {list(spaces or [])}")
    return read


def _step(label: str, kind: str, run: Callable[..., Any], *arguments: Any) -> Iterator[tuple[str, Any]]:
    yield "start", label
    record = run(*arguments)
    yield kind, record
    return record


def sized(name: str, space_name: str, output: str, overrides: Mapping[str, Any] | None = None) -> Size:
    """The size model `name` is checked at on the space, counted on the meta device before it is built.

    The count is `model_size_problem`'s, as `bench run` counts. A model too large is refused in that
    one line, unallocated."""
    given = dict(overrides or {})
    with _on_space(name, space_name):
        chosen = small_settings(MODELS.get(name), name, space_name, output, given)
    problem = model_size_problem(name, space(space_name), chosen)
    if problem is not None:
        raise ValueError(problem)
    with _on_space(name, space_name):
        model = build_model(name, space_name, 0, output, given)
    return Size(space_name, output, sum(parameter.numel() for parameter in model.parameters()),
                {key: chosen[key] for key in SMALL if key in chosen and key not in given})


@contextlib.contextmanager
def _on_space(name: str, space_name: str) -> Iterator[None]:
    """A model that raises while built or called on a space gives one line, not a traceback.

    Causes are a plugin's bug, or a setting it refuses. The line names the model and the space. It is a
    ValueError, which the CLI prints."""
    try:
        yield
    except SchemaError:
        raise  # names the model's config key already
    except Exception as error:  # any error of the model's own code (re-raised as one line)
        text = (str(error).strip().splitlines() or [""])[0][:500]
        raise ValueError(f"model {name!r} on {space_name}: {type(error).__name__}: {text}") from error
