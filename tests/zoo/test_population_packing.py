"""How runs are packed into trials and populations, and how big a population is."""

from __future__ import annotations

import pytest
import torch

from zoo.driver import pack_trials
from zoo.families import create_family
from zoo.plan import plan_runs
from zoo.population import populations
from zoo.spec import load_spec


def test_trials_hold_whole_populations_in_plan_order():
    family = create_family("cnn")
    runs = plan_runs(load_spec("cnn-mnist"))[:600]  # sampled: every optimizer, fraction, activation mixed
    assert len({family.population_key(r) for r in runs[:16]}) > 4  # plan order scatters the keys
    trials = pack_trials(runs, family, 64)
    assert sorted(r.run_id for t in trials for r in t) == sorted(r.run_id for r in runs)
    keys = [family.population_key(r) for t in trials for r in t]
    assert keys == sorted(keys)  # one stretch per key, so populations fill up
    position = {r.run_id: i for i, r in enumerate(runs)}
    for key in set(keys):  # within a key, plan order
        order = [position[r.run_id] for t in trials for r in t if family.population_key(r) == key]
        assert order == sorted(order)
    packed = [p for t in trials for p in populations(t, 8, family.population_key)]
    naive = [p for i in range(0, len(runs), 64) for p in populations(runs[i:i + 64], 8, family.population_key)]
    assert len(packed) < len(naive) / 2  # far fewer, fuller populations than cutting in plan order


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
