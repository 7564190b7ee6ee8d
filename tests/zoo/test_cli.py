"""The `nfnzoo` zoo subcommands: thin wrappers that print outcomes and fail cleanly."""

from __future__ import annotations

import re

import pytest
import yaml

from zoo.cli import build_parser, main
from zoo.storage.folder import read_manifest
from zoo.planning.spec_files import SPECS_DIR

CONFIG = "cnn-mnist"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_zoo_subcommands_are_registered():
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    assert {"generate", "pack", "info", "verify", "publish"} <= set(subparsers.choices)


def test_info_prints_counts_distribution_and_architecture(tiny_zoo, capsys):
    code, out, err = run(["info", tiny_zoo], capsys)
    assert code == 0, err
    entry = read_manifest(tiny_zoo)["configs"][CONFIG]
    (arch_id,) = entry["architectures"]
    assert f"[{CONFIG}] family=cnn profile=tiny" in out
    assert "checkpoints: 18 of 18 planned; runs: 6; status: ok 18" in out
    assert "splits: train 12 (4 runs), validation 3 (1 runs), test 3 (1 runs)" in out
    assert f"dataset hash: {entry['dataset_hash']}" in out
    assert len(re.findall(r"^  epoch +\d+ \( +6 rows\)", out, flags=re.M)) == 3  # epochs 0, 1, 2
    assert f"architecture {arch_id}: 4,970 parameters" in out
    assert re.search(r"^  conv1\.weight +\(16, 1, 3, 3\) +weight$", out, flags=re.M)
    assert re.search(r"^  dense\.bias +\(10,\) +bias$", out, flags=re.M)


def test_info_reads_a_multi_shard_zoo(tiny_zoo_copy, capsys):
    assert run(["pack", tiny_zoo_copy, "--shard-mb", "0.05"], capsys)[0] == 0
    assert len(read_manifest(tiny_zoo_copy)["configs"][CONFIG]["files"]) > 3
    code, out, _ = run(["info", tiny_zoo_copy, "--config", CONFIG], capsys)
    assert code == 0 and "checkpoints: 18 of 18 planned; runs: 6" in out


def test_info_breaks_the_final_epoch_down_and_plots_it(tiny_zoo, tmp_path, capsys):
    import pyarrow.parquet as pq

    entry = read_manifest(tiny_zoo)["configs"][CONFIG]
    table = pq.read_table([tiny_zoo / f["path"] for f in entry["files"]], columns=["epoch", "activation"]).to_pandas()
    per_activation = table[table["epoch"] == 2]["activation"].value_counts()
    png = tmp_path / "final.png"
    code, out, err = run(["info", tiny_zoo, "--by", "activation", "--plot", str(png)], capsys)
    assert code == 0, err
    assert "test_accuracy at the final epoch (2) by activation (ok rows):" in out
    for activation, count in per_activation.items():
        assert re.search(rf"^  {activation} +\( +{count} runs\)", out, flags=re.M)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {png}" in out
    code, _, err = run(["info", tiny_zoo, "--by", "colour"], capsys)
    assert code == 1 and "has no column 'colour'; its columns: model_id" in err


def test_info_counts_each_run_once_when_the_zoo_keeps_best_checkpoints(tiny_transformer_zoo, capsys):
    """A best-validation copy of the last epoch is not a second final checkpoint."""
    code, out, err = run(["info", tiny_transformer_zoo, "--by", "optimizer"], capsys)
    assert code == 0, err
    counts = dict(re.findall(r"^  (adam|sgd_momentum) +\( +(\d+) runs\)", out, flags=re.M))
    assert counts == {"adam": "8", "sgd_momentum": "8"}, out


def test_info_errors_are_clean(tiny_zoo, tmp_path, capsys):
    code, _, err = run(["info", tiny_zoo, "--config", "cnn-cifar"], capsys)
    assert code == 1 and "nfnzoo info: error:" in err and "it holds ['cnn-mnist']" in err
    code, _, err = run(["info", tmp_path], capsys)
    assert code == 1 and "is not a packed zoo" in err and "Traceback" not in err


