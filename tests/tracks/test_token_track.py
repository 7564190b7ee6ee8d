"""The token-dynamics track: heads read from real models, the regime-constrained transformer, the tiny
profile end to end and its results on a board."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas
import pytest
import torch

from benchmarks.results import load_results
from benchmarks.tasks.token_dynamics import TokenDynamics, definition_cells
from benchmarks.tracks.registry import create_track, list_tracks
from benchmarks.tracks.tokens import conditions as C
from benchmarks.tracks.tokens.constrained import ModelConfig, RegimeTransformer
from benchmarks.tracks.tokens.heads import bert_heads
from benchmarks.tracks.tokens.training import BENCHMARKS, BenchmarkConfig, TrainConfig, train_run
from leaderboards.submission import submit
from zoo.cli import main

SEEDS = (0, 1, 2)


def test_bert_heads_reproduce_the_attention_layer_without_biases():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=32, attn_implementation="eager"), add_pooling_layer=False).eval()
    for layer in model.encoder.layer:
        for linear in (layer.attention.self.query, layer.attention.self.key, layer.attention.self.value,
                       layer.attention.output.dense):
            torch.nn.init.zeros_(linear.bias)
    x = torch.randn(2, 5, 16)
    attention = model.encoder.layer[1].attention
    with torch.no_grad():
        expected = attention.output.dense(attention.self(x)[0]).double()
    heads = [h for h in bert_heads(model) if h.layer == 1]
    assert len(bert_heads(model)) == 8 and len(heads) == 4
    xd = x.double()
    total = sum(torch.softmax(xd @ torch.tensor(h.w) @ xd.transpose(1, 2), -1) @ xd @ torch.tensor(h.v).T
                for h in heads)
    torch.testing.assert_close(total, expected, rtol=1e-5, atol=1e-6)


def _tiny_model(regime: str, encoding: str = "absolute") -> RegimeTransformer:
    return RegimeTransformer(ModelConfig(dim=8, heads=2, layers=2, mlp=16, length=6), regime, encoding, 11, 11,
                             causal=True, embed_tokens=True, seed=0)


@pytest.mark.parametrize("encoding", ["absolute", "rotary", "rotary-diag"])
def test_the_constrained_forward_pass_uses_exactly_the_head_matrices(encoding):
    model = _tiny_model("hd", encoding).double()
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    w, v = model.head_matrices()[0]
    y = x if encoding == "absolute" else torch.einsum("tij,btj->bti", model.rotary[:6].double(), x)
    scores = torch.einsum("bsi,hij,btj->bhst", y, w, y)
    if encoding == "rotary-diag":
        scores = scores + torch.einsum("bsi,hi,bti->bhst", x, torch.nn.functional.softplus(model.diagonal[0]), x)
    scores = scores / math.sqrt(8) + torch.full((6, 6), float("-inf"), dtype=torch.float64).triu(1)
    expected = (torch.softmax(scores, -1) @ torch.einsum("hij,btj->bhti", v, x)).sum(1)
    torch.testing.assert_close(model._attend(0, x), expected)


def test_training_keeps_every_head_in_its_regime_and_the_free_model_is_undecided():
    data = BENCHMARKS["agnews-chars"](BenchmarkConfig("agnews-chars", 64, 8), 16)
    for regime, expected in (("pd", "divergent"), ("hd", "mixed"), ("nd", "convergent")):
        model, outcome = train_run(data, ModelConfig(8, 2, 1, 16, 16), TrainConfig(steps=15, batch_size=8, lr=3e-2),
                                   regime, "rotary-diag", 0)
        assert {h["regime"] for h in outcome["head_regimes"]} == {expected}, outcome["head_regimes"]
        untrained = RegimeTransformer(ModelConfig(8, 2, 1, 16, 16), regime, "rotary-diag", data.inputs, data.outputs,
                                      True, True, 0)
        assert not torch.allclose(model.head_matrices()[0][1], untrained.head_matrices()[0][1])  # it did train
        assert np.isfinite(outcome["metrics"]["test_loss"]) and len(outcome["example_loss"]) == 8
    _, outcome = train_run(data, ModelConfig(8, 2, 1, 16, 16), TrainConfig(steps=3, batch_size=8), "free", "rotary", 0)
    assert {h["regime"] for h in outcome["head_regimes"]} <= {"undecided", "mixed"}


def test_negative_control_the_public_codes_qk_constraint_drifts_with_q():
    """The public code builds the key map from the query map, W_k = (Q^-1 W)^T, so that W_q W_k^T = W,
    while the attention's score matrix is W_q^T W_k = Q^T W^T Q^-T: orthogonally similar to W^T (its
    symmetric part positive definite) only while Q is orthogonal. With a drifted Q it is indefinite
    although W is positive definite; the score matrix has to be constrained itself."""
    rng = np.random.default_rng(0)
    lower = np.tril(rng.normal(size=(6, 6)) * 0.3, -1) + np.eye(6)
    w = lower @ np.diag(rng.uniform(0.5, 2, 6)) @ lower.T
    score_of = lambda q: q.T @ np.linalg.solve(q, w).T  # noqa: E731 (W_q^T W_k with W_k = (Q^-1 W)^T)
    q = np.linalg.qr(rng.normal(size=(6, 6)))[0]
    np.testing.assert_allclose(np.linalg.eigvalsh(C.sym(score_of(q))), np.linalg.eigvalsh(w), atol=1e-10)
    drifted = q @ np.diag([6.0, 1, 1, 1, 1, 1 / 6]) @ np.linalg.qr(rng.normal(size=(6, 6)))[0]
    assert C.classify(w, np.eye(6)).regime == "divergent"
    assert np.linalg.eigvalsh(C.sym(score_of(drifted)))[0] < 0
    assert C.classify(score_of(drifted), np.eye(6)).regime == "undecided"


def test_mnist_rows_need_28_tokens_and_the_task_needs_test_examples():
    with pytest.raises(ValueError, match="28 tokens"):
        BENCHMARKS["mnist-rows"](BenchmarkConfig("mnist-rows", 8, 8), 32)
    with pytest.raises(ValueError, match="test_examples"):
        definition_cells({"benchmark": {}})
    cells = definition_cells({"benchmark": {"test_examples": 2}})
    assert cells["model_id"].tolist() == ["example0/loss", "example0/correct", "example1/loss", "example1/correct"]
    scored = TokenDynamics.score_rows(TokenDynamics.test_targets(cells, {}), np.array([1.0, 1.0, 3.0, 0.0]))
    assert scored == {"test_loss": 2.0, "test_accuracy": 0.5}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tokens")
    messages = []
    written = create_track("token-dynamics").run("tiny", SEEDS, out, messages.append, workers=1)
    return out, written, messages


def test_the_tiny_profile_writes_tables_plots_and_results(tiny_run):
    out, written, messages = tiny_run
    assert "token-dynamics" in list_tracks() and len(written) == 8
    results = load_results(out / "mnist-rows" / "nd-rotary-diag.json")
    assert results.task == "token-dynamics" and results.seeds == SEEDS
    assert set(results.summary) == {"test_accuracy", "test_loss"}
    assert results.model_config["head_regimes"] == ["convergent", "convergent"]
    assert results.task_config["definition"]["benchmark"]["test_examples"] == 16
    other = load_results(out / "mnist-rows" / "pd-absolute.json")
    assert other.dataset.dataset_hash == results.dataset.dataset_hash  # one board for every regime
    assert "log10_growth" in (out / "zoo-heads.csv").read_text().splitlines()[0]
    for name in ("trajectories.png", "zoo.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    minilm = (out / "minilm-heads.md").read_text()
    assert minilm.count("\n| 0 | ") == 2 and "Not decided: 2" in minilm
    assert "| pd | rotary-diag |" in (out / "training.md").read_text()
    zoo = json.loads((out / "jobs" / "zoo.json").read_text())["outcome"]
    assert {m["residual"] for m in zoo["members"]} == {False, True} and len(zoo["members"]) == 8
    assert "| residual | 4 |" in (out / "zoo.md").read_text()


def test_a_rerun_resumes_and_the_results_go_on_a_board_that_rescores_them(tiny_run, tmp_path, capsys):
    out, _, _ = tiny_run
    assert main(["track", "run", "token-dynamics", "--profile", "tiny", "--out", str(out), "--workers", "1"]) == 0
    assert "25 of 25 job(s) already done" in capsys.readouterr().err
    board = tmp_path / "board"
    first = submit(out / "agnews-chars" / "pd-absolute.json", board)
    second = submit(out / "agnews-chars" / "nd-absolute.json", board)
    assert first.verified and second.verified and first.registered_dataset is not None
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for suffix in (".json", ".predictions.csv", ".examples.npz"):
        source = out / "agnews-chars" / f"pd-rotary-diag{suffix}"
        (tampered / source.name).write_bytes(source.read_bytes())
    frame = pandas.read_csv(tampered / "pd-rotary-diag.predictions.csv")
    frame.loc[frame["model_id"].str.endswith("/correct") & (frame["seed"] == 0), "prediction"] = 1.0
    frame.to_csv(tampered / "pd-rotary-diag.predictions.csv", index=False)
    with pytest.raises(Exception, match="test_accuracy is reported as"):
        submit(tampered / "pd-rotary-diag.json", board)


def test_building_a_model_is_seeded_and_leaves_the_global_generator_alone():
    state = torch.random.get_rng_state()
    first, second = _tiny_model("pd"), _tiny_model("pd")
    assert torch.equal(torch.random.get_rng_state(), state)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    other = RegimeTransformer(ModelConfig(dim=8, heads=2, layers=2, mlp=16, length=6), "pd", "absolute", 11, 11,
                              causal=True, embed_tokens=True, seed=1)
    assert not torch.equal(other.embed.weight, first.embed.weight)
