"""One name rule at every entry point of a model's name (`zoo.validation.names.builtin_problem`): a name that
looks like a built-in's (`StatNN`, `stat_nn`, `stat-nn`, `rnlp`, `MLP` beside `statnn` and `mlp`) is refused
with the same one line, exit 1, by plugin registration (an entry point, or a class handed to the API), by
`--name` on `bench run` and `bench suite` (before any data is read) and by `leaderboard submit`; a genuinely
different name passes each of them, and a plugin registered again under its own name still works."""

from __future__ import annotations

import pytest

from benchmarks.api import register
from benchmarks.tasks.registry import TASKS
from nfn_models.registry import MODELS
from plugin_site import add_metadata, example_site, on_path
from zoo.cli import main
from zoo.registry import PluginError
from zoo.validation.names import builtin_problem

SPELLINGS = ["StatNN", "stat_nn", "stat-nn", "rnlp", "MLP"]  # beside the built-ins statnn and mlp
CONTROL = "my-moments"  # a genuinely different name
MOMENTS = "my_nfn.model:TensorMoments"  # the example package's model, by import path


def _message(name: str) -> str:
    return builtin_problem(MODELS.kind, name, MODELS.builtin_names())


@pytest.fixture
def site(tmp_path):
    """The example package, and a package declaring an nfnzoo.models entry point under each spelling."""
    add_metadata(tmp_path / "alike", "alike-plugins", {"nfnzoo.models": {
        name: MOMENTS for name in [*SPELLINGS, CONTROL]}})
    with on_path([*example_site(tmp_path / "site"), tmp_path / "alike"], MODELS, TASKS):
        yield tmp_path


def _bench(tmp_path, *argv: str) -> list[str]:
    return ["bench", "run", "--task", "generalization", *argv, "--data", str(tmp_path / "no-zoo"), "--out",
            str(tmp_path / "r.json")]


PLACES = {  # where a name enters, as the CLI's argv for the name
    "entry point": lambda tmp_path, name: _bench(tmp_path, "--model", name),
    "bench run --name (a plugin)": lambda tmp_path, name: _bench(tmp_path, "--model", MOMENTS, "--name", name),
    "bench run --name (a built-in)": lambda tmp_path, name: _bench(tmp_path, "--model", "statnn", "--name", name),
    "bench suite --name": lambda tmp_path, name: ["bench", "suite", "standard-v1", "--model", MOMENTS, "--name", name,
                                                  "--out", str(tmp_path / "suite")],
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", SPELLINGS)
def test_bench_refuses_a_look_alike_in_one_line_before_any_data_is_read(site, capsys, place, name):
    assert main(PLACES[place](site, name)) == 1
    assert capsys.readouterr().err == f"nfnzoo bench: error: {_message(name)}\n"
    assert not (site / "r.json").exists() and not (site / "suite").exists()


@pytest.mark.parametrize("place", PLACES)
def test_bench_takes_a_genuinely_different_name(site, capsys, place):
    assert main(PLACES[place](site, CONTROL)) == 1  # on to the data, which is not there: the name passed
    error = capsys.readouterr().err
    assert "looks like" not in error and ("no-zoo" in error or "no published copy" in error), error


@pytest.mark.parametrize("name", SPELLINGS)
def test_a_class_handed_to_the_api_under_a_look_alike_is_refused(name):
    class Moments(MODELS.get("statnn")):  # benchmarks.evaluate(Moments, name=...) registers it so
        pass

    with pytest.raises(PluginError) as error:
        register(Moments, name=name)
    assert str(error.value) == _message(name)
    assert name not in MODELS


def test_a_plugin_registered_again_under_its_own_name_still_works():
    class Mine(MODELS.get("mlp")):
        pass

    class MineEdited(MODELS.get("mlp")):  # the notebook cell run again, edited
        pass

    saved = dict(MODELS._items), set(MODELS._plugins)
    try:
        assert register(Mine, name=CONTROL) == CONTROL
        assert register(Mine, name=CONTROL) == CONTROL and register(MineEdited, name=CONTROL) == CONTROL
        assert MODELS.get(CONTROL) is MineEdited
    finally:
        MODELS._items.clear()
        MODELS._items.update(saved[0])
        MODELS._plugins.clear()
        MODELS._plugins.update(saved[1])


@pytest.mark.parametrize("name", [*SPELLINGS, CONTROL, "statnn"])
def test_submit_refuses_a_look_alike_in_one_line(root, write_results, make_data, board_cli, name):
    path = write_results(make_data(model=name))
    done = board_cli("leaderboard", "submit", str(path), "--root", str(root))
    if name in (CONTROL, "statnn"):  # a different name, and the built-in's own: the negative controls
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 1 and done.stderr == f"nfnzoo leaderboard: error: {path} was rejected: {_message(name)}\n"
    assert not (root / "entries").exists()
