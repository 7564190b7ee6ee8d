"""What an entry says of the model's code: its package and version (the Version column), and whether
the linked commit holds the code that ran (the Code column)."""

from __future__ import annotations

import pytest

from benchmarks.results import Results
from leaderboards import submit
from leaderboards.board import build_board, model_version
from zoo.validation.schema import from_data

COMMIT = "0123abcd4567" + "0" * 28


def _source(kind: str, import_path: str, distribution: str | None, version: str | None, commit: str | None = COMMIT,
            dirty: bool | None = False) -> dict:
    return {"kind": kind, "loaded_as": import_path, "import_path": import_path, "distribution": distribution,
            "version": version, "commit": commit, "dirty": dirty}


@pytest.mark.parametrize("model, source, shown", [
    ("statnn", None, "nfnzoo 0.1.0"),  # results older than model_source: a model nfnzoo shipped
    ("statnn", _source("built-in", "nfn_models.statnn:StatNN", "nfnzoo", "0.1.0"), "nfnzoo 0.1.0"),
    ("NQPool", _source("import path", "nqpool.models:NQPool", "nqpool-nfn", "0.1.0"), "nqpool-nfn 0.1.0"),
    ("NQPool", _source("import path", "nqpool.models:NQPool", None, "0.1.0"), "nqpool 0.1.0"),  # no distribution
    ("nq", _source("entry point", "nqpool.models:NQPool", "nqpool", "2.0"), "nqpool 2.0"),
    ("NQPool", _source("object", "nqpool:NQPool", None, None), "nqpool (version not recorded)"),
])
def test_the_version_cell_names_the_models_package(make_data, model, source, shown):
    data = make_data(model=model)
    if source is not None:
        data["model_source"] = source
    results = from_data(Results, data, where="results")
    assert model_version(results) == shown
    assert (shown.split()[0] == "nfnzoo") == (source is None or source["kind"] == "built-in")


def test_an_outside_models_row_shows_its_package_beside_a_built_in(root, write_results, make_data):
    """The tester's board: nfnzoo itself at 0.1.0, an outside package at 0.1.0 too, told apart."""
    outside = make_data(model="NQPool", taus=(0.7, 0.71, 0.72))
    outside["model_source"] = _source("import path", "nqpool.models:NQPool", None, "0.1.0")
    submit(write_results(outside), root)
    submit(write_results(model="statnn"), root)
    rows = {row.entry.results.model: row for row in build_board(root)[0].sections[0].tables[0].rows}
    assert (rows["NQPool"].cells["Version"], rows["statnn"].cells["Version"]) == ("nqpool 0.1.0", "nfnzoo 0.1.0")


CODE = "https://github.com/org/nqpool"


@pytest.mark.parametrize("dirty, code_url, commit, shown, link, note", [
    (False, CODE, None, "0123abcd", f"{CODE}/tree/{COMMIT}", None),  # a clean run: the commit's code
    (True, CODE, None, "0123abcd + uncommitted changes (not reproducible)", f"{CODE}/tree/{COMMIT}",
     "the board links that commit and shows the entry as not reproducible from it"),
    (True, CODE, COMMIT[:12], "0123abcd + uncommitted changes (not reproducible)", f"{CODE}/tree/{COMMIT}",
     "the board links that commit and shows the entry as not reproducible from it"),
    (True, None, None, "—", "", "no commit holds it, and the board links none"),
    (None, CODE, None, "0123abcd", f"{CODE}/tree/{COMMIT}", None),  # unknown (no git): nothing claimed
])
def test_a_dirty_run_is_shown_as_not_reproducible_from_its_commit(root, write_results, make_data, dirty, code_url,
                                                                  commit, shown, link, note):
    data = make_data(model="NQPool")
    data["model_source"] = _source("import path", "nqpool.models:NQPool", None, "0.1.0", dirty=dirty)
    accepted = submit(write_results(data), root, code_url=code_url, code_commit=commit)
    row = build_board(root)[0].sections[0].tables[0].rows[0]
    assert (row.cells["Code"], row.values["Code"]) == (shown, link)
    said = accepted.describe()
    assert ("uncommitted changes" in said) == (note is not None)
    if note is not None:
        assert f"uncommitted changes on commit {COMMIT[:12]}: {note}" in said


def test_the_rendered_pages_show_a_dirty_runs_code_as_not_reproducible(root, write_results, make_data, tmp_path):
    from leaderboards import render

    data = make_data(model="NQPool")
    data["model_source"] = _source("import path", "nqpool.models:NQPool", None, "0.1.0", dirty=True)
    submit(write_results(data), root, code_url=CODE)
    pages = render(root, tmp_path / "site")
    assert f"[0123abcd + uncommitted changes (not reproducible)]({CODE}/tree/{COMMIT})" in pages
    html = (tmp_path / "site" / "generalization.html").read_text()
    assert f'<a href="{CODE}/tree/{COMMIT}">0123abcd + uncommitted changes (not reproducible)</a>' in html
