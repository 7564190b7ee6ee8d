"""Hostile submissions: every one is either rejected with one-line reasons or accepted and rendered.

"An entry that renders is the test": each case below is a results file a careless or hostile
submitter could write (most of them valid JSON of the right shape). The property checked for
every case is the same: `submit` rejects it, each problem on one line, or accepts it and
`render` of the board then succeeds, with the Markdown table's columns intact.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys
import time

import pytest
from markdown_it import MarkdownIt

from benchmarks.results import summarize
from benchmarks.tasks.continual_learning import definition_hash
from leaderboards import SubmissionRejected, render, submit
from leaderboards.entries import load_entries

LONG = "x" * 20_000  # the schema's longest string: allowed in a config value, never in a name


def _set(path: str, value):
    """A mutation setting `path` ("a.b.0.c") of results data to `value`."""
    def mutate(data):
        *parents, last = path.split(".")
        target = data
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[int(last) if isinstance(target, list) else last] = value
    return mutate


def _both(*mutations):
    def mutate(data):
        for mutation in mutations:
            mutation(data)
    return mutate


def _inr(task_config: dict):
    def mutate(data):
        for seed in data["per_seed"]:
            seed["metrics"] = {"mse": 0.01}
        data.update(task="inr-editing", task_config=task_config,
                    summary=summarize([seed["metrics"] for seed in data["per_seed"]]))
    return mutate


# (name, mutation of valid results data, "reject" or "accept", text a rejection names)
CASES = [
    ("num_params 10**400", _set("num_params", 10**400), "reject", "num_params"),
    ("num_params 10**15", _set("num_params", 10**15), "reject", "num_params must be from 1 to"),
    ("a partial ranking block", _set("per_seed.0.ranking", {"kendall_tau_ceiling": 0.9}), "reject", "ranking"),
    ("a ranking ceiling above 1", _set("per_seed.0.ranking", {"kendall_tau_ceiling": 7.0, "distinct_targets": 3.0,
                                                              "tied_pair_fraction": 0.1, "num_targets": 9.0}),
     "reject", "kendall_tau_ceiling"),
    ("a bogus task_config", _set("task_config", {"subset": 5, "epochs": "many"}), "reject", "task_config"),
    ("an unknown task_config key", _set("task_config.bogus", 1), "reject", "task_config.bogus"),
    ("INR checkpoint_epochs as an int", _inr({"checkpoints": "epochs", "checkpoint_epochs": 3}), "reject",
     "checkpoint_epochs"),
    ("INR checkpoint_epochs as a list", _inr({"checkpoints": "epochs", "checkpoint_epochs": [3]}), "accept", ""),
    ("mathtext in a model config", _set("model_config.note", "$\\undefinedmacro{$"), "accept", ""),
    ("a long model config value", _set("model_config.note", LONG), "accept", ""),
    ("a pipe in the device", _set("hardware.device", "cuda | yes | x | y"), "accept", ""),
    ("markup in the version", _set("package_version", "<script>alert(1)</script>[x](javascript:alert(1))`$m$`"),
     "accept", ""),
    ("markup in a subset value", _set("task_config.subset", {"activation": "[x](javascript:alert(1))|$m$"}),
     "accept", ""),
    ("a newline in the device", _set("hardware.device", "cpu\n| 1 | fake |"), "reject", "hardware.device"),
    ("a long device", _set("hardware.device", "d" * 201), "reject", "hardware.device"),
    ("3,000,000 characters", _set("hardware.platform", "p" * 3_000_000), "reject", "hardware.platform"),
    ("a bidi override", _set("hardware.device", "cpu\u202egnp.exe"), "reject", "U+202E"),
    ("a zero-width space in a config", _set("model_config.note", "a\u200bb"), "reject", "U+200B"),
    ("a creation time that is no time", _set("created", "yesterday"), "reject", "created"),
    ("a dataset config that is a path", _set("dataset.config", "../x"), "reject", "dataset.config"),
    ("a largest 64-bit seed", _both(_set("seeds", [0, 1, 2**63 - 1]), _set("per_seed.2.seed", 2**63 - 1)),
     "accept", ""),
    ("a seed beyond 64 bits", _both(_set("seeds", [0, 1, 2**64]), _set("per_seed.2.seed", 2**64)), "reject",
     "64-bit"),
    ("negative memory", _set("per_seed.0.peak_memory_mb", -5.0), "reject", "peak_memory_mb"),
]


def _submit_and_render(root, write_results, make_data, tmp_path, mutate, name):
    """(problems, page): the rejection's problems, or the rendered page of the accepted entry."""
    data = make_data()
    mutate(data)
    path = write_results(data, name=f"{name}.json")
    try:
        submit(path, root)
    except SubmissionRejected as error:
        return error.problems, None
    if "note" in data["model_config"]:  # a second config of the same model: the first's note is in its label
        other = make_data(model_config={**data["model_config"], "note": "plain"}, seeds=(3, 4, 5))
        other.update(task=data["task"], task_config=data["task_config"], per_seed=copy.deepcopy(data["per_seed"]),
                     summary=data["summary"])
        for seed, entry in zip((3, 4, 5), other["per_seed"]):
            entry["seed"] = seed
        submit(write_results(other, name=f"{name}-other.json"), root)
    return [], render(root, tmp_path / "site")


