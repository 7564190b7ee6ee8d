"""The board's plots read at a glance: every text inside the figure and apart from every other, panels
titled by dataset and protocol (never two alike), entries named as the tables name them, ranked, on a
score axis fitted to their mean ± std. The figures are rendered for real (Agg) and their texts measured."""

from __future__ import annotations

from unittest import mock

import matplotlib
import numpy as np
import pytest

from leaderboards import plots, submit
from leaderboards.board import build_board
from leaderboards.plots import against_figure, bars_figure, predictions_figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.text import Text

def unwrapped(text: str) -> str:
    """A label without its line breaks and spaces (a wrap breaks at a space, after a hyphen or inside a word)."""
    return "".join(text.split())


LONG = "a-graph-metanetwork-from-an-outside-package-with-a-long-name-v2"  # 63 characters, within MODEL_NAME


def drawn_texts(figure) -> list[Text]:
    """The texts a draw of `figure` really draws (visible, not empty: no stale tick beyond the axis' view)."""
    drawn, draw = [], Text.draw

    def recording(text, renderer):
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)
        return draw(text, renderer)

    with mock.patch.object(Text, "draw", recording):
        figure.canvas.draw()
    return drawn


def layout_problems(figure) -> list[str]:
    """Each drawn text that leaves the figure, and each pair of drawn texts that overlap (by a pixel or more)."""
    texts = drawn_texts(figure)
    renderer = figure.canvas.get_renderer()
    boxes = [(text.get_text(), text.get_window_extent(renderer)) for text in texts]
    edge = figure.bbox
    problems = [f"outside the figure: {name!r}" for name, box in boxes
                if box.x0 < edge.x0 - 0.5 or box.y0 < edge.y0 - 0.5 or box.x1 > edge.x1 + 0.5 or box.y1 > edge.y1 + 0.5]
    for index, (name, box) in enumerate(boxes):
        for other, other_box in boxes[index + 1:]:
            wide = min(box.x1, other_box.x1) - max(box.x0, other_box.x0)
            tall = min(box.y1, other_box.y1) - max(box.y0, other_box.y0)
            if wide >= 1 and tall >= 1:
                problems.append(f"overlap: {name!r} and {other!r}")
    return problems


@pytest.fixture
def board(root, write_results, make_data, local_dataset, hashes):
    """The generalization board: one zoo under two protocols that differ only in the subset (ReLU, tanh),
    two configs of one model, a 63-character model name, scores between 0.59 and 0.84; a second zoo."""
    def entry(model, taus, activation, seconds, params, dropout=0.0, **kwargs):
        data = make_data(model=model, taus=taus, **kwargs)
        data["task_config"]["subset"] = {"activation": [activation]}
        data["model_config"]["dropout"] = dropout
        data["num_params"] = params
        for seed in data["per_seed"]:
            seed["train_time_s"] = seconds
        submit(write_results(data), root)

    for activation in ("relu", "tanh"):  # train times 37 s to 300 s: a log axis spanning under two decades
        entry("statnn", (0.80, 0.82, 0.84), activation, 40.0, 23937)
        entry("statnn", (0.70, 0.72, 0.71), activation, 300.0, 23937, dropout=0.1)  # the same model, another config
        entry(LONG, (0.59, 0.62, 0.66), activation, 37.0, 1_200_000)
        entry("mlp", (0.75, 0.76, 0.74), activation, 60.0, 410)
    entry("hnp", (0.60, 0.64, 0.61), "relu", 90.0, 80_000, dataset_hash=hashes["local"],
          dataset_path=str(local_dataset))
    [board] = build_board(root)
    return board


def test_the_metric_figure_keeps_every_text_inside_and_apart(board):
    figure = bars_figure(board)
    try:
        assert layout_problems(figure) == []
    finally:
        plt.close(figure)


def test_panels_are_titled_by_dataset_and_protocol_and_never_alike(board):
    figure = bars_figure(board)
    try:
        titles = [subfigure.get_suptitle().replace("\n", " ") for subfigure in figure.subfigs if subfigure.axes]
        assert len(titles) == 3 and len(set(titles)) == 3
        relu, tanh = sorted(title for title in titles if "org/cnn-zoo" in title)  # the one zoo's two protocols
        assert "activation ∈ ['relu']" in relu and "activation ∈ ['tanh']" in tanh
        assert "config cnn-mnist" in relu and "config cnn-mnist" in tanh
        assert "cnn-local" in " ".join(titles)
    finally:
        plt.close(figure)


