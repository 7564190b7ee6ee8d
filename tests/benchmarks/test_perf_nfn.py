"""`benchmarks.perf.nfn` runs end to end on a tiny configuration and prints sane figures."""

from __future__ import annotations

import pytest

from benchmarks.perf import nfn as bench
from nfn_models import list_models


def _table_rows(output: str, space: str = "siren") -> dict[str, list[str]]:
    """model name -> the printed row's fields, for the rows of the one space measured."""
    lines = output.strip().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("space"))
    rows = {}
    for line in lines[header + 1:]:
        if not line.startswith(space):
            break
        fields = line.split()
        rows[fields[1]] = fields
    return rows


def test_prints_a_row_per_model_with_sane_numbers(capsys):
    models = ["mlp", "np"]  # a model without a reference and one with
    bench.main(["--spaces", "siren", "--models", ",".join(models), "--batch", "4", "--eval-batch", "8",
                "--repeat", "2", "--threads", "1", "--memory-repeat", "1"])
    rows = _table_rows(capsys.readouterr().out)
    expected = models + ([bench.REFERENCE_PREFIX + "np"] if bench.reference_available() else [])
    assert sorted(rows) == sorted(expected)
    for name, fields in rows.items():
        params, train_ms, eval_rate, peak_mb = (float(f.replace(",", "")) for f in fields[2:6])
        assert params > 0 and train_ms > 0 and eval_rate > 0, (name, fields)
        assert 0 < peak_mb < 2000, (name, fields)  # a tiny step: above zero, far below the machine
    if bench.REFERENCE_PREFIX + "np" in rows:
        ours, theirs = rows["np"], rows[bench.REFERENCE_PREFIX + "np"]
        assert ours[2] == theirs[2]  # the same parameter count as the nfn stack
        assert len(ours) == 9 and all(float(r) > 0 for r in ours[6:])  # ours / nfn ratios
        assert len(theirs) == 6


def test_inr_task_rows_time_each_models_task_presets(capsys):
    # the MLP alone: every preset it has is a row (a paper-width NFN's rows cost ~10 s more, and each row's
    # memory is one more fresh process)
    bench.main(["--spaces", "inr-tasks", "--models", "mlp", "--batch", "4", "--eval-batch", "8",
                "--repeat", "1", "--threads", "1", "--memory-repeat", "1"])
    rows = _table_rows(capsys.readouterr().out, "inr-tasks")
    assert sorted(rows) == sorted(f"mlp@{p}" for p in bench.INR_TASK_PRESETS)
    for name, fields in rows.items():
        assert all(float(f.replace(",", "")) > 0 for f in fields[2:6]), (name, fields)
    # the editing MLP outputs one value per SIREN parameter (1,185) from 3 hidden layers of 1,000
    # (its input standardization has no parameters), plus the task's 6 learned scales
    linear = [(1185, 1000), (1000, 1000), (1000, 1000), (1000, 1185)]
    assert int(rows["mlp@inr-editing"][2].replace(",", "")) == sum(i * o + o for i, o in linear) + 6


def test_the_default_models_are_the_registry():
    assert bench.row_names(list_models(), with_reference=False) == list_models()
    names = bench.row_names(list_models(), with_reference=True)
    assert {n for n in names if n.startswith(bench.REFERENCE_PREFIX)} == {
        bench.REFERENCE_PREFIX + m for m in bench.REFERENCES if m in list_models()}


def test_an_unknown_model_is_an_error_listing_the_valid_ones():
    with pytest.raises(Exception, match="mlp"):
        bench.main(["--models", "no_such_model", "--spaces", "siren"])


def test_transformer_rows_time_the_graph_models_at_the_suites_presets(capsys):
    bench.main(["--spaces", "transformer", "--models", "scalegmn,mlp", "--batch", "2", "--eval-batch", "2",
                "--repeat", "1", "--threads", "1", "--memory-repeat", "1"])
    rows = _table_rows(capsys.readouterr().out, "transformer")
    assert sorted(rows) == ["mlp", f"scalegmn@{bench.GRAPH_TRANSFORMER_MODELS['scalegmn']}"]
    assert all(float(f.replace(",", "")) > 0 for fields in rows.values() for f in fields[2:6])
