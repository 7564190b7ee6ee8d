"""Published zoos in our format and ours in theirs: the importer and exporter registries.

`nfnzoo import FORMAT SOURCE --out DIR` reads a zoo a paper published into our dataset format. The
source is in the layout its authors' loaders read. `nfnzoo export FORMAT DIR --out LEGACY` writes one of
ours in that layout.

Each format is one module that registers an importer and an exporter under the format's name. An
importer is `import_zoo(source, out, **options) -> manifest`. An exporter is `export_zoo(folder, out,
config=None) -> Path`.

The formats' modules are imported by name on the registries' first read (`zoo.registry`). So listing the
formats imports no torch.
"""

from __future__ import annotations

from typing import Callable

from zoo.registry import Registry

FORMAT_MODULES = ("zoo.imports.small_cnn_zoo", "zoo.imports.small_cnn_zoo_export", "zoo.imports.nfn_sirens",
                  "zoo.imports.small_transformer_zoo", "zoo.imports.dwsnets_inrs",
                  "zoo.imports.model_zoos")

IMPORTERS: Registry[Callable] = Registry("zoo format (import)", modules=FORMAT_MODULES)
EXPORTERS: Registry[Callable] = Registry("zoo format (export)", modules=FORMAT_MODULES)


def register_importer(name: str) -> Callable[[Callable], Callable]:
    return IMPORTERS.register(name)


def register_exporter(name: str) -> Callable[[Callable], Callable]:
    return EXPORTERS.register(name)


def list_importers() -> list[str]:
    return IMPORTERS.names()


def list_exporters() -> list[str]:
    return EXPORTERS.names()


def get_importer(name: str) -> Callable:
    """The importer of format `name`; an unknown name raises an error listing the formats."""
    return IMPORTERS.get(name)


def get_exporter(name: str) -> Callable:
    """The exporter of format `name`; an unknown name raises an error listing the formats."""
    return EXPORTERS.get(name)
