"""Value domains of spec fields: each field's allowed range, declared once on its type.

A field's annotation carries its domain, e.g. ``dropout: Probability`` with ``Probability =
Annotated[float, Domain("a probability", 0, 1, high_open=True)]``. `zoo.validation.schema.convert`
checks the type and then the domain. So one declaration checks a fixed value, a grid value, a range's
ends, a sampled bound, an architecture field and a dataset field.

``typing.get_type_hints(cls)`` drops the annotation, as the Arrow schema and plain `int` / `float`
comparisons need. ``get_type_hints(cls, include_extras=True)`` keeps it
(`zoo.validation.schema.type_hints`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from typing import Annotated, Any


def _number(value: float) -> str:
    return f"{value:g}"


@dataclasses.dataclass(frozen=True)
class Domain:
    """The numbers between `low` and `high` (open or closed ends, None for no bound), finite."""

    description: str  # what the value is, e.g. "a probability"; the message adds the interval
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # low itself excluded
    high_open: bool = False  # high itself excluded

    def __contains__(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return (f"{self.description} in {'(' if self.low_open else '['}{_number(self.low)}, "
                    f"{_number(self.high)}{')' if self.high_open else ']'}")
        if self.low is not None:
            return f"{self.description} ({'>' if self.low_open else '>='} {_number(self.low)})"
        if self.high is not None:
            return f"{self.description} ({'<' if self.high_open else '<='} {_number(self.high)})"
        return f"{self.description} (finite)"

    def violation(self, value: Any) -> str | None:
        """Why `value` (already of the field's type) is outside the domain, or None."""
        return None if value in self else f"expected {self}, got {value!r}"


@functools.cache  # annotations are few and hashable; convert asks for every value it checks
def domain_of(tp: Any) -> Domain | None:
    """The domain an annotation carries (``Annotated[..., Domain(...)]``), or None."""
    if typing.get_origin(tp) is Annotated:
        return next((extra for extra in typing.get_args(tp)[1:] if isinstance(extra, Domain)), None)
    return None


def base_type(tp: Any) -> Any:
    """An annotation without its domain: ``Annotated[int, ...]`` -> ``int``."""
    return typing.get_args(tp)[0] if typing.get_origin(tp) is Annotated else tp


# --- the domains, each declared once ---------------------------------------------------------

Probability = Annotated[float, Domain("a probability", 0, 1, high_open=True)]  # a rate: dropout
Fraction = Annotated[float, Domain("a fraction", 0, 1, low_open=True)]  # a share that cannot be empty
LearningRate = Annotated[float, Domain("a learning rate", 0, low_open=True)]
FinalLearningRate = Annotated[float, Domain("a learning rate", 0)]  # where a decay ends: 0 allowed
Coefficient = Annotated[float, Domain("a non-negative coefficient", 0)]  # L2, weight decay
Scale = Annotated[float, Domain("a positive number", 0, low_open=True)]  # stds, frequencies
Real = Annotated[float, Domain("a number")]  # any finite value (an offset)

Size = Annotated[int, Domain("a positive integer", 1)]  # widths, counts, lengths, batch sizes
Count = Annotated[int, Domain("a non-negative integer", 0)]  # epochs, steps, paddings, hold-outs
Index = Annotated[int, Domain("an index", 0)]
Seed = Annotated[int, Domain("a seed", 0)]  # numpy's default_rng rejects negative seeds
Classes = Annotated[int, Domain("a class count", 2)]  # a classifier needs two classes at least
