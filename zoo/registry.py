"""A name -> factory registry, shared by zoo families, NFN models, tasks and tracks.

A registry is a dict with a decorator. Duplicate names are an error, and an unknown name raises an error
that lists the valid ones. Lookups accept hyphens for underscores and back.

A registry may be given the modules that register into it (`modules`). They are imported by name the
first time the registry is read. So the registry's module imports none of them, and they import it
without an import cycle.

A registry may also take members from other packages (`entry_points` and `check`), as the NFN models'
and tasks' registries do. A name is first looked up among the registered names. Next it is tried as an
import path `package.module:Class`. Such a path is imported by `zoo.named_import.import_named` and
registered under that path. Last come the entry points of the group `entry_points` that installed
packages declare. An entry point's code is imported only when its name is asked for.

`check(name, item)` states the contract a loaded member must meet; it raises `PluginError`. Every
failure is one line naming what was given and what was expected. An entry point that takes a built-in's
name is an error when that name is asked for.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from typing import Any, Callable, Generic, TypeVar

from zoo.named_import import import_named, shadowed_in_working_folder
from zoo.validation.names import builtin_problem  # the one rule for names beside a built-in's

T = TypeVar("T")


class UnknownNameError(KeyError):
    """Raised when a registry is asked for a name it does not hold."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


class PluginError(ValueError):
    """A member from another package (an import path or an entry point) that cannot serve."""


IMPORT_PATH = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*")


def import_path(item: Any) -> str:
    """`package.module:Qualified.Name` of a class or function (what an import path names)."""
    return f"{item.__module__}:{item.__qualname__}"


