"""The documentation's facts against their sources: the model lists against the registry, the
functions the pages call against their signatures, the figures a page repeats against the page
that measured them, and the submission story against what the pull request's audit accepts."""

from __future__ import annotations

import inspect
import re
import subprocess
from pathlib import Path

import pytest

from benchmarks.check_members import MAGNITUDES
from benchmarks.check_model import DENORMAL_RTOL, EQUIVARIANT_MOVES, MOVES, SPACES
from nfn_models.registry import MODELS, check_model_contract, models_with_output

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
AUDIT = REPO / "deploy" / "ci" / "audit-submission.sh"


def _listed_models(page: str) -> list[str]:
    region = re.search(r"<!-- models:.*?-->\n(.*?)<!-- /models -->", page, re.S)
    assert region is not None, "docs/index.md has no <!-- models: ... --> region"
    return re.findall(r"\(`([a-z0-9_]+)`\)", region.group(1))


def test_the_home_page_lists_exactly_the_models_the_registry_ships():
    listed = _listed_models((DOCS / "index.md").read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(MODELS.builtin_names())


def test_the_tasks_page_lists_exactly_the_models_with_a_weight_output():
    page = (DOCS / "tasks.md").read_text(encoding="utf-8")
    region = re.search(r'`nfn_models\.models_with_output\("weights"\)`:(.*?)a test checks', page, re.S)
    assert region is not None
    listed = re.findall(r"\(`([a-z0-9_]+)`\)", region.group(1))
    assert sorted(listed) == sorted(set(models_with_output("weights")) & set(MODELS.builtin_names()))


def test_the_model_list_check_fails_on_a_list_missing_a_model():
    """Negative control: the region parser sees a dropped model."""
    page = (DOCS / "index.md").read_text(encoding="utf-8").replace("ProbeGen (`probegen`)", "ProbeGen")
    assert "probegen" not in _listed_models(page)


def test_the_models_page_and_the_home_page_link_every_author_page():
    models = (DOCS / "models.md").read_text(encoding="utf-8")
    assert [name for name in MODELS.builtin_names() if f"`{name}`" not in models] == []
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in ("bring-your-own-nfn.md", "weight-spaces.md", "submitting.md", "models.md"):
        assert f"]({page})" in home, page


def _table_models(page: str, heading: str) -> set[str]:
    """The models named in the first column of the first table after `heading`."""
    table = re.search(re.escape(heading) + r".*?\n(\|.*?)\n\n", page, re.S).group(1)
    return {name for row in table.splitlines()[2:] for name in re.findall(r"`([a-z0-9_]+)`", row.split("|")[1])}


def test_the_invariance_tables_cover_every_model_on_the_spaces_it_reads():
    page = (DOCS / "models.md").read_text(encoding="utf-8")
    feedforward = _table_models(page, "## What each model is exactly invariant to")
    transformer = _table_models(page, "On transformer weight spaces")
    for name in MODELS.builtin_names():
        reads = getattr(MODELS.get(name), "weight_spaces", ("feedforward", "transformer"))
        assert ("feedforward" in reads) == (name in feedforward), (name, reads)
        assert ("transformer" in reads) <= (name in transformer), (name, reads)


def test_the_docs_call_check_model_contract_with_its_signature():
    assert list(inspect.signature(check_model_contract).parameters) == ["name", "cls"]
    calls = [(path.name, call) for path in DOCS.rglob("*.md")
             for call in re.findall(r"check_model_contract\(([^)]*)\)", path.read_text(encoding="utf-8"))]
    assert calls and all(len(call.split(",")) == 2 for _, call in calls), calls


def test_no_page_tells_to_pip_install_a_package_that_is_not_published():
    offending = [path.name for path in DOCS.rglob("*.md") if re.search(r"pip install nfnzoo\b",
                                                                        path.read_text(encoding="utf-8"))]
    assert offending == []


def test_the_zoo_generation_times_have_one_source():
    """The suite's zoo generation times are measured on the standard-v1 results page; the author's
    page links there instead of repeating (or contradicting) them, and says the suite's time is
    measured."""
    byo = (DOCS / "bring-your-own-nfn.md").read_text(encoding="utf-8")
    measured = (DOCS / "results" / "standard-v1.md").read_text(encoding="utf-8")
    assert "39 min 10 s" in measured and "14 min 32 s" in measured and "1 h 15 min 47 s" in measured
    assert "results/standard-v1.md#how-these-runs-were-made-written-by-hand" in byo
    assert not re.search(r"\b\d+(\.\d+)?(, | and )~?\d+(\.\d+)? and ~?\d+ minutes", byo)
    assert "not yet measured" not in byo


def test_the_check_model_tolerances_on_the_page_are_the_code_s():
    byo = (DOCS / "bring-your-own-nfn.md").read_text(encoding="utf-8")
    for name, magnitude in MAGNITUDES.items():
        row = re.search(rf"^\| `{name}` \|.*\| ([0-9.e-]+) \| ([0-9.e-]+) \|$", byo, re.M)
        assert row is not None, name
        assert (float(row.group(1)), float(row.group(2))) == (magnitude.tolerance, magnitude.equivariant_tolerance)
    assert re.search(rf"^\| `denormal` \|.*\| {DENORMAL_RTOL:g} \| - \|$", byo, re.M)
    for space_name, (_, _, _, group) in SPACES.items():  # each space's row names the group field it sets
        assert re.search(rf"^\| `{re.escape(space_name)}` \|.*\| `{group}` \|$", byo, re.M), space_name
    assert f"more than {MOVES:.0e} ({EQUIVARIANT_MOVES:.0e} for a weight output)".replace("e-0", "e-") in byo


def _audit(tmp_path: Path, changed: list[str]) -> subprocess.CompletedProcess:
    listing = tmp_path / "changed.txt"
    listing.write_text("".join(f"{path}\n" for path in changed))
    # NFNZOO=true: the path rule is what is under test; the audit itself is tested in tests/leaderboards
    return subprocess.run(["bash", str(AUDIT), str(tmp_path), str(listing)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "NFNZOO": "true"}, timeout=60)


def test_the_submission_page_names_exactly_the_paths_the_audit_accepts(tmp_path):
    page = (DOCS / "submitting.md").read_text(encoding="utf-8")
    accepted = ["leaderboards/entries/generalization/abc/mlp-0123.json", "leaderboards/pinned/abc.parquet",
                "leaderboards/datasets.json"]
    assert _audit(tmp_path, accepted).returncode == 0
    for path in ("leaderboards/entries/", "leaderboards/pinned/", "leaderboards/datasets.json"):
        assert f"`{path}`" in page, path
    # what the page says stays out of the pull request, the audit refuses (the negative controls)
    for refused, named in (("docs/results/cnn-generalization.md", "`docs/`"), ("README.md", "`README.md`"),
                           ("leaderboards/skipped.json", "`leaderboards/skipped.json`")):
        assert _audit(tmp_path, [*accepted, refused]).returncode == 1, refused
        assert named in page.split("## What the pull request's check does")[0], named


def test_the_presets_example_and_its_error_line_are_the_contract_s(tmp_path):
    """The author's page's `PRESETS` example passes `check_model_contract` on the example package's model,
    and the malformed one it quotes gives exactly the line it shows."""
    import ast

    from plugin_site import example_site, on_path
    from zoo.registry import PluginError

    byo = (DOCS / "bring-your-own-nfn.md").read_text(encoding="utf-8")
    example = re.search(r"PRESETS = (\{.*?\}\})", byo, re.S).group(1)
    presets = ast.literal_eval(re.sub(r"#[^\n]*", "", example))
    quoted = re.search(r"`(NFN model 'tensor_moments' \(TensorMoments\): preset [^`]*)`", byo).group(1)
    with on_path(example_site(tmp_path / "site"), MODELS):
        from my_nfn.model import TensorMoments

        check_model_contract("tensor_moments", type("TensorMoments", (TensorMoments,), {"PRESETS": presets}))
        malformed = type("TensorMoments", (TensorMoments,), {"PRESETS": {"budget": {"hiden": 16}}})
        with pytest.raises(PluginError) as error:
            check_model_contract("tensor_moments", malformed)
    assert str(error.value) == quoted


def test_the_submission_procedure_goes_zoo_run_submit_pull_request():
    """One story with the suite's: zoos regenerated (none can be fetched), `bench suite` with every zoo's
    `--data ZOO=FOLDER` or `bench run`, `leaderboard submit`, the pull request; the line the page quotes is
    the one `bench suite` prints."""
    from benchmarks.commands import _standard_suite
    from benchmarks.standard import STANDARD_SUITES
    from test_docs_commands import page_commands

    page = (DOCS / "submitting.md").read_text(encoding="utf-8").split("## What the pull request's check does")[0]
    commands = page_commands(page)
    first = {step: next(i for i, c in enumerate(commands) if c.startswith(step))
             for step in ("nfnzoo generate", "nfnzoo bench suite", "nfnzoo bench run", "nfnzoo leaderboard submit")}
    assert first["nfnzoo generate"] < first["nfnzoo bench suite"] < first["nfnzoo leaderboard submit"], commands
    assert first["nfnzoo bench run"] < first["nfnzoo leaderboard submit"]
    assert page.index("nfnzoo leaderboard submit") < page.index("**Open the pull request**")
    assert not [c for c in commands if "@REVISION" in c]  # nothing of ours can be fetched from the Hub yet
    assert "No zoo of this project is published on the Hub yet" in page
    assert "No published copy of the zoos can be fetched" in (DOCS / "bring-your-own-nfn.md").read_text()
    suite = next(c for c in commands if c.startswith("nfnzoo bench suite standard-v2"))
    zoos = {cell.zoo.name for cell in STANDARD_SUITES.get("standard-v2")().cells}
    assert set(re.findall(r"--data ([\w-]+)=", suite)) == zoos
    out = re.search(r"--out (\S+)", suite).group(1)
    printed = re.search(r'print\(f"(wrote \{args\.out\}/suite\.json[^"]*)"\)', inspect.getsource(_standard_suite))
    assert printed.group(1).replace("{args.out}", out) in re.sub(r"\s+", " ", page)