@pytest.mark.parametrize("name, mutate, outcome, named", CASES, ids=[case[0] for case in CASES])
def test_a_hostile_submission_is_refused_in_one_line_or_renders(root, write_results, make_data, tmp_path,
                                                                name, mutate, outcome, named):
    problems, page = _submit_and_render(root, write_results, make_data, tmp_path, mutate, name.replace(" ", "-"))
    if outcome == "reject":
        assert page is None, f"{name} was accepted"
        assert problems and all("\n" not in p and len(p) < 2_000 for p in problems), problems
        assert any(named in p for p in problems), problems
        return
    assert page is not None, problems
    assert (tmp_path / "site" / "index.html").exists() and list((tmp_path / "site").glob("*.png"))
    html = MarkdownIt("commonmark").enable("table").render(page)  # the page as a Markdown viewer shows it
    assert "<script" not in html and 'href="javascript' not in html and "<a " not in html
    for table in html.split("<table>")[1:]:
        header = table.split("</thead>")[0].count("<th>")
        rows = table.split("<tbody>")[1].split("</tbody>")[0].split("</tr>")[:-1]
        assert rows and all(row.count("<td>") == header for row in rows)  # no cell shifted
    verified = [row for row in html.split("</tr>") if "<td>yes</td>" in row]
    assert not verified  # every entry here is unverified: no row may claim otherwise


def test_deep_json_and_an_overflowing_number_are_one_line(root, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 1_000 + "]" * 1_000)
    huge = tmp_path / "huge.json"
    huge.write_text('{"num_params": 1e999}')
    for path, reason in ((deep, "nested too deeply"), (huge, "overflows to infinity")):
        with pytest.raises(SubmissionRejected) as error:
            submit(path, root)
        (problem,) = error.value.problems
        assert reason in problem and "\n" not in problem


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.cli", "leaderboard", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_a_device_or_a_fifo_is_refused_at_once_not_read(root, tmp_path):
    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    for source in ("/dev/zero", str(fifo)):
        started = time.monotonic()
        done = _cli("submit", source, "--root", str(root), timeout=60)
        assert done.returncode == 1 and time.monotonic() - started < 30
        assert "not a regular file" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_predictions_fifo_is_refused_not_waited_on(root, write_results, make_data):
    data = make_data()
    data["predictions"] = "p.csv"
    path = write_results(data)
    os.mkfifo(path.parent / "p.csv")
    with pytest.raises(SubmissionRejected, match="not a regular file"):
        submit(path, root)


def test_render_into_an_existing_file_is_one_line_and_writes_nothing(root, tmp_path):
    target = tmp_path / "site"
    target.write_text("mine")
    done = _cli("render", "--root", str(root), "--out", str(target))
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "is a file" in done.stderr, done.stderr
    assert target.read_text() == "mine"