def test_entries_are_named_ranked_and_drawn_with_their_seed_interval_on_a_fitted_axis(board):
    figure = bars_figure(board)
    try:
        figure.canvas.draw()
        tables = [table for section in board.sections for table in section.tables]
        for subfigure, table in zip([s for s in figure.subfigs if s.axes], tables):
            axis = subfigure.axes[0]
            shown = [unwrapped(label.get_text()) for label in axis.get_yticklabels()][::-1]  # top first
            assert shown == [unwrapped(row.cells["Model"]) for row in table.rows]  # the board's names, ranked
            assert not any(row.entry.submission.id in " ".join(shown) for row in table.rows)  # no entry ids
            summaries = [row.entry.results.summary["kendall_tau"] for row in table.rows[::-1]]
            [segments] = [c.get_segments() for c in axis.containers[0].lines[2]]  # the error bars, bottom first
            assert np.allclose([[s[0][0], s[1][0]] for s in segments],
                               [[m.mean - m.std, m.mean + m.std] for m in summaries])
            low, high = axis.get_xlim()
            assert 0.3 < low < min(m.mean - m.std for m in summaries)  # all above 0.3: not from 0
            assert high > max(m.mean + m.std for m in summaries)
        labels = {unwrapped(label.get_text()) for axis in figure.axes for label in axis.get_yticklabels()}
        assert {"statnn(dropout0.0)", "statnn(dropout0.1)", LONG, "mlp", "hnp"} <= labels
    finally:
        plt.close(figure)


def test_a_panel_draws_its_best_entries_and_says_so(board, monkeypatch):
    monkeypatch.setattr(plots, "MAX_ROWS", 2)
    figure = bars_figure(board)
    try:
        assert layout_problems(figure) == []
        relu = next(s for s in figure.subfigs if "['relu']" in s.get_suptitle() and "org/cnn-zoo" in s.get_suptitle())
        assert "its best 2 of 4 entries" in relu.get_suptitle()
        assert [unwrapped(t.get_text()) for t in relu.axes[0].get_yticklabels()] == ["mlp", "statnn(dropout0.0)"]
    finally:
        plt.close(figure)


def test_the_other_figures_keep_their_texts_inside_and_apart(board):
    params = against_figure(board, "Params", "parameters")
    time = against_figure(board, "Train time / seed (s)", "train time per seed (s)")  # a short span of a log axis
    rng = np.random.default_rng(0)
    targets = rng.uniform(0.1, 0.9, 200)
    title = board.sections[0].title + ", protocol 2"
    predictions = predictions_figure(board, [(title, LONG, targets, targets + rng.normal(0, 0.05, 200))] * 4)
    try:
        assert layout_problems(params) == []
        assert layout_problems(time) == []
        assert layout_problems(predictions) == []
        labels = {unwrapped(text.get_text()) for axis in params.axes for text in axis.texts}
        assert {"statnn(dropout0.0)", LONG} <= labels
    finally:
        plt.close(params)
        plt.close(time)
        plt.close(predictions)


def test_the_checker_flags_a_text_over_a_panel_and_a_text_outside_the_figure():
    """The negative control: a figure title moved onto its panel's title, a note over a tick label, a text at
    x = 1.2 in figure coordinates."""
    figure, axis = plt.subplots(figsize=(6, 4))
    try:
        axis.set_title("a panel's title")
        axis.set_yticks([0, 1], ["mlp", "statnn"])
        figure.canvas.draw()
        top = axis.title.get_window_extent(figure.canvas.get_renderer())
        figure.suptitle("the figure's title", y=figure.transFigure.inverted().transform((0, top.y1))[1])
        axis.text(-0.02, 1, "a note", transform=axis.get_yaxis_transform(), ha="right", va="center")
        figure.text(1.2, 0.5, "off the edge")
        problems = layout_problems(figure)
        assert any("\"a panel's title\"" in problem and "\"the figure's title\"" in problem for problem in problems)
        assert any("'a note'" in problem and "'statnn'" in problem for problem in problems)
        assert "outside the figure: 'off the edge'" in problems
        assert len(problems) == 3
    finally:
        plt.close(figure)
