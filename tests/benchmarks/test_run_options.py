"""A run's options as one checked record (`benchmarks.run_options`): bad values are refused when the
record is made, before any data is read, and the record travels whole (and pickled, to Ray)."""

import pickle

import pytest
import torch

from benchmarks.harness import run_benchmark
from benchmarks.run_options import Placement, RunOptions
from benchmarks.suite import run_suite


@pytest.mark.parametrize("seeds, message", [([], "at least one seed"), ([0, 0], "unique"), ([-1], "from 0 to"),
                                            ([True], "integers")])
def test_bad_seeds_are_refused_when_the_options_are_made(seeds, message):
    with pytest.raises(ValueError, match=message):
        RunOptions(seeds)
    with pytest.raises(ValueError, match=message):
        RunOptions().replace(seeds=seeds)  # a changed copy is checked again


@pytest.mark.parametrize("changes, message", [({"workers": 0}, "workers must be at least 1"),
                                              ({"workers": True}, "workers must be at least 1"),
                                              ({"gpus_per_job": -1.0}, "gpus per job"),
                                              ({"gpus_per_job": float("nan")}, "gpus per job")])
def test_bad_placements_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        Placement(**changes)


def test_the_options_hold_their_own_copies_and_survive_pickling():
    overrides = {"hidden_sizes": [8]}
    options = RunOptions([2, 0], model_overrides=overrides, placement=Placement(workers=2, gpus_per_job=0.5))
    overrides["hidden_sizes"] = [16]
    overrides["extra"] = 1
    assert options.model_overrides == {"hidden_sizes": [8]}  # the caller's later changes are not the run's
    assert options.seeds == (2, 0) and options.placement.gpus_per_job == 0.5
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(TypeError, match="expected a Placement"):
        RunOptions(placement={"workers": 2})


def test_a_placement_names_where_its_jobs_run():
    assert Placement().job_device() == ("cuda" if torch.cuda.is_available() else "cpu")
    assert Placement(device="cpu", workers=3).job_device() == "cpu"
    with pytest.raises(ValueError, match="needs GPUs per job"):
        Placement(device="cuda", workers=2).job_device()


def test_a_suite_refuses_model_overrides_before_it_reads_data(tmp_path):
    missing = tmp_path / "no-such-zoo"
    with pytest.raises(ValueError, match="model overrides \\['hidden_sizes'\\] have no entry"):
        run_suite("cnn-generalization", missing, tmp_path / "out", RunOptions(model_overrides={"hidden_sizes": [8]}))
    assert not (tmp_path / "out").exists()


def test_a_run_with_bad_placement_is_refused_before_its_data_is_read(tmp_path):
    missing = tmp_path / "no-such-zoo"  # a read would fail with the folder's name instead
    options = RunOptions(placement=Placement(device="cuda", workers=2))
    with pytest.raises(ValueError, match="needs GPUs per job"):
        run_benchmark("generalization", "mlp", missing, None, options, tmp_path / "r.json")