class Registry(Generic[T]):
    """Holds named factories of one kind (``kind`` appears in error messages)."""

    def __init__(self, kind: str, modules: tuple[str, ...] = (), entry_points: str | None = None,
                 check: Callable[[str, Any], None] | None = None):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._modules = modules  # imported on first read: they register themselves
        self._discovered = not modules
        self.entry_point_group = entry_points  # e.g. "nfnzoo.models": other packages' members
        self._check = check  # the contract a member loaded from elsewhere must meet
        self._plugins: set[str] = set()  # names registered from import paths, entry points or `add_plugin`
        self._origins: dict[str, str] = {}  # plugin name -> how it came: "import path", "entry point" or "object"
        self._entry_points: dict[str, importlib.metadata.EntryPoint] | None = None  # read once, see `refresh`

    def entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        """The group's entry points by name (metadata only: nothing is imported)."""
        if self._entry_points is None:
            found = importlib.metadata.entry_points(group=self.entry_point_group) if self.entry_point_group else ()
            self._entry_points = {point.name: point for point in found}
        return self._entry_points

    def refresh(self) -> None:
        """Reads the installed packages' entry points again (after installing one in this process)."""
        self._entry_points = None

    def is_plugin(self, name: str) -> bool:
        """Whether `name` came from another package (an import path, an entry point or `add_plugin`)."""
        return self.resolve(name) in self._plugins

    def origin(self, name: str) -> str:
        """How the member `name` came: "built-in", "import path", "entry point" or "object".

        A built-in is this package's own. An object is a class or factory handed to `add_plugin`, e.g.
        by `benchmarks.evaluate`.
        """
        name = self.resolve(name)
        return self._origins.get(name, "object") if name in self._plugins else "built-in"

    def add_plugin(self, name: str, item: T, origin: str = "object") -> str:
        """Registers `item` from outside the built-ins under `name`, after checking its contract.

        A plugin may replace an earlier plugin of that name (a notebook cell run twice), never a
        built-in. Its name may not look like a built-in's (`zoo.validation.names.builtin_problem`).
        """
        builtins = self.builtin_names()
        if name in builtins and self._items[name] is not item:
            raise PluginError(f"{self.kind} {name!r} is a built-in; give yours another name")
        problem = None if name in builtins else builtin_problem(self.kind, name, builtins)
        if problem is not None:
            raise PluginError(problem)
        if self._check is not None:
            self._check(name, item)
        if self._items.get(name) is not item:
            self._items[name] = item
            self._plugins.add(name)
            self._origins[name] = origin
        return name

    def _load_path(self, path: str) -> str:
        module_name, _, attribute = path.partition(":")
        try:
            module = import_named(module_name)
        except Exception as error:  # noqa: BLE001 (a plugin's own import error, whatever it is, is one line)
            top = module_name.partition(".")[0]
            why = (f"; the working folder's {top!r} is not used, since {top!r} is an installed or standard module: "
                   "rename yours" if shadowed_in_working_folder(module_name) else "")
            raise PluginError(f"{self.kind} {path!r}: cannot import module {module_name!r} "
                              f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}){why}; "
                              "expected MODULE:CLASS importable from this Python's path (run from the "
                              "folder that holds "
                              f"{top!r}, or install it: pip install -e FOLDER)") from None
        item: Any = module
        for part in attribute.split("."):
            if not hasattr(item, part):
                raise PluginError(f"{self.kind} {path!r}: module {module_name!r} has no {attribute!r}; "
                                  "expected MODULE:CLASS naming an attribute of the module")
            item = getattr(item, part)
        for name, registered in self._items.items():  # a built-in's own path: its name (a plugin's path
            if registered is item and name not in self._plugins:  # stays the path, whatever loaded first)
                return name
        return self.add_plugin(path, item, "import path")

    def _load_entry_point(self, point: importlib.metadata.EntryPoint) -> str:
        dist = getattr(point.dist, "name", None) or "an installed package"
        if point.name in self._items and point.name not in self._plugins:
            if import_path(self._items[point.name]) == point.value:  # the package's own module registered it
                return point.name
            raise PluginError(f"{self.kind} {point.name!r} is a built-in and also the entry point "
                              f"{point.name} = {point.value} of {dist} (group {self.entry_point_group}); "
                              "expected a name no built-in has: rename the entry point")
        try:
            item = point.load()
        except Exception as error:  # noqa: BLE001 (a plugin's own load error, whatever it is, is one line)
            raise PluginError(f"{self.kind} {point.name!r} (entry point {point.value} of {dist}): cannot load it "
                              f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})") from None
        if self._items.get(point.name) is item and point.name not in self._plugins:  # registered by its module
            self._plugins.add(point.name)
            self._origins[point.name] = "entry point"
        return self.add_plugin(point.name, item, "entry point")

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
        """The registered spelling of `name`; an unknown name lists the valid ones.

        Hyphens and underscores are interchangeable: `transformer-nfn` is `transformer_nfn`.
        """
        self._discover()
        candidates = (name, name.replace("-", "_"), name.replace("_", "-"))
        points = self.entry_points() if self.entry_point_group else {}
        for candidate in candidates:
            if candidate in self._items:
                if candidate in points and candidate not in self._plugins:
                    return self._load_entry_point(points[candidate])  # the clash check
                return candidate
        if isinstance(name, str) and IMPORT_PATH.fullmatch(name):
            return self._load_path(name)
        for candidate in candidates:
            if candidate in points:
                return self._load_entry_point(points[candidate])
        valid = ", ".join(sorted(set(self._items) | set(points))) or "(none registered)"
        hint = "; or an import path MODULE:CLASS" if self.entry_point_group else ""
        raise UnknownNameError(f"unknown {self.kind} {name!r}; valid names: {valid}{hint}")

    def get(self, name: str) -> T:
        return self._items[self.resolve(name)]

    def names(self) -> list[str]:
        """The registered names and the entry points' (whose code is not imported)."""
        self._discover()
        return sorted(set(self._items) | set(self.entry_points() if self.entry_point_group else ()))

    def loaded(self) -> dict[str, T]:
        """The members registered so far by name: the built-ins and the plugins already loaded.

        It imports nothing and checks no entry point; a lookup by name does.
        """
        self._discover()
        return dict(sorted(self._items.items()))

    def builtin_names(self) -> list[str]:
        """The names registered by this package's own modules (no plugin)."""
        self._discover()
        return sorted(set(self._items) - self._plugins)

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._items

    def create(self, name: str, *args: Any, **overrides: Any) -> Any:
        return self.get(name)(*args, **overrides)  # type: ignore[operator]
