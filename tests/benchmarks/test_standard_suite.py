"""The versioned standard suite: v1's cells are pinned, it runs any model on stand-in zoos, the run
says which cells are stand-ins (other hashes, not ranked), and `leaderboard submit` takes its folder whole."""

import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks.standard import STANDARD_SUITES
from zoo.cli import main

# standard-v1 as released: changing any of this makes standard-v2, never a new v1
V1_CELLS = [
    ("cnn-generalization-relu", "generalization", "cnn-mnist-bench", "6e211693486a", (0, 1, 2),
     {"checkpoints": "final", "loss": "bce", "batch_size": 8, "epochs": 10, "lr": 1e-3, "weight_decay": 0.0,
      "subset": {"activation": "relu"}}),
    ("cnn-generalization-tanh", "generalization", "cnn-mnist-bench", "6e211693486a", (0, 1, 2),
     {"checkpoints": "final", "loss": "bce", "batch_size": 8, "epochs": 10, "lr": 1e-3, "weight_decay": 0.0,
      "subset": {"activation": "tanh"}}),
    ("inr-classification", "inr-classification", "inr-mnist-fast-fifth", "027bb41fb1d5", (0, 1, 2),
     {"preset": "budget"}),
    ("inr-editing", "inr-editing", "inr-mnist-fast-fifth", "027bb41fb1d5", (0, 1, 2), {"preset": "budget"}),
    ("transformer-generalization", "generalization", "transformer-mnist-bench", "e6f11d37eb40", (0, 1, 2),
     {"preset": "transformer-nfn", "epochs": 10, "warmup_epochs": 1, "threshold": 0.0}),
]


def test_standard_v1_cells_are_pinned_to_the_boards_datasets():
    suite = STANDARD_SUITES.get("standard-v1")()
    assert [(c.name, c.task, c.zoo.name, c.zoo.dataset_hash[:12], c.seeds, dict(c.task_overrides))
            for c in suite.cells] == V1_CELLS
    board = {d["name"]: d for d in json.loads(Path("leaderboards/datasets.json").read_text())["datasets"]}
    for cell in suite.cells:  # each cell's zoo is one the official board pins, with its config and hash
        assert (board[cell.zoo.name]["dataset_hash"], board[cell.zoo.name]["config"]) == \
            (cell.zoo.dataset_hash, cell.zoo.config)


# standard-v2 as released: its zoos made in the portable mode, each model at its budget preset for the cell
PAPERS = {"checkpoints": "final", "loss": "bce", "batch_size": 8, "epochs": 10, "lr": 1e-3, "weight_decay": 0.0}
V2_CELLS = [
    ("cnn-generalization-relu", "generalization", "cnn-mnist-suite-v2", "391f00067b9d", (0, 1, 2),
     {**PAPERS, "subset": {"activation": "relu"}}, ("generalization-budget",), "scale"),
    ("cnn-generalization-tanh", "generalization", "cnn-mnist-suite-v2", "391f00067b9d", (0, 1, 2),
     {**PAPERS, "subset": {"activation": "tanh"}}, ("generalization-budget",), "sign"),
    ("inr-classification", "inr-classification", "inr-mnist-suite-v2", "c788c0c6da81", (0, 1, 2),
     {"preset": "budget", "epochs": 10, "warmup_steps": 300}, ("inr-classification-budget",), None),
    ("transformer-generalization", "generalization", "transformer-mnist-suite-v2", "699952649d5b", (0, 1, 2),
     {"preset": "transformer-nfn", "epochs": 40, "warmup_epochs": 4, "threshold": 0.0, "eval_batch_size": 64},
     ("transformer-generalization-budget", "generalization-budget"), None),
]


def test_standard_v2_cells_are_pinned_to_the_boards_portable_zoos():
    suite = STANDARD_SUITES.get("standard-v2")()
    assert [(c.name, c.task, c.zoo.name, c.zoo.dataset_hash[:12], c.seeds, dict(c.task_overrides), c.model_presets,
             c.group) for c in suite.cells] == V2_CELLS
    board = {d["name"]: d for d in json.loads(Path("leaderboards/datasets.json").read_text())["datasets"]}
    for cell in suite.cells:  # registered on the official board, with the recipe a newcomer regenerates
        assert (board[cell.zoo.name]["dataset_hash"], board[cell.zoo.name]["config"]) == \
            (cell.zoo.dataset_hash, cell.zoo.config)
        expected = f"regenerated from spec {cell.zoo.config} (suite-v2)"
        assert board[cell.zoo.name]["source"] == cell.zoo.source == expected
        assert Path("leaderboards", board[cell.zoo.name]["test_metadata"]).exists()


