"""`nfnzoo track run wave-cre`: the tiny profile end to end, resumed, on a board; the paper profile's path."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from benchmarks.files import read_npz
from benchmarks.results import load_results
from benchmarks.tracks.registry import create_track, list_tracks
from benchmarks.tracks.wave import track as wave
from benchmarks.tracks.wave.encoder import EncoderConfig
from benchmarks.tracks.wave.learners import Optimisation
from benchmarks.tracks.wave.relations import read_fewrel
from leaderboards.submission import submit
from zoo.cli import main

SEEDS = (2021, 2121, 2221)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("wave")
    messages = []
    written = create_track("wave-cre").run("tiny", SEEDS, out, messages.append, workers=1)
    return out, written, messages


def test_the_tiny_profile_writes_every_methods_results_table_and_plot(tiny_run):
    out, written, messages = tiny_run
    assert "wave-cre" in list_tracks() and len(written) == len(wave.METHODS)
    folder = out / "fewrel-semeval"
    for method in wave.METHODS:
        results = load_results(folder / f"{method}.json")
        assert results.task == "continual-learning" and results.seeds == SEEDS
        metrics = set(results.summary)
        assert {"final_average_accuracy", "final_seen_accuracy", "kept_bytes"} <= metrics
        assert ("task_identity_accuracy" in metrics) == (method in ("wave-cre", "wave-cre-mixture", "hide-prompt",
                                                                    "eoe"))
        assert ("final_forgetting" in metrics) == (method != "joint")
        kept = results.summary["kept_bytes"].mean
        assert (kept > 0) == (method in ("wave-cre", "wave-cre-mixture", "hide-prompt", "eoe", "rehearsal"))
        matrix = read_npz(folder / results.examples)["accuracy_matrix_seed2021"]
        assert matrix.shape == (3, 3) and np.isfinite(matrix[:, 2]).all()
        assert results.task_config["definition"]["benchmark"]["tasks"] == 3
    assert (out / "fewrel-semeval-accuracy.png").read_bytes()[:4] == b"\x89PNG"
    table = (out / "fewrel-semeval.md").read_text()
    assert table.count("\n| ") == len(wave.METHODS) + 1 and "| T1 | T2 | T3 | FAA |" in table
    assert any(m.startswith("[24/24]") and "seen acc." in m for m in messages)
    assert len(list((out / "cache").glob("queries-*.pt"))) == 1


def test_a_rerun_resumes_and_the_results_go_on_a_board(tiny_run, tmp_path, capsys):
    out, _, _ = tiny_run
    assert main(["track", "run", "wave-cre", "--profile", "tiny", "--seeds", ",".join(map(str, SEEDS)),
                 "--out", str(out), "--workers", "1"]) == 0
    assert "24 of 24 job(s) already done" in capsys.readouterr().err
    board = tmp_path / "board"
    first = submit(out / "fewrel-semeval" / "wave-cre.json", board)
    second = submit(out / "fewrel-semeval" / "rehearsal.json", board)
    assert first.verified and second.verified and first.registered_dataset is not None


def test_the_cached_queries_must_match_the_encoder_and_sentences(tiny_run, tmp_path):
    import torch

    out, _, _ = tiny_run
    path = next((out / "cache").glob("queries-*.pt"))
    stored = torch.load(path)
    record = {"encoder_sha256": stored["encoder_sha256"], "sentences_sha256": "0" * 64}
    settings = wave.PROFILES["tiny"]
    relations = wave.read_sources(wave.fewrel_folder(), settings.sources)
    with pytest.raises(ValueError, match="cached queries are of another encoder or other sentences"):
        wave.run_job(settings, "l2p", 2021, relations, stored["queries"], record)  # checked where the job runs


def test_the_paper_profiles_code_path_on_a_fewrel_formatted_folder(tmp_path, monkeypatch):
    """The paper profile reads train_wiki.json and val_wiki.json from $NFNZOO_FEWREL; here the offline
    SemEval file stands in for the training relations and a tiny random BERT for BERT-base."""
    folder = wave.fewrel_folder()
    (tmp_path / "fewrel").mkdir()
    (tmp_path / "fewrel" / "train_wiki.json").write_text((folder / "val_semeval.json").read_text())
    (tmp_path / "fewrel" / "val_wiki.json").write_text((folder / "val_wiki.json").read_text())
    monkeypatch.setenv(wave.FEWREL_VARIABLE, str(tmp_path / "fewrel"))
    paper = wave.PROFILES["paper"]
    assert paper.sources[0].file == "train_wiki.json" and paper.tasks == 10 and paper.train_per_relation == 420
    assert (paper.pool.pool_size, paper.pool.length, paper.pool.top_n) == (20, 8, 4)
    names = tuple(sorted(read_fewrel(tmp_path / "fewrel" / "train_wiki.json", "wiki"))[:3]) + ("wiki:P177",)
    quick = Optimisation(epochs=1, lr=1e-3, batch_size=8)
    profile = dataclasses.replace(
        paper, encoder=EncoderConfig(name="tiny-random", max_length=256), relations=names, tasks=2,
        train_per_relation=6, test_per_relation=2, methods=("wave-cre", "joint"),
        pool=dataclasses.replace(paper.pool, prompt=quick, replay=quick, pseudo_per_relation=4),
        joint=dataclasses.replace(paper.joint, optimisation=quick))
    monkeypatch.setitem(wave.PROFILES, "paper-tiny", profile)
    written = create_track("wave-cre").run("paper-tiny", [2021], tmp_path / "out")
    results = load_results(written[0])
    assert results.task_config["definition"]["benchmark"]["source"] == "fewrel"
    assert results.task_config["definition"]["sources"][0]["file"] == "train_wiki.json"
    monkeypatch.setenv(wave.FEWREL_VARIABLE, str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="empty/train_wiki.json: no such relation file"):
        wave.sequence_of(paper, 2021)


def test_bert_base_needs_the_hub_and_says_so(hub_cache):
    from benchmarks.tracks.wave.encoder import load_encoder

    with pytest.raises(OSError, match="(?s)cannot load the encoder 'bert-base-uncased'.*needs the Hugging Face Hub"):
        load_encoder(EncoderConfig(name="bert-base-uncased"))  # offline, with an empty cache
    with pytest.raises(ValueError, match="unknown encoder 'gpt'"):
        load_encoder(EncoderConfig(name="gpt"))


def test_every_method_has_its_config_recorded():
    for method in wave.METHODS:
        config = wave._method_config(method, wave.PROFILES["default"])
        assert isinstance(config, dict) and json.dumps(config)
    assert wave._method_config("hide-prompt", wave.PROFILES["default"])["pool_size"] == 1
    assert wave._method_config("wave-cre-mixture", wave.PROFILES["default"])["selection"] == "mixture"
