"""The documentation site builds with `mkdocs build --strict`: a broken internal link, a page missing
from the nav or an API object mkdocstrings cannot find fails the suite (with negative controls)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]  # not --quiet: it hides the warnings --strict counts


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([*MKDOCS, "--config-file", str(config), "--site-dir", str(site)], cwd=config.parent,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly(tmp_path):
    built = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "zoo" / "index.html").read_text()
    assert 'id="zoo.planning.spec.load_spec"' in api  # mkdocstrings rendered the docstrings, not an empty page
    assert (tmp_path / "site" / "results" / "cnn-generalization" / "index.html").exists()


def _tiny_site(tmp_path: Path, page: str) -> Path:
    """A copy of the real configuration with one page: what the negative controls break."""
    root = tmp_path / "tiny"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "index.md").write_text(page)
    config = (REPO / "mkdocs.yml").read_text().split("\nnav:")[0] + "\nnav:\n  - Home: index.md\n"
    (root / "mkdocs.yml").write_text(config.replace("paths: [.]", f"paths: [{REPO}]"))
    return root / "mkdocs.yml"


def test_a_good_tiny_site_builds(tmp_path):
    """The control of the controls below: the one-page site builds when nothing is wrong."""
    built = _build(_tiny_site(tmp_path, "# Home\n\n::: zoo.planning.spec\n"), tmp_path / "site")
    assert built.returncode == 0, built.stderr[-2000:]


def test_a_broken_internal_link_fails_the_build(tmp_path):
    built = _build(_tiny_site(tmp_path, "# Home\n\nSee [the missing page](missing.md).\n"), tmp_path / "site")
    assert built.returncode != 0 and "missing.md" in built.stderr


def test_a_missing_api_object_fails_the_build(tmp_path):
    built = _build(_tiny_site(tmp_path, "# Home\n\n::: zoo.no_such_module\n"), tmp_path / "site")
    assert built.returncode != 0 and "zoo.no_such_module" in built.stderr


def test_every_page_under_docs_is_in_the_nav():
    """`validation.omitted_files: warn` makes an orphan page fail --strict; this names it sooner."""
    nav = (REPO / "mkdocs.yml").read_text().split("\nnav:")[1]
    pages = [p.relative_to(REPO / "docs").as_posix() for p in sorted((REPO / "docs").rglob("*.md"))]
    assert [page for page in pages if page not in nav] == []


def test_the_makefile_builds_the_site_with_the_same_strictness():
    makefile = (REPO / "Makefile").read_text()
    assert "mkdocs build --strict" in makefile and shutil.which("make") is not None