def test_a_failed_render_leaves_the_previous_site_whole(root, write_results, tmp_path):
    submit(write_results(), root)
    out = tmp_path / "site"
    render(root, out)
    submit(write_results(model="mlp"), root)  # the next render changes every page
    (out / "index.html").unlink()
    (out / "index.html").mkdir()  # and cannot write the last file
    before = {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()}
    done = _cli("render", "--root", str(root), "--out", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()} == before
    assert not [p for p in tmp_path.iterdir() if ".rendering-" in p.name]  # no temporary folder left


def _track_data(make_data, tasks: int, definition_extra: dict | None = None) -> dict:
    definition = {"benchmark": {"source": "mnist", "tasks": tasks, "train_per_class": 1, "test_per_class": 1},
                  **(definition_extra or {})}
    data = make_data(dataset_hash=definition_hash(definition))
    for seed in data["per_seed"]:
        seed["metrics"] = {"final_average_accuracy": 0.5}
        seed.pop("selection")
    data.update(task="continual-learning", model="finetune", model_config={},
                task_config={"track": "norga", "profile": "default", "benchmark": definition["benchmark"],
                             "definition": definition},
                summary=summarize([seed["metrics"] for seed in data["per_seed"]]))
    data["dataset"].update(family="track", config="norga-default", path="track:norga/default")
    return data


def test_a_track_declaring_ten_thousand_tasks_is_refused_before_its_cells_are_built(root, write_results,
                                                                                      make_data):
    started = time.monotonic()
    with pytest.raises(SubmissionRejected) as error:
        submit(write_results(_track_data(make_data, 10_000)), root)
    assert any("benchmark.tasks must be from 1 to 1,000, got 10,000" in p for p in error.value.problems)
    assert time.monotonic() - started < 10


def test_a_track_declaring_more_cells_than_its_predictions_hold_is_refused(root, write_results, make_data):
    data = _track_data(make_data, 900)
    data["predictions"] = "p.csv"
    path = write_results(data)
    (path.parent / "p.csv").write_text("seed,model_id,prediction\n0,task0@stage0,0.5\n")
    with pytest.raises(SubmissionRejected) as error:
        submit(path, root)
    assert any("declares 405,450 predicted cells per seed, but the predictions file holds only 1" in p
               for p in error.value.problems), error.value.problems


def test_an_unverified_track_entry_with_a_small_definition_is_accepted_and_renders(root, write_results, make_data,
                                                                                    tmp_path):
    accepted = submit(write_results(_track_data(make_data, 3)), root)
    assert not accepted.verified
    assert "# Leaderboard: continual-learning" in render(root, tmp_path / "site")


def test_the_render_check_refuses_an_entry_the_views_cannot_show(root, write_results, make_data):
    """The guard itself, on an entry built past validation: its task config breaks the protocol line."""
    from leaderboards.render_check import render_problems

    submit(write_results(), root)
    (_, entry), = load_entries(root)
    broken = dataclasses.replace(entry, results=dataclasses.replace(entry.results, task_config={"subset": 5}))
    (problem,) = render_problems(root, broken, None)
    assert "the board cannot show this entry" in problem and "\n" not in problem
    assert render_problems(root, entry, None) == []



def test_a_hostile_model_id_in_the_predictions_is_named_on_one_line(root, write_results, make_data):
    """A track pins its cells from its definition, so its predictions are re-scored on any board."""
    data = _track_data(make_data, 2)
    data["predictions"] = "p.csv"
    path = write_results(data)
    cells = "".join(f"{seed},task{i}@stage{t},0.5\n" for seed in (0, 1, 2) for t in (0, 1) for i in range(t + 1))
    (path.parent / "p.csv").write_text('seed,model_id,prediction\n0,"a\nb\u202e",0.5\n' + cells)
    with pytest.raises(SubmissionRejected) as error:
        submit(path, root)
    problems = error.value.problems
    assert any("not test rows 1" in p for p in problems), problems
    assert all("\n" not in p and "\u202e" not in p for p in problems), problems