def test_standard_v3_is_v2_with_its_inr_cell_on_five_times_the_sirens():
    """Only the INR cell's zoo changes (suite-v3: every 2nd image, 22,500 training SIRENs); the other cells are
    v2's own, so a model's v2 runs of them count for v3 too."""
    v2, v3 = (STANDARD_SUITES.get(name)() for name in ("standard-v2", "standard-v3"))
    assert [cell.name for cell in v3.cells] == [cell.name for cell in v2.cells]
    for old, new in zip(v2.cells, v3.cells):
        if new.name != "inr-classification":
            assert new == old
            continue
        assert (new.zoo.name, new.zoo.dataset_hash[:12], new.zoo.profile) == ("inr-mnist-suite-v3", "64c9831e53c3",
                                                                               "suite-v3")
        assert dataclasses.replace(new, zoo=old.zoo) == old  # the same task, protocol, seeds and presets
    board = {d["name"]: d for d in json.loads(Path("leaderboards/datasets.json").read_text())["datasets"]}
    record = board["inr-mnist-suite-v3"]
    assert (record["dataset_hash"], record["source"]) == (v3.cells[2].zoo.dataset_hash,
                                                          "regenerated from spec inr-mnist (suite-v3)")


@pytest.mark.parametrize("zoo", sorted({cell.zoo for name in ("standard-v1", "standard-v2", "standard-v3")
                                        for cell in STANDARD_SUITES.get(name)().cells},
                                       key=lambda zoo: zoo.name), ids=lambda zoo: zoo.name)
def test_each_zoos_recipe_plans_the_pinned_zoos_runs(zoo):
    """The command a cell's error prints to make a stand-in trains the runs of the pinned zoo (its pinned test
    split's runs are among the plan's), not today's bundled spec if that has moved on (cnn-mnist has)."""
    import pandas

    from zoo.planning.plan import plan_runs
    from zoo.planning.spec import load_spec
    from zoo.planning.spec_files import resolve_spec_path

    _, spec, _, profile = zoo.generate_command.split()[1:]
    planned = {run.run_id for run in plan_runs(load_spec(resolve_spec_path(spec), profile))}
    pinned = set(pandas.read_parquet(f"leaderboards/pinned/{zoo.dataset_hash[:12]}.test.parquet", columns=["run_id"])
                 ["run_id"])
    assert pinned and pinned <= planned
    if zoo.name == "cnn-mnist-bench":  # negative control: the bundled spec now plans the released architecture
        today = {run.run_id for run in plan_runs(load_spec(resolve_spec_path("cnn-mnist"), profile))}
        assert not pinned & today


