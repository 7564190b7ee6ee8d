"""A name -> factory registry, shared by zoo families, NFN models, tasks and tracks.

A registry is a dict with a decorator: duplicate names are an error, and an unknown name
raises an error that lists the valid ones. Lookups accept hyphens for underscores and back.

A registry may be given the modules that register into it (`modules`): they are imported by
name the first time the registry is read, so the registry's own module imports none of them
and they import it without an import circle (and listing never imports what is not asked for
before the first lookup).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """Raised when a registry is asked for a name it does not hold."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


class Registry(Generic[T]):
    """Holds named factories of one kind (``kind`` appears in error messages)."""

    def __init__(self, kind: str, modules: tuple[str, ...] = ()):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._modules = modules  # imported on first read: they register themselves
        self._discovered = not modules

    def _discover(self) -> None:
        if not self._discovered:
            self._discovered = True  # first: the modules register while being imported
            for module in self._modules:
                importlib.import_module(module)

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
        self._discover()
        for candidate in (name, name.replace("-", "_"), name.replace("_", "-")):
            if candidate in self._items:
                return candidate
        valid = ", ".join(sorted(self._items)) or "(none registered)"
        raise UnknownNameError(f"unknown {self.kind} {name!r}; valid names: {valid}")

    def get(self, name: str) -> T:
        return self._items[self.resolve(name)]

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._items

    def create(self, name: str, *args: Any, **overrides: Any) -> Any:
        return self.get(name)(*args, **overrides)  # type: ignore[operator]
