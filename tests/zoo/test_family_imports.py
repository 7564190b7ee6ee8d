"""The family contract (`zoo.families.base`) imports no family, so nothing imports in a cycle."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zoo.families import base as contract
from zoo import families


@pytest.mark.parametrize("module", ["zoo.families.base", "zoo.training.population", "zoo.families",
                                    "zoo.families.transformer_population", "zoo.families.inr_population"])
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    # a cycle shows only when the module is the first one imported: its half-initialized self is found
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_contract_module_imports_no_family():
    code = "import sys, zoo.families.base; print(sorted(m for m in sys.modules if m.startswith('zoo.families')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "['zoo.families', 'zoo.families.base']", (
        result.stdout + result.stderr)


def test_the_families_package_re_exports_the_contract():
    for name in ("CheckpointResult", "Family", "FAMILIES", "create_family", "get_family", "list_families",
                 "register_family"):
        assert getattr(families, name) is getattr(contract, name)


@pytest.mark.parametrize("name", families.list_families())
def test_every_family_lists_its_data_sources(name):
    family = families.create_family(name)
    assert type(family).data_sources is not contract.Family.data_sources