def test_standard_v1_on_stand_ins_writes_one_folder_that_submit_takes_whole(tiny_zoo, tiny_inr_zoo_folder,
                                                                             tiny_transformer_zoo, tmp_path, capsys):
    out = tmp_path / "std"
    argv = ["bench", "suite", "standard-v1", "--model", "mlp", "--out", str(out), "--device", "cpu",
            "--data", f"cnn-mnist-bench={tiny_zoo}", "--data", f"inr-mnist-fast-fifth={tiny_inr_zoo_folder}",
            "--data", f"transformer-mnist-bench={tiny_transformer_zoo}"]
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    manifest = json.loads((out / "suite.json").read_text())
    assert (manifest["suite"], manifest["model"], manifest["stand_in"]) == ("standard-v1", "mlp", True)
    assert [c["cell"] for c in manifest["cells"]] == [name for name, *_ in V1_CELLS]
    ran = [c for c in manifest["cells"] if c["status"] == "ran"]
    skipped = [c for c in manifest["cells"] if c["status"] == "skipped"]
    # the tiny CNN zoo's 6 nets leave a split of one activation empty: a recorded skip, the others go on
    assert {c["cell"] for c in ran} >= {"inr-classification", "inr-editing", "transformer-generalization"}
    assert all(c["cell"].startswith("cnn-") and c["reason"] for c in skipped), skipped
    for cell in ran:  # the tiny zoos are not the pinned bytes: recorded, shown, never ranked
        assert (cell["stand_in"], cell["hash_matches"], cell["ranked"]) == (True, False, False)
        assert (out / cell["results"]).exists()
    assert "0 of" in printed and "stand-ins (other bytes than the pinned ones, not ranked)" in printed
    assert (out / "table.md").read_text() in printed

    assert main(argv) == 0  # resumes: every cell is already there
    assert "standard-v1" in capsys.readouterr().out

    board = tmp_path / "board"
    assert main(["leaderboard", "submit", str(out), "--root", str(board)]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert printed.count("accepted ") == len(ran)  # the tiny zoos are another recipe: in no suite table
    assert printed.count(": in none of its tables") == len(ran) and "ranked in" not in printed
    assert len(list((board / "entries").rglob("*.json"))) == len(ran)
    assert main(["leaderboard", "submit", str(out), "--root", str(board)]) == 0  # again: nothing is added twice
    assert capsys.readouterr().out.count("already on the board") == len(ran)
    _the_board_shows_the_suite_with_pinned_hashes_only(board, STANDARD_SUITES.get("standard-v1")())


def _the_board_shows_the_suite_with_pinned_hashes_only(board: Path, suite) -> None:
    """The stand-in entries are in no ranked table: they get their own, headed by the bytes they read; the
    same runs on the pinned bytes are ranked, one row per model with each cell's metric, its rank and the
    mean rank (MSE ranks lower as better)."""
    from leaderboards.entries import load_entries
    from leaderboards.renderer import render
    from leaderboards.suite_board import suite_boards, suite_markdown

    entries = [entry for _, entry in load_entries(board)]
    assert suite_boards(entries) == []  # the tiny zoos hold other runs than the pinned zoos: no stand-ins
    render(board, board / "site")
    # the tiny zoos are another recipe (profile tiny) than the pinned zoos': no stand-ins, though this board
    # cannot compare test splits (an unchecked stand-in of the pinned recipe: test_board_presentation.py)
    assert not (board / "site" / "suites.md").exists()
    every_zoo_a_stand_in = lambda digest, pinned: True  # noqa: E731  (as if each held the pinned zoo's runs)
    (stand_in,) = suite_boards(entries, every_zoo_a_stand_in)
    assert stand_in.stand_in and [row.model for row in stand_in.rows] == ["mlp"]
    ran = {entry.results.dataset.config: entry.results.dataset.dataset_hash for entry in entries}
    assert all(h is None or (h == ran[cell.zoo.config] and h != cell.zoo.dataset_hash)
               for cell, h in zip(stand_in.cells, stand_in.hashes))
    page = suite_markdown([stand_in])
    assert "## standard-v1 on stand-in zoos (" in page and "not ranked against the suite's table" in page
    assert f"pinned {suite.cells[-1].zoo.dataset_hash[:12]}" in page and "dataset 6e211693486a)" not in page

    def pinned(entry, model: str, shift: float):  # the same run, as if on the pinned bytes
        results = entry.results
        zoo = next(cell.zoo for cell in suite.cells if cell.zoo.config == results.dataset.config)
        dataset = dataclasses.replace(results.dataset, dataset_hash=zoo.dataset_hash)
        summary = {k: dataclasses.replace(v, mean=v.mean + shift) for k, v in results.summary.items()}
        return dataclasses.replace(entry, results=dataclasses.replace(results, model=model, dataset=dataset,
                                                                      summary=summary))

    faked = [pinned(entry, model, shift) for entry in entries for model, shift in (("mlp", 0.0), ("np", 0.1))]
    shown, again = suite_boards(faked + entries, every_zoo_a_stand_in)  # the pinned table first, stand-ins apart
    assert (shown.stand_in, again.stand_in, [row.model for row in again.rows]) == (False, True, ["mlp"])
    from leaderboards.docs_pages import suite_region  # the docs' `<!-- nfnzoo:suite name=... -->` region

    region = suite_region([shown, again], "standard-v1", "page.md:1")
    assert "\n### standard-v1\n" in region and "\n### standard-v1 on stand-in zoos (" in region
    assert region.index("### standard-v1\n") < region.index("on stand-in zoos") and region.count("| np |") == 1
    assert "No run of standard-v1 is on the board yet." in suite_region([], "standard-v1", "page.md:1")
    with pytest.raises(ValueError, match="page.md:1: name='standard-v9' is no standard suite"):
        suite_region([], "standard-v9", "page.md:1")
    by_model = {row.model: row for row in shown.rows}
    assert set(by_model) == {"mlp", "np"}
    columns = [cell.name for cell in shown.cells]
    for name, metric in zip(columns, shown.metrics):
        if by_model["np"].values[columns.index(name)] is None:
            continue
        better = "mlp" if metric == "mse" else "np"  # np's every metric is 0.1 higher
        assert by_model[better].ranks[columns.index(name)] == 1, (name, by_model)
    assert by_model["mlp"].mean_rank + by_model["np"].mean_rank == 3.0  # ranks 1 and 2 in every cell
    page = suite_markdown([shown])
    assert "## standard-v1" in page and "| Mean rank |" in page and page.count("\n| mlp |") == 1
    from leaderboards.site import index_page, suites_page

    html = suites_page([shown])  # the HTML site's page: the same rows, sortable like the task pages
    assert '<table class="entries" id="table-suite-standard-v1">' in html and html.count("<tr><td>mlp</td>") == 1
    assert html.count("<tr><td>") == 2 and f"{by_model['mlp'].mean_rank:.2f}</td></tr>" in html
    assert 'href="suites.html"' in index_page([], "empty", [shown]) and "suites.html" not in index_page([], "empty")

    # other bytes for the same zoos make another stand-in table; a newer run on the same bytes replaces the older
    def rerun(entry, model: str, digest: str | None, accepted: str, shift: float):
        results = entry.results
        dataset = dataclasses.replace(results.dataset, dataset_hash=digest or results.dataset.dataset_hash)
        summary = {k: dataclasses.replace(v, mean=v.mean + shift) for k, v in results.summary.items()}
        return dataclasses.replace(entry, submission=dataclasses.replace(entry.submission, accepted=accepted),
                                   results=dataclasses.replace(results, model=model, dataset=dataset, summary=summary))

    other = [rerun(entry, "np", "f" * 64, "2099-01-01T00:00:00+00:00", 0.0) for entry in entries]
    newer = [rerun(entry, "mlp", None, "2099-01-02T00:00:00+00:00", 0.5) for entry in entries]
    first, second = suite_boards(entries + other + newer, every_zoo_a_stand_in)
    assert [row.model for row in first.rows] == ["mlp"] and [row.model for row in second.rows] == ["np"]
    assert {h for h in second.hashes if h} == {"f" * 64} and "f" * 64 not in first.hashes
    column = next(i for i, value in enumerate(first.rows[0].values) if value is not None)
    cell = first.cells[column]
    old = next(e for e in entries if e.results.task == cell.task and e.results.dataset.config == cell.zoo.config
               and e.results.task_config.get("subset") == cell.task_overrides.get("subset"))
    metric = first.metrics[column]
    assert first.rows[0].values[column] == old.results.summary[metric].mean + 0.5


def test_only_runs_the_chosen_cells_and_a_later_run_fills_in_the_rest(tiny_inr_zoo_folder, tiny_transformer_zoo,
                                                                      tmp_path, capsys):
    out = tmp_path / "std"
    common = ["bench", "suite", "standard-v1", "--model", "mlp", "--out", str(out), "--device", "cpu"]
    assert main([*common, "--only", "inr-classification",
                 "--data", f"inr-mnist-fast-fifth={tiny_inr_zoo_folder}"]) == 0, capsys.readouterr().err
    cells = {c["cell"]: c for c in json.loads((out / "suite.json").read_text())["cells"]}
    assert cells["inr-classification"]["status"] == "ran"
    assert all((c["status"], c["reason"]) == ("skipped", "not run") for name, c in cells.items()
               if name != "inr-classification")
    assert not (out / "inr-editing.json").exists() and not list(out.glob("*.skipped"))
    first = (out / "inr-classification.json").read_bytes()

    # the transformer zoo is ready later: its cell runs, the finished one is kept with the zoo it read
    assert main([*common, "--only", "transformer-generalization",
                 "--data", f"transformer-mnist-bench={tiny_transformer_zoo}"]) == 0, capsys.readouterr().err
    cells = {c["cell"]: c for c in json.loads((out / "suite.json").read_text())["cells"]}
    assert [name for name, c in cells.items() if c["status"] == "ran"] == ["inr-classification",
                                                                            "transformer-generalization"]
    assert cells["inr-classification"]["data"] == str(tiny_inr_zoo_folder)
    assert (out / "inr-classification.json").read_bytes() == first
    assert cells["inr-editing"]["reason"] == "not run"


@pytest.mark.parametrize("extra, message", [
    ([], "--data ZOO=FOLDER"),  # no published copy to fetch: a stand-in per zoo is needed
    (["--only", "cnn-generalization-relu"], "To make one: cnn-mnist-bench: nfnzoo generate "),
    (["--data", "nope=/x"], "ZOO one of cnn-mnist-bench, inr-mnist-fast-fifth"),
    (["--seeds", "0"], "leave out --seeds"),
    (["--set", "task.epochs=1"], "leave out --set"),
    (["--only", "inr-editing,nope"], "standard-v1 has no cell 'nope'; its cells: cnn-generalization-relu"),
    (["--only", "inr-editing"], "no published copy of inr-mnist-fast-fifth"),  # only the chosen cells' zoos
])
def test_standard_suite_user_errors_exit_1_before_anything_runs(tmp_path, capsys, extra, message):
    assert main(["bench", "suite", "standard-v1", "--model", "mlp", "--out", str(tmp_path / "s"), *extra]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_a_classic_suite_refuses_model_and_a_standard_one_needs_it(tiny_zoo, tmp_path, capsys):
    assert main(["bench", "suite", "cnn-generalization", "--model", "mlp", "--data", str(tiny_zoo),
                 "--out", str(tmp_path / "s")]) == 1
    assert "--model and --name go with a standard suite" in capsys.readouterr().err
    assert main(["bench", "suite", "standard-v1", "--out", str(tmp_path / "s")]) == 1
    assert "give --model MODEL" in capsys.readouterr().err


@pytest.mark.parametrize("manifest, message", [
    ("[" * 1000 + "]" * 1000, "not a standard suite's folder"),
    (json.dumps({"cells": ["x"]}), "each cell as a record"),
    (json.dumps({"cells": [{"cell": "a", "status": "ran", "results": "../../etc/x.json"}]}), "file name in the folder"),
    (json.dumps({"cells": [{"cell": "a", "status": "ran", "results": "gone.json"}]}), "1 of 1 cells rejected"),
])
def test_a_damaged_suite_folder_is_one_line_and_adds_nothing(tmp_path, capsys, manifest, message):
    folder = tmp_path / "std"
    folder.mkdir()
    (folder / "suite.json").write_text(manifest)
    assert main(["leaderboard", "submit", str(folder), "--root", str(tmp_path / "board")]) == 1
    assert message in capsys.readouterr().err
    assert not list((tmp_path / "board").rglob("*.json"))


def test_an_outside_packages_model_runs_standard_v1_by_its_entry_point(tiny_zoo, tiny_inr_zoo_folder,
                                                                       tiny_transformer_zoo, tmp_path, capsys):
    """examples/my_nfn's model (an invariant head on feedforward weight spaces): the cells it cannot serve
    (editing needs a weight-space output, the transformer cell another weight space) are recorded skips."""
    from benchmarks.tasks.registry import TASKS
    from nfn_models.registry import MODELS
    from plugin_site import example_site, on_path

    out = tmp_path / "std"
    with on_path(example_site(tmp_path / "site"), MODELS, TASKS):
        assert main(["bench", "suite", "standard-v1", "--model", "tensor_moments", "--out", str(out), "--device",
                     "cpu", "--data", f"cnn-mnist-bench={tiny_zoo}", "--data",
                     f"inr-mnist-fast-fifth={tiny_inr_zoo_folder}", "--data",
                     f"transformer-mnist-bench={tiny_transformer_zoo}"]) == 0, capsys.readouterr().err
    cells = {c["cell"]: c for c in json.loads((out / "suite.json").read_text())["cells"]}
    assert cells["inr-classification"]["status"] == "ran"
    assert cells["inr-editing"]["status"] == cells["transformer-generalization"]["status"] == "skipped"
    assert "weight-space output" in cells["inr-editing"]["reason"]
    assert "reads feedforward weight spaces" in cells["transformer-generalization"]["reason"]


def test_a_stand_in_is_a_zoo_that_holds_the_pinned_zoos_runs(tmp_path):
    """`leaderboards.pinned.same_runs`: the same model_ids in the pinned test splits (a regenerated zoo), not
    merely the same config (another profile of the spec holds other runs)."""
    import io

    import pandas
    import pyarrow as pa
    import pyarrow.parquet as pq

    from leaderboards.datasets import KnownDataset, register_dataset
    from leaderboards.pinned import same_runs, with_pins, write_pinned

    def register(digit: str, model_ids: list[str] | None) -> str:
        record = KnownDataset(name=f"zoo-{digit}", config="cnn-mnist", dataset_hash=digit * 64, family="cnn",
                              source=f"regenerated from spec cnn-mnist (zoo-{digit})")
        if model_ids is not None:
            buffer = io.BytesIO()
            pq.write_table(pa.Table.from_pandas(pandas.DataFrame({"model_id": model_ids, "test_accuracy": 0.5})),
                           buffer)
            pins = {"default": buffer.getvalue()}
            record = with_pins(record, pins)
            write_pinned(tmp_path, record, pins)
        register_dataset(tmp_path, record)
        return record.dataset_hash

    pinned, regenerated = register("a", ["m1", "m2", "m3"]), register("b", ["m3", "m1", "m2"])
    other_profile, unpinned = register("c", ["m1", "m2"]), register("d", None)
    same = same_runs(tmp_path)
    assert same(regenerated, pinned) and same(pinned, pinned)
    assert not same(other_profile, pinned) and not same(unpinned, pinned) and not same("e" * 64, pinned)


def test_an_interrupted_run_leaves_a_folder_that_submit_takes(tiny_inr_zoo_folder, tmp_path, monkeypatch, capsys):
    import benchmarks.harness

    real, calls = benchmarks.harness.run_benchmark, []

    def killed_on_the_second_cell(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 2:
            raise RuntimeError("the machine went away")
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmarks.harness, "run_benchmark", killed_on_the_second_cell)
    out = tmp_path / "std"
    with pytest.raises(RuntimeError, match="went away"):
        main(["bench", "suite", "standard-v1", "--model", "mlp", "--out", str(out), "--device", "cpu",
              "--only", "inr-classification,inr-editing", "--data", f"inr-mnist-fast-fifth={tiny_inr_zoo_folder}"])
    cells = {c["cell"]: c["status"] for c in json.loads((out / "suite.json").read_text())["cells"]}
    assert calls == ["inr-classification", "inr-editing"] and cells["inr-classification"] == "ran"
    assert cells["inr-editing"] == "skipped" and not (out / "inr-editing.skipped").exists()  # not run, not refused
    assert main(["leaderboard", "submit", str(out), "--root", str(tmp_path / "board")]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.count("accepted ") == 1


def test_a_cells_model_presets_and_group_reach_each_model_as_it_can_take_them():
    """standard-v2's cells name presets in order of preference and the members' group: each model gets its
    first preset of the list and the group on its own group field; a model with neither runs its defaults."""
    from benchmarks.standard import CNN_MNIST_BENCH, Cell, cell_model_overrides

    cell = Cell("x", "generalization", CNN_MNIST_BENCH, {}, (0, 1, 2), "label",
                model_presets=("generalization-budget", "generalization"), group="sign")
    assert cell_model_overrides(cell, "ng_gnn")["preset"] == "generalization-budget"
    assert cell_model_overrides(cell, "monomial_nfn") == {"preset": "generalization", "group": "sign"}
    assert cell_model_overrides(cell, "scalegmn") == {"preset": "generalization-budget", "mode": "sign"}
    assert cell_model_overrides(cell, "xgboost") == {"preset": "generalization"}  # no group field
    plain = Cell("y", "generalization", CNN_MNIST_BENCH, {}, (0, 1, 2), "label")
    assert cell_model_overrides(plain, "monomial_nfn") == {}  # standard-v1's cells: the defaults


def test_standard_v2s_zoos_are_made_in_the_portable_mode():
    """The point of standard-v2's zoos: any x86-64-v3 machine regenerates the pinned bytes, so each recipe
    is portable (its profile says so) and names the bundled spec and profile it is generated from."""
    from benchmarks import standard
    from zoo.planning.spec import load_spec

    refs = [standard.CNN_MNIST_SUITE_V2, standard.INR_MNIST_SUITE_V2, standard.TRANSFORMER_MNIST_SUITE_V2]
    for ref in refs:
        spec = load_spec(ref.spec, ref.profile)
        assert spec.training.reproducibility == "portable" and spec.name == ref.config, ref
        assert ref.generate_command == f"nfnzoo generate {ref.spec} --profile suite-v2"
    assert load_spec("cnn-mnist", "bench").training.reproducibility == "native"  # the other profiles as they were


def test_a_v2_cells_run_has_the_model_fields_its_presets_and_group_fix():
    """standard-v2's cells fix a model's preset and group, so a run at another preset or group is not a run
    of the cell (in the board's suite table); an outside model the board cannot import is taken as recorded."""
    from dataclasses import asdict

    from benchmarks.standard import cell_model_fields
    from leaderboards.suite_board import _model_fields_match
    from nfn_models import model_config

    relu, tanh, inr, _ = STANDARD_SUITES.get("standard-v2")().cells
    assert cell_model_fields(tanh, "monomial_nfn") == {"group": "sign"}
    assert cell_model_fields(inr, "np")["io_encoding"] is True  # the preset's own values
    at_cell = asdict(model_config("monomial_nfn", group="sign"))
    assert _model_fields_match("monomial_nfn", at_cell, tanh)
    assert not _model_fields_match("monomial_nfn", at_cell, relu)  # negative control: the other group
    budget = asdict(model_config("ng_gnn", preset="generalization-budget"))
    assert _model_fields_match("ng_gnn", budget, relu)
    assert not _model_fields_match("ng_gnn", asdict(model_config("ng_gnn")), relu)  # the paper's width
    assert _model_fields_match("outside_model", {}, relu)
    v1 = STANDARD_SUITES.get("standard-v1")().cells[0]
    assert _model_fields_match("ng_gnn", asdict(model_config("ng_gnn")), v1)  # v1 fixes no model field


# What standard-v2's official table holds (issue 50): every model of standard-v1 and the trees, in each cell
# whose weight space it reads, three seeds each; NG-T on INR classification (about 33 min a seed projected,
# over the suite's 30) is not run, and the results page lists it.
V2_MODELS = {
    "cnn-generalization-relu": {"mlp", "statnn", "np", "hnp", "monomial_nfn", "magep_nfn", "dwsnet", "probegen",
                                "scalegmn", "ng_gnn", "ng_t", "xgboost", "lightgbm", "random_forest"},
    "inr-classification": {"mlp", "statnn", "np", "hnp", "monomial_nfn", "magep_nfn", "dwsnet", "probegen",
                           "scalegmn", "ng_gnn"},
    "transformer-generalization": {"mlp", "statnn", "transformer_nfn", "scalegmn", "ng_gnn", "xgboost", "lightgbm",
                                   "random_forest"},
}
V2_MODELS["cnn-generalization-tanh"] = V2_MODELS["cnn-generalization-relu"]


def test_standard_v2s_ranked_table_on_the_official_board_has_every_model_in_every_cell_it_reads():
    from leaderboards.suite_board import board_suite_boards

    ranked = [board for board in board_suite_boards(Path("leaderboards"))
              if board.suite == "standard-v2" and not board.stand_in]
    assert len(ranked) == 1, [(board.suite, board.stand_in) for board in ranked]
    board = ranked[0]
    assert sorted(cell.name for cell in board.cells) == sorted(V2_MODELS)
    for column, cell in enumerate(board.cells):
        ran = {row.model for row in board.rows if row.values[column] is not None}
        assert ran == V2_MODELS[cell.name], (cell.name, sorted(ran ^ V2_MODELS[cell.name]))
    page = Path("docs/results/standard-v2.md").read_text()
    assert "NG-T on INR classification (about 33 min a seed" in page  # the not-run cell is listed, with its time
