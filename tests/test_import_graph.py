"""The layout stays as built: no import circle anywhere, and no import that runs up the layers
`zoo` <- `nfn_models` <- `benchmarks` <- `leaderboards` (read from every module's AST, imports
inside functions included: a lazy import is still a dependency). Registries that discover their
members import them by name (`zoo.registry`), which is not an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("zoo", "nfn_models", "benchmarks", "leaderboards")  # each may import only those before it


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(packages=LAYERS) -> dict[str, Path]:
    return {_module_name(p): p for package in packages for p in sorted((ROOT / package).rglob("*.py"))}


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return name in modules and modules[name].name == "__init__.py"


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, and the packages whose `__init__` those imports run
    (not the importer's own packages: they are being initialized already)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if _is_package(name, modules) else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                targets.add(child if child in modules else base)
    edges: set[str] = set()
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in modules and prefix != name and (prefix not in own or prefix == target):
                edges.add(prefix)
    edges.discard(name)
    return edges


def import_graph(packages=LAYERS) -> dict[str, set[str]]:
    modules = _modules(packages)
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    layer = {package: i for i, package in enumerate(LAYERS)}
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if layer[b.split(".")[0]] > layer[a.split(".")[0]])


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_no_import_circle(graph):
    assert circles(graph) == []


def test_no_import_runs_up_the_layers(graph):
    assert upward_imports(graph) == []


def test_the_checks_can_fail(tmp_path):
    """Negative controls: a two-module circle and an upward import, as the checks see them."""
    assert circles({"zoo.a": {"zoo.b"}, "zoo.b": {"zoo.c"}, "zoo.c": {"zoo.a"}, "zoo.d": {"zoo.a"}}) == [
        ["zoo.a", "zoo.b", "zoo.c"]]
    assert upward_imports({"zoo.planning.spec": {"benchmarks.harness"},
                           "benchmarks.harness": {"zoo.planning.spec"}}) == [
        "zoo.planning.spec -> benchmarks.harness"]
    # the parser: a lazy import inside a function and a package's __init__ run by an import are edges
    modules = {"zoo": ROOT / "zoo" / "__init__.py", "zoo.a": tmp_path / "a.py", "zoo.pkg": tmp_path / "__init__.py",
               "zoo.pkg.b": tmp_path / "b.py"}
    (tmp_path / "a.py").write_text("def f():\n    from zoo.pkg.b import g\n")
    assert _imports("zoo.a", modules["zoo.a"], modules) == {"zoo.pkg", "zoo.pkg.b"}
