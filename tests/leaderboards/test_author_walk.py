"""The author's walk, end to end, through the console script: a new model in a package of its own (not
installed, run from its folder) -> check-model -> standard-v2's two CNN cells on a zoo made here ->
submit -> render. Nothing a command prints contradicts the rendered board: each cell's standing (ranked,
a stand-in, or in none of the suite's tables) is the same in `suite.json`, `table.md`, submit's last
lines and the rendered pages, and no entry holds this machine's path to the zoo.

The zoo is the bundled `cnn-mnist` spec's tiny profile with 60 runs (relu and tanh), trained without
Ray; its bytes are not the pinned zoo's, so both cells are stand-ins, never ranked (a ranked cell needs
the pinned zoo: `tests/leaderboards/test_suite_standing.py` covers that case with written results).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NFNZOO = Path(sys.executable).parent / "nfnzoo"
CELLS = ("cnn-generalization-relu", "cnn-generalization-tanh")
MODEL = "nqpool.model:TensorMoments"


@pytest.fixture(scope="module")
def walk_zoo(tmp_path_factory) -> Path:
    from zoo.dataset.pack import pack
    from zoo.planning.plan import plan_runs
    from zoo.planning.spec import load_spec, spec_from_data
    from zoo.storage.folder import STAGING_FOLDER, save_spec
    from zoo.storage.staging import Staging
    from zoo.training.worker import train_runs

    data = load_spec("cnn-mnist", "tiny").to_data()
    data["dataset"].update(train_size=1000, validation_size=500, test_size=500, eval_train_size=500)
    data["search_space"]["sampled"]["count"] = 60  # enough final checkpoints of each activation in every split
    spec = spec_from_data(data, "tests/leaderboards/test_author_walk.py")
    folder = tmp_path_factory.mktemp("walk") / "my-cnn-zoo"
    folder.mkdir()
    save_spec(spec, folder)
    train_runs(spec, plan_runs(spec), Staging(folder / STAGING_FOLDER))
    pack(folder)
    return folder


def nfnzoo(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled", "NFNZOO_THREADS": "1"}
    done = subprocess.run([str(NFNZOO), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (argv, done.stderr[-3000:])
    return done


def standing(text: str, cell: str) -> str:
    """What a line about `cell` says of its standing: "ranked", "stand-in" or "none"."""
    line = next(line for line in text.splitlines() if cell in line and ("ranked" in line or "table" in line))
    if "in none of its tables" in line:
        return "none"
    return "stand-in" if "stand-in" in line else "ranked"


@pytest.mark.slow
def test_the_authors_walk_says_what_the_rendered_board_shows(walk_zoo, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copytree(ROOT / "examples" / "my_nfn" / "my_nfn", project / "nqpool")

    checked = nfnzoo("bench", "check-model", MODEL, cwd=project)
    assert "every claim holds" in checked.stdout

    out = tmp_path / "std"
    suite = nfnzoo("bench", "suite", "standard-v2", "--model", MODEL, "--name", "nqpool", "--only", ",".join(CELLS),
                   "--data", f"cnn-mnist-suite-v2={walk_zoo}", "--out", str(out), "--device", "cpu", cwd=project)
    manifest = json.loads((out / "suite.json").read_text())
    cells = {cell["cell"]: cell for cell in manifest["cells"]}
    table = (out / "table.md").read_text()
    for cell in CELLS:  # other bytes than the pinned zoo's: a stand-in, never ranked, everywhere the run says it
        assert cells[cell]["stand_in"] is True and cells[cell]["ranked"] is False
        assert standing(table, cell) == standing(suite.stdout, cell) == "stand-in"

    board = tmp_path / "board"
    board.mkdir()
    submitted = nfnzoo("leaderboard", "submit", str(out), "--root", str(board), cwd=project)
    site = tmp_path / "site"
    nfnzoo("leaderboard", "render", "--root", str(board), "--out", str(site), cwd=project)
    suites_page = site / "suites.md"
    shown = suites_page.read_text() if suites_page.exists() else ""
    for cell in CELLS:
        said = standing(submitted.stdout, cell)
        assert said in ("stand-in", "none")  # never "ranked": the run said it is not
        if said == "none":  # then no suite table of the rendered board lists the model
            assert "nqpool" not in shown
        else:
            assert "nqpool" in shown and "stand-in" in shown

    page = (site / "generalization.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("|") and "nqpool" in line]
    assert len(rows) == 2  # one per cell: the relu and the tanh subset
    assert [row.split("|")[2].strip() for row in rows] == ["nqpool", "nqpool"]  # the Model column: its board name
    entries = list((board / "entries").rglob("*.json"))
    assert len(entries) == 2
    for entry in entries:  # the entry that goes into a pull request names the zoo by its hash and source
        text = entry.read_text()
        assert str(walk_zoo) not in text and str(tmp_path) not in text
        assert json.loads(text)["results"]["dataset"]["source"] == "regenerated from spec cnn-mnist (tiny)"
