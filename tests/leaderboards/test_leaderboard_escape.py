"""Free text in every output format: one escaping helper per format, checked by that format's own reader."""

from __future__ import annotations

import json
import re
import shutil

import matplotlib
import pytest
import yaml
from markdown_it import MarkdownIt

from leaderboards import SubmissionRejected, render, submit
from leaderboards.escape import markdown_cell, markdown_text, plot_text, yaml_string
from leaderboards.publish import _card

matplotlib.use("Agg")

HOSTILE = ["a | b | yes", "`code` and ``more``", "<script>alert(1)</script>", "line one\nline two\n\n# heading",
           "[x](javascript:alert(1))", "![img](https://evil.example/p.png)", "$\\undefinedmacro{$", "$x^2$ costs $5",
           "back\\slash | \\| pipe", "*bold* _it_ ~~gone~~ &amp; &lt;", "- [ ] task", "> quote"]
MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])


@pytest.mark.parametrize("text", HOSTILE)
def test_a_markdown_cell_stays_one_literal_cell(text):
    table = f"| a | b |\n|---|---|\n| {markdown_cell(text)} | end |\n"
    html = MARKDOWN.render(table)
    body = html.split("<tbody>")[1]
    assert body.count("<td>") == 2 and "<td>end</td>" in body
    for tag in ("<script", "<a ", "<img", "<code>", "<em>", "<strong>", "<s>", "<h1"):
        assert tag not in body


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_text_is_one_literal_line(text):
    html = MARKDOWN.render(f"## {markdown_text(text)}\n")
    assert html.count("<h2>") == 1 and html.count("\n") == 1
    for tag in ("<script", "<a ", "<img", "<code>", "<em>", "<strong>", "<h1"):
        assert tag not in html


@pytest.mark.parametrize("text", HOSTILE + ["key: value", "'quoted'", "\"double\"", "é ü ∈", "null", "- item"])
def test_a_yaml_string_reads_back_as_itself(text):
    assert yaml.safe_load(f"name: {yaml_string(text)}\n") == {"name": text}


@pytest.mark.parametrize("text", HOSTILE)
def test_a_plot_label_is_never_mathtext(text, tmp_path):
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots()
    axis.set_title(plot_text(text, width=20))
    axis.annotate(plot_text(text), (0.5, 0.5))
    figure.suptitle(plot_text(text))
    figure.savefig(tmp_path / "label.png")  # mathtext of `$\undefinedmacro{$` raises here
    plt.close(figure)
    assert not matplotlib.cbook.is_math_text(plot_text(text))


def test_a_hostile_dataset_name_is_escaped_in_the_page_and_the_card(root, write_results, local_dataset, hashes,
                                                                    tmp_path):
    """A local dataset's folder name becomes its display name: a heading and the Hub card's list. One
    with markup is refused (outside the names' characters, `leaderboards.names`); one with Markdown's
    `_` and `+` in it is escaped."""
    refused = local_dataset.parent / "zoo |`x`| <script>[x](javascript:alert(1)) $m$"
    shutil.move(local_dataset, refused)
    with pytest.raises(SubmissionRejected, match="dataset name .* must be 1-200 ASCII"):
        submit(write_results(dataset_hash=hashes["local"], dataset_path=str(refused)), root)
    hostile = local_dataset.parent / "zoo_x_+y_"
    shutil.move(refused, hostile)
    accepted = submit(write_results(dataset_hash=hashes["local"], dataset_path=str(hostile)), root)
    assert accepted.registered_dataset.name == hostile.name
    page = render(root, tmp_path / "site")
    heading = next(line for line in page.splitlines() if line.startswith("## "))
    html = MARKDOWN.render(page)
    assert "<script" not in html and "<a " not in html
    assert len(re.findall(r"(?<!\\)`", heading)) == 4  # unescaped: the config's and the hash's code spans only
    from leaderboards.datasets import load_datasets
    from leaderboards.entries import load_entries

    entries = [entry for _, entry in load_entries(root)]
    card = _card({"generalization": entries}, {}, load_datasets(root))
    front, body = card.split("---\n")[1], card.split("---\n", 2)[2]
    assert yaml.safe_load(front)["configs"][0]["config_name"] == "generalization"
    rendered = MARKDOWN.render(body)
    assert "<script" not in rendered and "<a " not in rendered
    assert json.dumps(hostile.name) not in body  # never copied raw
