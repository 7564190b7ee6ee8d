"""An NFN author's documented routes, each from a fresh package outside the repository to an accepted
entry on the rendered site that shows the model's board name, version, code commit and claims.

The package (`layersets`, a DeepSets-style model over each tensor's rows) is written into a temporary
folder and committed to a git repository of its own; nothing installs it. The routes
(docs/bring-your-own-nfn.md, docs/submitting.md):

1. the console script from the package's folder, `--model layersets.model:LayerSets` (the named module
   is found in the working folder, as uvicorn finds `module:attr`): board name `LayerSets`, the class's;
2. an entry point (`sets_of_layers`, declared in the package's metadata): board name `sets_of_layers` (a name
   that does not look like the class's `LayerSets`, which the board would refuse beside it);
3. the Python API, `benchmarks.evaluate(LayerSets, ...)`;
4. the standard suite by import path with `--name`, submitted as a folder;

then `leaderboard submit` (the commit defaults to the one the results recorded) and `leaderboard
render`. A model that claims a group it breaks is warned about by `bench run` and refused by submit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest

import benchmarks
from benchmarks.tasks.registry import TASKS
from leaderboards.board import CLAIMS_NOTE
from nfn_models.registry import MODELS
from plugin_site import add_metadata, on_path
from zoo.cli import main

MODEL = '''
"""LayerSets: each weight tensor's rows (a unit's incoming weights) as a set, DeepSets-style."""
import dataclasses

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class LayerSetsConfig:
    hidden: int = 16
    out_features: int = 1


class LayerSets(nn.Module):
    Config = LayerSetsConfig
    symmetries = ("permutation",)  # row statistics pooled over rows: unit relabellings change nothing
    weight_spaces = ("feedforward",)

    def __init__(self, weight_space, hidden=16, out_features=1):
        super().__init__()
        features = 3 * len(weight_space.tensors)
        self.head = nn.Sequential(nn.LayerNorm(features), nn.Linear(features, hidden), nn.ReLU(),
                                  nn.Linear(hidden, out_features))

    def forward(self, weights):
        pooled = []
        for tensor in weights.tensors:
            rows = tensor.reshape(tensor.shape[0], tensor.shape[1], -1)  # (B, units, incoming)
            pooled += [rows.mean(2).mean(1), rows.std(2, unbiased=False).mean(1), rows.abs().mean(2).amax(1)]
        return self.head(torch.stack(pooled, dim=1))


class Overclaiming(LayerSets):
    symmetries = ("permutation", "scale")  # false: a ReLU unit's scaling changes the row statistics
'''
CODE = "https://example.org/author/layersets"
EPOCHS = ["--set", "task.epochs=1"]


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> tuple[Path, str]:
    """(the folder holding `layersets/`, a git repository, and its commit)."""
    root = tmp_path_factory.mktemp("author") / "layersets-repo"
    (root / "layersets").mkdir(parents=True)
    (root / "layersets" / "__init__.py").write_text('__version__ = "0.3.1"\n')
    (root / "layersets" / "model.py").write_text(textwrap.dedent(MODEL))
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@example.org"}
    for command in (["init", "-q"], ["add", "layersets"], ["commit", "-qm", "LayerSets"]):
        subprocess.run(["git", *command], cwd=root, env=env, check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    return root, commit


def _console(root: Path, *argv: str) -> subprocess.CompletedProcess:
    """The installed `nfnzoo` console script run in `root` (the package is on no path but the working folder)."""
    script = Path(sys.executable).with_name("nfnzoo")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([str(script), *argv], cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _submit(results: Path, board: Path, zoo: Path, *extra: str) -> None:
    assert main(["leaderboard", "submit", str(results), "--root", str(board), "--dataset", str(zoo), "--code", CODE,
                 *extra]) == 0


class _Rows(HTMLParser):
    """Every entries table's rows as {column header: cell text}, and the page's text."""

    def __init__(self):
        super().__init__()
        self.headers, self.rows, self.text, self._cell, self._row, self._in = [], [], [], None, None, None
        self.links: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self._row = {"entry": attrs.get("data-entry")}
        elif tag in ("th", "td"):
            self._in, self._cell = tag, ""
        elif tag == "a" and self._row is not None and self._in == "td":
            self.links[self._row["entry"]] = attrs.get("href", "")

    def handle_endtag(self, tag):
        if tag in ("th", "td") and self._in == tag:
            if tag == "th":
                self.headers.append(self._cell.strip())
            else:
                self._row[len(self._row) - 1] = self._cell.strip()
            self._in = None
        elif tag == "tr" and self._row is not None:
            if len(self._row) > 1 and self._row["entry"]:
                columns = self.headers[-(len(self._row) - 1):]
                self.rows.append({"entry": self._row["entry"],
                                  **{c: self._row[i] for i, c in enumerate(columns)}})
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in is not None:
            self._cell += data


def test_every_documented_route_reaches_the_rendered_board(package, tiny_zoo, tiny_inr_zoo_folder, tmp_path, capsys):
    root, commit = package
    board = tmp_path / "board"
    board.mkdir()
    (board / "datasets.json").write_text(json.dumps({"datasets": []}))

    # 1. the console script, in the package's folder, by import path: the class's name on the board
    first = tmp_path / "route1.json"
    done = _console(root, "bench", "run", "--task", "generalization", "--model", "layersets.model:LayerSets",
                    "--data", str(tiny_zoo), "--seeds", "0,1,2", "--out", str(first), *EPOCHS)
    assert done.returncode == 0, done.stderr
    assert "claims permutation: hold" in done.stderr
    results = json.loads(first.read_text())
    assert results["model"] == "LayerSets"
    assert results["model_source"] == {"kind": "import path", "loaded_as": "layersets.model:LayerSets",
                                       "import_path": "layersets.model:LayerSets", "distribution": None,
                                       "version": "0.3.1", "commit": commit, "dirty": False}
    claims = results["claims"]
    assert claims["groups"] == ["permutation"] and claims["verdict"] == "holds"
    assert claims["spaces"] == ["cnn-relu", "cnn-tanh"] and claims["model_config"] == {}  # `hidden` is a size: shrunk
    assert {c["group"] for c in claims["checks"] if not c["claimed"] and c["test"] == "invariance"} == {"scale", "sign"}
    assert all(c["deviation"] <= c["tolerance"] for c in claims["checks"] if c["claimed"])
    _submit(first, board, tiny_zoo)  # no --commit: the recorded one

    # 2. an entry point, as an installed package declares it: the entry point's name, the package's version
    add_metadata(tmp_path / "site-packages", "layersets",
                 {"nfnzoo.models": {"sets_of_layers": "layersets.model:LayerSets"}},
                 version="0.3.1")
    with on_path([tmp_path / "site-packages", root], MODELS, TASKS):
        second = tmp_path / "route2.json"
        assert main(["bench", "run", "--task", "generalization", "--model", "sets_of_layers", "--data", str(tiny_zoo),
                     "--seeds", "0,1,2", "--out", str(second), *EPOCHS]) == 0
        source = json.loads(second.read_text())["model_source"]
        assert json.loads(second.read_text())["model"] == "sets_of_layers"
        assert (source["kind"], source["distribution"], source["version"]) == ("entry point", "layersets", "0.3.1")
        _submit(second, board, tiny_zoo, "--commit", commit[:12])  # a prefix of the recorded commit agrees

        # 3. the Python API with the class itself
        from layersets.model import LayerSets
        third = tmp_path / "route3.json"
        made = benchmarks.evaluate(LayerSets, data=tiny_zoo, seeds=[3, 4, 5], out=third, task_overrides={"epochs": 1},
                                   progress=False)
        assert made.model == "LayerSets" and made.claims.verdict == "holds"
        _submit(third, board, tiny_zoo)

        # 4. the standard suite by import path, under a name of the author's choosing
        suite = tmp_path / "std"
        assert main(["bench", "suite", "standard-v1", "--model", "layersets.model:LayerSets", "--name", "LayerSets-v1",
                     "--only", "inr-classification", "--data", f"inr-mnist-fast-fifth={tiny_inr_zoo_folder}", "--out",
                     str(suite), "--device", "cpu"]) == 0
        assert "submit with: nfnzoo leaderboard submit" in capsys.readouterr().out
        assert json.loads((suite / "inr-classification.json").read_text())["model"] == "LayerSets-v1"
        assert main(["leaderboard", "submit", str(suite), "--root", str(board), "--code", CODE]) == 0

    assert main(["leaderboard", "render", "--root", str(board), "--out", str(tmp_path / "site")]) == 0
    page = _Rows()
    page.feed((tmp_path / "site" / "generalization.html").read_text())
    rows = {row["Model"]: row for row in page.rows}
    # route 3 shares route 1's name, with other seeds: the board tells the two rows apart by them
    assert set(rows) == {"LayerSets (seeds [0, 1, 2])", "LayerSets (seeds [3, 4, 5])", "sets_of_layers"}
    for model in ("LayerSets (seeds [0, 1, 2])", "sets_of_layers", "LayerSets (seeds [3, 4, 5])"):
        row = rows[model]
        assert (row["Claims"], row["Re-scored"], row["Version"]) == ("permutation", "yes", "layersets 0.3.1"), row
        assert page.links[row["entry"]] == f"{CODE}/tree/{commit}"  # the recorded commit, whole
    assert " ".join(CLAIMS_NOTE.split()) in " ".join("".join(page.text).split())  # what Claims means, and is not
    inr = _Rows()
    inr.feed((tmp_path / "site" / "inr-classification.html").read_text())
    assert [(row["Model"], row["Claims"], row["Version"]) for row in inr.rows] == [("LayerSets-v1", "permutation",
                                                                                   "layersets 0.3.1")]


def test_a_false_claim_is_warned_about_and_refused(package, tiny_zoo, tmp_path):
    root, commit = package
    out = tmp_path / "false.json"
    done = _console(root, "bench", "run", "--task", "generalization", "--model", "layersets.model:Overclaiming",
                    "--data", str(tiny_zoo), "--seeds", "0,1,2", "--out", str(out), *EPOCHS)
    assert done.returncode == 0, done.stderr
    # every failing check counted, the worst named (scale on the ReLU and the tanh CNNs)
    assert re.search(r"WARNING: FALSE CLAIM: claims permutation, scale; \d+ failing checks, the worst 3: scale "
                     r"invariance on cnn-(relu|tanh) at .*; and \d+ more \(", done.stderr), done.stderr
    assert json.loads(out.read_text())["claims"]["verdict"] == "false claim"
    board = tmp_path / "board"
    board.mkdir()
    (board / "datasets.json").write_text(json.dumps({"datasets": []}))
    refused = _console(root, "leaderboard", "submit", str(out), "--root", str(board), "--dataset", str(tiny_zoo))
    assert refused.returncode == 1
    assert "model 'Overclaiming' makes a false symmetry claim" in refused.stderr
    assert not (board / "entries").exists()
    contradicted = _console(root, "leaderboard", "submit", str(out), "--root", str(board), "--dataset", str(tiny_zoo),
                            "--code", CODE, "--commit", "0" * 40)
    assert f"is not the commit the results recorded for the model's code ({commit})" in contradicted.stderr


@pytest.mark.parametrize("argv, message", [
    (["--model", "mlp", "--name", "my nfn"], "its board name 'my nfn' (--name) must be 1-64 ASCII letters"),
    (["--model", "layersets.model:LayerSets", "--name", "MLP"],
     "NFN model name 'MLP' looks like the built-in NFN model 'mlp'"),
])
def test_a_name_the_board_would_refuse_stops_the_run_before_any_data_is_read(package, tmp_path, capsys, argv, message):
    with on_path([package[0]], MODELS, TASKS):
        assert main(["bench", "run", "--task", "generalization", *argv, "--data", str(tmp_path / "no-zoo"),
                     "--out", str(tmp_path / "r.json")]) == 1
    assert message in capsys.readouterr().err
