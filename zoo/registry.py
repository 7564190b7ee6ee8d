"""A name -> factory registry, shared by zoo families, NFN models, tasks and tracks.

A registry is a dict with a decorator: duplicate names are an error, and an unknown name
raises an error that lists the valid ones. Lookups accept hyphens for underscores and back.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """Raised when a registry is asked for a name it does not hold."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


class Registry(Generic[T]):
    """Holds named factories of one kind (``kind`` appears in error messages)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = item
            return item

        return decorator

    def resolve(self, name: str) -> str:
        """The registered spelling of `name`: hyphens and underscores are interchangeable
        (`transformer-nfn` is `transformer_nfn`); an unknown name lists the valid ones."""
        for candidate in (name, name.replace("-", "_"), name.replace("_", "-")):
            if candidate in self._items:
                return candidate
        valid = ", ".join(sorted(self._items)) or "(none registered)"
        raise UnknownNameError(f"unknown {self.kind} {name!r}; valid names: {valid}")

    def get(self, name: str) -> T:
        return self._items[self.resolve(name)]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def create(self, name: str, *args: Any, **overrides: Any) -> Any:
        return self.get(name)(*args, **overrides)  # type: ignore[operator]
