"""The results tables of the documentation and README are what the official board renders now.

Every table in docs/ and README.md that shows results sits in an `<!-- nfnzoo:... -->` region that
`nfnzoo leaderboard render --docs docs --readme README.md` writes from leaderboards/; this fails when
a committed page differs from that (a hand edit, an entry added without re-rendering), with
negative controls, and checks the skipped-entry records against the pinned test metadata."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.tasks import get_task_class
from leaderboards import OFFICIAL_ROOT
from leaderboards.datasets import load_datasets
from leaderboards.docs_pages import docs_pages, render_docs, stale_pages
from leaderboards.skipped import load_skipped
from leaderboards.entries import load_entries
from leaderboards.pinned import load_pinned
from zoo.cli import main
from zoo.validation.schema import SchemaError

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_results_pages_are_what_the_board_renders_now():
    stale, unshown = stale_pages(OFFICIAL_ROOT, REPO / "docs", REPO / "README.md")
    assert stale == [], ("these pages differ from the official board; run "
                         "`nfnzoo leaderboard render --docs docs --readme README.md`")
    assert unshown == []  # every dataset of every task on the board is shown on some page


def test_the_readme_teaser_and_every_results_page_are_regions():
    pages = {page.relative_to(REPO).as_posix() for page in docs_pages(REPO / "docs", REPO / "README.md")}
    assert "README.md" in pages
    assert {f"docs/results/{name}.md" for name in ("cnn-generalization", "transformer-generalization",
                                                    "inr-classification", "inr-editing")} <= pages


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs, ignore=shutil.ignore_patterns("*.png"))
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    return docs, tmp_path / "README.md"


def test_a_hand_edited_number_is_caught_and_rendering_restores_it(tmp_path):
    """The negative control: move one generated number in a copy; the check fails, render fixes it,
    and the hand-written text around the region is left as it was."""
    docs, readme = _copy(tmp_path)
    page = docs / "results" / "cnn-generalization.md"
    text = page.read_text()
    start = text.index("<!-- nfnzoo:board")
    number = next(token for token in text[start:].split() if token.startswith("0.") and len(token) == 6)
    edited = text[:start] + text[start:].replace(number, "0.9999", 1) + "\nA note the author added.\n"
    page.write_text(edited)
    assert stale_pages(OFFICIAL_ROOT, docs, readme)[0] == [page]
    changed, unshown = render_docs(OFFICIAL_ROOT, docs, readme)
    assert changed == [page] and unshown == []
    assert page.read_text() == text + "\nA note the author added.\n"


def test_the_command_checks_and_renders(tmp_path, capsys):
    docs, readme = _copy(tmp_path)
    args = ["leaderboard", "render", "--docs", str(docs), "--readme", str(readme)]
    assert main([*args, "--check"]) == 0
    page = docs / "results" / "inr-editing.md"
    page.write_text(page.read_text().replace("| 1 |", "| 7 |", 1))
    assert main([*args, "--check"]) == 1
    assert "1 page(s) differ" in capsys.readouterr().err
    assert main(args) == 0 and main([*args, "--check"]) == 0


def test_a_dataset_no_page_shows_fails_the_command(tmp_path, capsys):
    docs, readme = _copy(tmp_path)
    page = docs / "results" / "inr-editing.md"
    text = page.read_text()
    start, end = text.index("<!-- nfnzoo:board"), text.index("<!-- /nfnzoo:board -->") + len("<!-- /nfnzoo:board -->")
    page.write_text(text[:start] + text[end:])
    assert main(["leaderboard", "render", "--docs", str(docs), "--readme", str(readme)]) == 1
    assert "inr-editing bdfa70266062" in capsys.readouterr().err


@pytest.mark.parametrize("region, expected", [
    ("<!-- nfnzoo:board task=generalization -->\n<!-- /nfnzoo:board -->", "needs ['dataset']"),
    ("<!-- nfnzoo:board task=nope dataset=6e211693486a -->\n<!-- /nfnzoo:board -->", "task='nope'"),
    ("<!-- nfnzoo:board task=generalization dataset=6e21 -->\n<!-- /nfnzoo:board -->", "12 or more hex digits"),
    ("<!-- nfnzoo:board task=generalization dataset=6e211693486a colour=red -->\n<!-- /nfnzoo:board -->",
     "got 'colour=red'"),
    ("<!-- nfnzoo:tables -->\n<!-- /nfnzoo:tables -->", "unknown region nfnzoo:tables"),
    ("<!-- nfnzoo:teaser -->\nno end marker\n", "1 nfnzoo region(s) open but 0 close"),
])
def test_a_malformed_region_is_one_line_naming_the_page_and_line(tmp_path, capsys, region, expected):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text(f"# A page\n\n{region}\n")
    assert main(["leaderboard", "render", "--docs", str(docs)]) == 1
    error = capsys.readouterr().err.strip()
    assert expected in error and "page.md" in error and len(error.splitlines()) == 1


def _board_with_dataset_name(tmp_path, name):
    board = tmp_path / "board"
    shutil.copytree(OFFICIAL_ROOT, board, ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.md"))
    datasets = json.loads((board / "datasets.json").read_text())
    for record in datasets["datasets"]:
        if record["dataset_hash"].startswith("bdfa70266062"):
            record["name"] = name
    (board / "datasets.json").write_text(json.dumps(datasets))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("<!-- nfnzoo:board task=inr-editing dataset=bdfa70266062 -->\n"
                                  "<!-- /nfnzoo:board -->\n")
    return board, docs


def test_free_text_from_the_board_is_escaped(tmp_path):
    """A dataset name with Markdown in it shows as text in the generated region; one outside the names'
    characters (markup, a link) is refused where the board is read, naming the record."""
    board, docs = _board_with_dataset_name(tmp_path, "org/zoo_v1+x")
    render_docs(board, docs)
    assert r"org/zoo\_v1+x" in (docs / "page.md").read_text()
    board, docs = _board_with_dataset_name(tmp_path / "hostile", "x | [click](javascript:alert(1)) <script>")
    with pytest.raises(SchemaError, match=r"datasets\[\d+\]\.name: dataset name .* must be 1-200 ASCII"):
        render_docs(board, docs)
    assert "<script>" not in (docs / "page.md").read_text()


def test_each_skipped_record_is_what_the_task_says_of_the_pinned_test_split():
    """A skipped suite entry is shown as 'no result can exist'; check that against the data: the
    protocol leaves the pinned test split no rows, with exactly the recorded reason, and no entry
    with that protocol is on the board."""
    records = load_skipped(OFFICIAL_ROOT)
    assert records
    known = load_datasets(OFFICIAL_ROOT)
    entries = [entry for _, entry in load_entries(OFFICIAL_ROOT)]
    for record in records:
        task_class = get_task_class(record.task)
        on_data = [e for e in entries if e.results.task == record.task
                   and e.results.dataset.dataset_hash == record.dataset_hash]
        assert on_data, record
        metadata = load_pinned(OFFICIAL_ROOT, known[record.dataset_hash])
        config = {**on_data[0].results.task_config, **record.protocol}
        with pytest.raises(ValueError) as raised:
            task_class.test_targets(metadata, config)
        assert str(raised.value) == record.reason
        assert not any(all(e.results.task_config.get(k) == v for k, v in record.protocol.items()) for e in on_data)


def test_a_skipped_record_that_is_not_true_fails_that_check(tmp_path):
    """The negative control: a threshold that leaves test rows does not raise."""
    record = load_skipped(OFFICIAL_ROOT)[0]
    entry = next(e for _, e in load_entries(OFFICIAL_ROOT) if e.results.dataset.dataset_hash == record.dataset_hash)
    metadata = load_pinned(OFFICIAL_ROOT, load_datasets(OFFICIAL_ROOT)[record.dataset_hash])
    rows = get_task_class(record.task).test_targets(metadata, {**entry.results.task_config, "min_accuracy": 0.0})
    assert len(rows) > 0
