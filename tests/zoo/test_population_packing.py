"""How runs are packed into trials and populations, and how big a population is."""

from __future__ import annotations

import pytest
import torch

from zoo.distributed.driver import pack_trials
from zoo.families import create_family
from zoo.planning.plan import plan_runs
from zoo.training.population import populations
from zoo.planning.spec import load_spec


def test_trials_hold_whole_populations_and_equal_work():
    family = create_family("cnn")
    spec = load_spec("cnn-mnist")
    runs = plan_runs(spec)[:600]  # sampled: every optimizer, fraction, activation mixed
    assert len({family.population_key(r) for r in runs[:16]}) > 4  # plan order scatters the keys
    trials = pack_trials(runs, family, spec, 4, 16)
    assert len(trials) == 4
    assert sorted(r.run_id for t in trials for r in t) == sorted(r.run_id for r in runs)
    formed = [p for t in trials for p in populations(t, 16, family.population_key)]
    partial = [family.population_key(p[0]) for p in formed if len(p) < 16]
    assert len(partial) == len(set(partial))  # at most one short population per key: they come out full
    naive = [p for i in range(0, len(runs), 150) for p in populations(runs[i:i + 150], 16, family.population_key)]
    assert len(formed) < len(naive) / 2  # far fewer, fuller populations than cutting in plan order
    loads = [sum(family.run_flops(spec, r.hparams) for r in t) for t in trials]
    biggest = max(sum(family.run_flops(spec, r.hparams) for r in p) for p in formed)
    assert max(loads) - min(loads) <= biggest  # balanced to within one population's work
    few = pack_trials(runs[:3], family, spec, 4, 16)  # fewer populations than trials: no empty trial
    assert all(few) and sum(len(t) for t in few) == 3


def test_population_keys_name_what_members_share():
    cnn, transformer, inr = create_family("cnn"), create_family("transformer"), create_family("inr")
    run = plan_runs(load_spec("cnn-mnist", "tiny"))[0]
    h = run.hparams
    assert cnn.population_key(run) == (h["optimizer"], h["train_fraction"], h["activation"])
    run = plan_runs(load_spec("transformer-mnist", "tiny"))[0]
    assert transformer.population_key(run) == (run.hparams["optimizer"], run.hparams["train_fraction"])
    assert inr.population_key(plan_runs(load_spec("inr-mnist", "tiny"))[0]) == ()


@pytest.mark.parametrize("name", ["cnn", "inr", "transformer"])
def test_population_size_is_per_device_and_overridable(name):
    family = create_family(name)
    cpu, gpu = family.population_size_on("cpu"), family.population_size_on(torch.device("cuda"))
    assert cpu == family.POPULATION_SIZES["cpu"] >= 2 and gpu == family.POPULATION_SIZES["cuda"] >= cpu
    assert create_family(name, population_size=3).population_size_on("cuda") == 3