def test_generate_dry_run_prints_the_plan_size(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["generate", CONFIG, "--profile", "tiny", "--dry-run"], capsys)
    assert code == 0, err
    assert "cnn-mnist (tiny): 8 runs, 24 checkpoints" in out
    assert "parameters per checkpoint: 4,970" in out and "training FLOPs" in out and "expected dataset size" in out
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing
    code, out, _ = run(["generate", CONFIG, "--profile", "demo", "--dry-run"], capsys)
    assert code == 0 and "cnn-mnist (demo): 96 runs, 384 checkpoints" in out


def test_generate_unknown_spec_lists_the_bundled_ones(capsys):
    code, out, err = run(["generate", "cnn-nope", "--dry-run"], capsys)
    assert code == 1 and out == ""
    assert "nfnzoo generate: error: no spec file 'cnn-nope'; bundled specs: " in err and "cnn-mnist" in err
    assert "Traceback" not in err


def test_generate_invalid_spec_or_profile_is_a_clean_error(tmp_path, capsys):
    raw = yaml.safe_load((SPECS_DIR / "cnn-mnist.yaml").read_text())
    raw["training"]["epochz"] = 3
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(raw))
    code, _, err = run(["generate", path, "--dry-run"], capsys)
    assert code == 1 and f"{path}: training.epochz: unknown key" in err
    code, _, err = run(["generate", CONFIG, "--profile", "huge", "--dry-run"], capsys)
    assert code == 1 and "no profile 'huge'; available: ['bench', 'demo', 'suite-v2', 'tiny']" in err


def test_generate_bad_device_or_population_size_is_a_clean_error(tmp_path, capsys):
    code, _, err = run(["generate", CONFIG, "--profile", "tiny", "--out", tmp_path, "--device", "tpu-ish"], capsys)
    assert code == 1 and "unknown device 'tpu-ish'" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_info:  # argparse refuses it (tests/zoo/test_generate_checks.py)
        run(["generate", CONFIG, "--profile", "tiny", "--out", tmp_path, "--population-size", "0"], capsys)
    assert exit_info.value.code == 2
    assert "argument --population-size: must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "staging").exists()  # refused before anything was written


def test_pack_command_reports_and_warns_when_incomplete(tiny_zoo_copy, tiny_zoo_spec, capsys):
    code, out, _ = run(["pack", tiny_zoo_copy], capsys)
    assert code == 0
    assert f"packed {CONFIG}: train 12, validation 3, test 3 (3 shards)" in out
    next((tiny_zoo_copy / "staging").rglob("*.safetensors")).unlink()
    code, _, err = run(["pack", tiny_zoo_copy, "--config", CONFIG], capsys)
    assert code == 1 and "incomplete: 17 of 18 planned checkpoints are staged" in err and "--allow-incomplete" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(["pack", tiny_zoo_copy, "--config", CONFIG, "--allow-incomplete"], capsys)
    assert code == 0 and "warning: incomplete: 17 of 18 planned checkpoints are packed" in err
    code, _, err = run(["verify", tiny_zoo_copy], capsys)
    assert code == 1 and "incomplete, 17 of 18 planned checkpoints packed" in err
    code, out, err = run(["verify", tiny_zoo_copy, "--allow-incomplete"], capsys)
    assert code == 0 and "warning: config cnn-mnist: incomplete, 17 of 18" in err and out.strip().endswith("ok")
    code, out, _ = run(["info", tiny_zoo_copy], capsys)
    assert code == 0 and "INCOMPLETE: 17 of 18 planned checkpoints" in out


def test_pack_command_on_an_empty_folder_fails_cleanly(tmp_path, capsys):
    code, _, err = run(["pack", tmp_path], capsys)
    assert code == 1 and "has no staged zoo" in err


def test_missing_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as caught:
        main([])
    assert caught.value.code == 2
    assert "COMMAND" in capsys.readouterr().err
