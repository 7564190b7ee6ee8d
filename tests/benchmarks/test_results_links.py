"""A results file and its sidecars are written without following a link in the results folder
(`benchmarks.files.write_with_sidecars` through `zoo.storage.nofollow`)."""

from __future__ import annotations

import json

import pytest

from benchmarks.files import write_with_sidecars
from zoo.storage.nofollow import LinkRefused

VICTIM_TEXT = "the victim's own bytes\n"


def test_a_linked_sidecar_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    results = tmp_path / "results"
    results.mkdir()
    (results / "mlp.predictions.csv").symlink_to(victim)
    with pytest.raises(LinkRefused, match="mlp.predictions.csv is a symbolic link; nfnzoo never writes through links"):
        write_with_sidecars(results / "mlp.json", {"model": "mlp"},
                            {"predictions": ("mlp.predictions.csv", b"model_id,prediction\n")})
    assert victim.read_text() == VICTIM_TEXT


def test_plain_results_folder_still_works(tmp_path):
    """The negative control."""
    results = tmp_path / "results"
    results.mkdir()
    write_with_sidecars(results / "mlp.json", {"model": "mlp"},
                        {"predictions": ("mlp.predictions.csv", b"model_id,prediction\n")})
    assert json.loads((results / "mlp.json").read_text())["predictions"] == "mlp.predictions.csv"
    assert (results / "mlp.predictions.csv").read_bytes() == b"model_id,prediction\n"
