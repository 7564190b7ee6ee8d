"""Symmetry groups of weight spaces, as pure functions on batches of weights.

Every family declares the group acting on its members' weights (`Family.symmetry`).
The group is an object with four pure methods.
Each batches its elements along a leading dimension, so B members get B independent elements.
``sample(generator, batch_size)`` draws a seeded random element.
``act(element, weights)`` returns the transformed `WeightBatch`.
For a true symmetry of the architecture, it preserves the function.
``inverse(element)`` returns the inverse element.
``compose(first, second)`` is the element acting as ``first`` after ``second``.
So ``act(compose(a, b), w) == act(a, act(b, w))``.

The zoo's augmentation, the NFN layers' equivariance tests and the families'
function-preservation tests all use these same functions.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from zoo.weightspace import WeightBatch


class Symmetry(Protocol):
    def sample(self, generator: torch.Generator, batch_size: int) -> Any: ...

    def act(self, element: Any, weights: WeightBatch) -> WeightBatch: ...

    def inverse(self, element: Any) -> Any: ...

    def compose(self, first: Any, second: Any) -> Any: ...
