"""Models and tasks from other packages: by import path and by entry point, loaded lazily, with
one-line errors (an unimportable path, a class without the contract, a built-in's name)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nfn_models
from benchmarks.tasks import list_tasks
from benchmarks.tasks.registry import TASKS
from nfn_models.registry import MODELS
from plugin_site import add_metadata, example_site, on_path, subprocess_env
from zoo.cli import main
from zoo.registry import PluginError, UnknownNameError

LAZY_MODULE = "raise ImportError('this plugin needs a GPU library that is not here')\n"


@pytest.fixture
def site(tmp_path):
    """The example package's metadata, and a package whose entry points are broken or clash."""
    (tmp_path / "lazy_plugin.py").write_text(LAZY_MODULE)
    add_metadata(tmp_path / "odd", "odd-plugins", {
        "nfnzoo.models": {"needs_gpu_lib": "lazy_plugin:Model", "statnn": "my_nfn.model:TensorMoments",
                          "not_a_model": "my_nfn.model:TensorMomentsConfig"},
        "nfnzoo.tasks": {"needs_gpu_lib_task": "lazy_plugin:Task"}})
    with on_path([*example_site(tmp_path / "site"), tmp_path / "odd", tmp_path], MODELS, TASKS):
        yield tmp_path


def test_listing_names_entry_points_without_importing_them(site):
    assert {"tensor_moments", "needs_gpu_lib"} <= set(nfn_models.list_models())
    assert "needs_gpu_lib_task" in list_tasks()
    assert "lazy_plugin" not in sys.modules and "my_nfn.model" not in sys.modules
    assert nfn_models.models_with_output("invariant")  # says what is loaded, imports no plugin
    assert "lazy_plugin" not in sys.modules


def test_a_model_by_entry_point_and_by_import_path(site):
    assert MODELS.resolve("tensor_moments") == "tensor_moments" and MODELS.is_plugin("tensor-moments")
    assert "my_nfn.model" in sys.modules
    assert MODELS.resolve("my_nfn.model:TensorMoments") == "my_nfn.model:TensorMoments"
    assert nfn_models.model_config("my_nfn.model:TensorMoments", hidden=4).hidden == 4
    assert MODELS.resolve("nfn_models.statnn:STATNN") == "statnn"  # a built-in's path is its name


@pytest.mark.parametrize("given, message", [
    ("no_such_pkg.models:MyNFN", "NFN model 'no_such_pkg.models:MyNFN': cannot import module 'no_such_pkg.models' "
                                 "(ModuleNotFoundError: No module named 'no_such_pkg'); expected MODULE:CLASS"),
    ("my_nfn.model:Missing", "module 'my_nfn.model' has no 'Missing'; expected MODULE:CLASS naming an attribute"),
    ("my_nfn.model:TensorMomentsConfig", "expected a torch.nn.Module subclass built as Model(weight_space"),
    ("torch.nn:Linear", "NFN model 'torch.nn:Linear' (Linear): expected a dataclass attribute `Config`"),
    ("needs_gpu_lib", "NFN model 'needs_gpu_lib' (entry point lazy_plugin:Model of odd-plugins): cannot load it "
                      "(ImportError: this plugin needs a GPU library that is not here)"),
    ("not_a_model", "expected a torch.nn.Module subclass"),
    ("statnn", "NFN model 'statnn' is a built-in and also the entry point statnn = my_nfn.model:TensorMoments of "
               "odd-plugins (group nfnzoo.models); expected a name no built-in has"),
])
def test_model_errors_are_one_line(site, given, message):
    with pytest.raises(PluginError) as error:
        MODELS.resolve(given)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_class_without_the_contract_is_refused(site):
    class NoSpaces(nfn_models.registry.MODELS.get("mlp")):
        weight_spaces = ("graph",)

    with pytest.raises(PluginError,
                       match=r"`weight_spaces` must be a tuple of some of \('feedforward', 'transformer'\)"):
        MODELS.add_plugin("odd", NoSpaces)
    with pytest.raises(PluginError, match="NFN model 'mlp' is a built-in; give yours another name"):
        MODELS.add_plugin("mlp", NoSpaces)


def test_task_plugins(site):
    with pytest.raises(PluginError, match=r"benchmark task 'needs_gpu_lib_task' \(entry point lazy_plugin:Task"):
        TASKS.resolve("needs_gpu_lib_task")
    with pytest.raises(PluginError, match="expected a subclass of benchmarks.tasks.Task"):
        TASKS.resolve("my_nfn.model:TensorMoments")
    assert TASKS.resolve("benchmarks.tasks.generalization:GeneralizationTask") == "generalization"
    with pytest.raises(UnknownNameError, match="unknown benchmark task 'nope'.*; or an import path MODULE:CLASS"):
        TASKS.resolve("nope")


def test_the_cli_takes_an_entry_point_and_reports_a_bad_path_in_one_line(site, tiny_zoo, tmp_path, capsys):
    out = tmp_path / "moments.json"
    env = subprocess_env(example_site(tmp_path / "clean"))  # a fresh interpreter reads the metadata on its path
    run = subprocess.run([sys.executable, "-m", "zoo.cli", "bench", "run", "--task", "generalization", "--model",
                          "tensor_moments", "--data", str(tiny_zoo), "--seeds", "0", "--out", str(out),
                          "--set", "task.epochs=1"], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert '"model": "tensor_moments"' in out.read_text()
    assert main(["bench", "run", "--task", "generalization", "--model", "no_such_pkg.models:MyNFN", "--data",
                 str(tiny_zoo), "--out", str(out)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "cannot import module 'no_such_pkg.models'" in error, error
