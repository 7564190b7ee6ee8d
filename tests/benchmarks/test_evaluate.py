"""`benchmarks.evaluate`: any model (a name, an import path, a class, a factory) through the same
harness as `nfnzoo bench run`, returning the `Results` the CLI writes; the docs page's runnable
example runs as written on the tiny zoo."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from torch import nn

import benchmarks
from benchmarks.results import Results, load_results
from benchmarks.tasks.registry import TASKS
from nfn_models.registry import MODELS
from plugin_site import example_site, on_path
from zoo.cli import main
from zoo.registry import PluginError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "bring-your-own-nfn.md"
FAST = {"epochs": 1}
VARYING = ("created", "hardware", "per_seed", "predictions")  # the clock, each seed's time and memory, the out stem


def _same_record(a: dict, b: dict) -> None:
    assert {k: v for k, v in a.items() if k not in VARYING} == {k: v for k, v in b.items() if k not in VARYING}
    assert [s["metrics"] for s in a["per_seed"]] == [s["metrics"] for s in b["per_seed"]]


def test_a_class_gives_what_the_cli_gives_for_its_import_path(tiny_zoo, tmp_path, capsys):
    with on_path(example_site(tmp_path / "site"), MODELS, TASKS):
        from my_nfn.model import TensorMoments

        cli = tmp_path / "cli.json"
        assert main(["bench", "run", "--task", "generalization", "--model", "my_nfn.model:TensorMoments", "--data",
                     str(tiny_zoo), "--seeds", "0", "--out", str(cli), "--set", "task.epochs=1"]) == 0
        api = tmp_path / "api.json"
        results = benchmarks.evaluate(TensorMoments, data=tiny_zoo, seeds=[0], out=api, task_overrides=FAST,
                                      progress=False)
    assert isinstance(results, Results) and results == load_results(api)
    assert results.model == "TensorMoments" and (tmp_path / "api.predictions.csv").exists()  # the class's name
    assert results.model_source.import_path == "my_nfn.model:TensorMoments"
    assert results.model_source.kind == "import path" and results.claims.groups == ("permutation",)
    _same_record(json.loads(cli.read_text()), json.loads(api.read_text()))
    assert (tmp_path / "cli.predictions.csv").read_text() == (tmp_path / "api.predictions.csv").read_text()


def test_a_name_and_a_factory(tiny_zoo, tmp_path):
    by_name = benchmarks.evaluate("statnn", data=tiny_zoo, seeds=[0], task_overrides=FAST, progress=False,
                                  model_overrides={"hidden_sizes": [8]})
    assert by_name.model == "statnn" and by_name.model_config["hidden_sizes"] == [8]

    def factory(space, out_features=1):  # takes the task's out_features
        return _FlatLinear(space.num_params, out_features)

    try:
        made = benchmarks.evaluate(factory, data=tiny_zoo, seeds=[0], task_overrides=FAST, progress=False,
                                   name="flat-linear-test", symmetries=())
        assert made.model == "flat-linear-test" and made.model_config == {"out_features": 1}
        assert set(made.summary) == {"kendall_tau", "r2", "rmse"} and made.predictions is None  # no out: no files
    finally:
        MODELS._items.pop("flat-linear-test", None), MODELS._plugins.discard("flat-linear-test")


class _FlatLinear(nn.Linear):
    def forward(self, weights):
        return super().forward(weights.flatten())


def test_bad_models_are_one_line():
    with pytest.raises(PluginError, match=r"model 3: expected a registered name, an import path MODULE:CLASS"):
        benchmarks.api.register(3)
    with pytest.raises(ValueError, match="data: expected a zoo folder"):
        benchmarks.evaluate("statnn")
    with pytest.raises(PluginError, match="NFN model 'mlp' is a built-in; give yours another name"):
        benchmarks.api.register(_FlatLinear, name="mlp")


def test_the_docs_example_runs_as_written(tiny_zoo, tmp_path, capsys):
    page = DOCS.read_text()
    code = re.search(r"<!-- runnable-example -->\n```python\n(.*?)```", page, re.S).group(1)
    assert 'DATA = "runs/cnn-mnist"' in code and 'OUT = "results"' in code
    code = code.replace('DATA = "runs/cnn-mnist"', f"DATA = {str(tiny_zoo)!r}")
    code = code.replace('OUT = "results"', f"OUT = {str(tmp_path)!r}")
    try:
        exec(compile(code, str(DOCS), "exec"), {"__name__": "__main__"})
    finally:
        for name in ("norms", "linear"):
            MODELS._items.pop(name, None), MODELS._plugins.discard(name)
    assert load_results(tmp_path / "norms.json").model == "norms"
    assert (tmp_path / "norms.predictions.csv").exists() and (tmp_path / "linear.predictions.csv").exists()
    assert re.match(r"norms -?[0-9.]+\n-?[0-9.]+ [0-9]+\n", capsys.readouterr().out)
