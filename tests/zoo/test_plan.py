"""Planning: deterministic run and checkpoint ids, reproducible draws, seeded run splits."""

from __future__ import annotations

import collections
import copy
import dataclasses
import hashlib

import pytest

from zoo.planning.plan import BEST_EPOCH, assign_splits, configurations, plan_runs, run_definition
from zoo.planning.spec import content_hash, load_spec, spec_from_data


@pytest.fixture(scope="module")
def tiny():
    return load_spec("cnn-mnist", "tiny")


def edited(spec, edit):
    """A validated copy of `spec` with `edit(data)` applied to its plain data."""
    data = copy.deepcopy(spec.to_data())
    edit(data)
    return spec_from_data(data, "test_plan")


def ids(runs) -> list[str]:
    return [r.run_id for r in runs]


def model_ids(runs) -> list[str]:
    return [m for r in runs for m in r.model_ids]


def test_content_hash_is_stable_and_key_order_free():
    # The format is part of every published id: sha256 of compact, key-sorted JSON, truncated.
    assert content_hash({"b": [1, 2.5], "a": "x"}) == content_hash({"a": "x", "b": [1, 2.5]})
    assert content_hash({"b": [1, 2.5], "a": "x"}) == hashlib.sha256(b'{"a":"x","b":[1,2.5]}').hexdigest()[:20]
    assert len(content_hash({}, length=12)) == 12


def test_planning_twice_gives_identical_ids(tiny):
    first, second = plan_runs(tiny), plan_runs(load_spec("cnn-mnist", "tiny"))
    assert first == second
    assert len(first) == 8
    assert [r.index for r in first] == list(range(8))
    assert len(set(ids(first))) == 8
    assert len(set(model_ids(first))) == 8 * 3
    for run in first:
        assert [c.epoch for c in run.checkpoints] == [0, 1, 2]


def test_ids_are_the_documented_content_hashes(tiny):
    definition = content_hash(run_definition(tiny), 64)
    for run in plan_runs(tiny):
        assert run.run_id == content_hash({"definition": definition, "hparams": run.hparams, "seed": run.seed})
        for checkpoint in run.checkpoints:
            expected = hashlib.sha256(f"{run.run_id}/{checkpoint.epoch}".encode()).hexdigest()[:20]
            assert checkpoint.model_id == expected


def test_ids_do_not_depend_on_splits_name_or_description(tiny):
    def unrelated(data):
        data["splits"] = {"seed": 7, "fractions": {"train": 0.5, "test": 0.5}}
        data["name"] = "renamed"
        data["description"] = "another text"

    assert model_ids(plan_runs(edited(tiny, unrelated))) == model_ids(plan_runs(tiny))


def test_same_configuration_has_the_same_id_wherever_it_is_declared(tiny):
    hparams = plan_runs(tiny)[3].hparams
    fixed = edited(tiny, lambda d: d["search_space"].update(fixed=dict(hparams), grid={}, sampled=None))
    grid = edited(tiny, lambda d: d["search_space"].update(fixed={}, grid={k: [v] for k, v in hparams.items()},
                                                           sampled=None))
    assert ids(plan_runs(fixed)) == ids(plan_runs(grid)) == [plan_runs(tiny)[3].run_id]


def test_seeds_and_training_recipe_change_ids(tiny):
    base = set(ids(plan_runs(tiny)))
    two_seeds = plan_runs(edited(tiny, lambda d: d.update(seeds=[0, 1])))
    assert len(two_seeds) == 16 and len(set(ids(two_seeds))) == 16
    assert base < set(ids(two_seeds))
    by_config = collections.defaultdict(set)
    for run in two_seeds:
        by_config[tuple(run.hparams.items())].add(run.seed)
    assert all(seeds == {0, 1} for seeds in by_config.values())
    for edit in (lambda d: d["training"].update(batch_size=64),
                 lambda d: d["dataset"].update(train_size=999),
                 lambda d: d["architecture"].update(channels=8)):
        assert base.isdisjoint(ids(plan_runs(edited(tiny, edit))))


def test_different_hparams_give_different_ids(tiny):
    base = edited(tiny, lambda d: d["search_space"].update(
        fixed={}, sampled=None, grid={"optimizer": ["adam", "sgd"], "learning_rate": [0.1, 0.01], "l2": [0.0],
                                      "init": ["normal"], "init_std": [0.1], "activation": ["relu"],
                                      "dropout": [0.0], "train_fraction": [1.0]}))
    runs = plan_runs(base)
    assert len(runs) == 4 and len(set(ids(runs))) == 4
    assert {(r.hparams["optimizer"], r.hparams["learning_rate"]) for r in runs} == {
        ("adam", 0.1), ("adam", 0.01), ("sgd", 0.1), ("sgd", 0.01)}


def test_repeated_sampled_configuration_is_planned_once(tiny):
    def one_point(data):
        data["search_space"]["sampled"]["axes"] = {"optimizer": {"choice": ["adam"]}}
        data["search_space"]["fixed"] = {"learning_rate": 0.01, "l2": 0.0, "init": "normal", "init_std": 0.1,
                                         "activation": "relu", "dropout": 0.0, "train_fraction": 1.0}

    spec = edited(tiny, one_point)
    assert len(list(configurations(spec))) == 8
    assert len(plan_runs(spec)) == 1


def test_sampled_draws_are_reproducible_and_within_bounds():
    full = load_spec("cnn-mnist")
    spec = edited(full, lambda d: d["search_space"]["sampled"].update(count=500))
    draws = list(configurations(spec))
    assert draws == list(configurations(edited(full, lambda d: d["search_space"]["sampled"].update(count=500))))
    assert len(draws) == 500
    for name, axis in spec.search_space.sampled.axes.items():
        values = [d[name] for d in draws]
        if axis.choice is not None:
            assert set(values) == set(axis.choice), name  # 500 draws hit every choice
        else:
            low, high = axis.uniform or axis.log_uniform
            assert all(low <= v <= high for v in values), name
            assert len(set(values)) > 400, name  # continuous, not stuck
    reseeded = list(configurations(edited(spec, lambda d: d["search_space"]["sampled"].update(seed=1))))
    assert reseeded != draws


def test_log_uniform_draws_spread_over_decades():
    spec = edited(load_spec("cnn-mnist"), lambda d: d["search_space"]["sampled"].update(count=400))
    rates = [d["learning_rate"] for d in configurations(spec)]  # log_uniform [5e-4, 5e-2]
    low_decade = sum(r < 5e-3 for r in rates) / len(rates)
    assert 0.35 < low_decade < 0.65  # a uniform draw would put ~9% below 5e-3


def run_ids(count: int) -> list[str]:
    return [content_hash({"fake_run": i}) for i in range(count)]


def test_assign_splits_is_deterministic_and_partitions_runs(tiny):
    runs = run_ids(1000)
    assignment = assign_splits(runs, tiny)
    assert assignment == assign_splits(list(reversed(runs)), tiny)  # independent of input order
    assert set(assignment) == set(runs)  # every run, each in exactly one split (a dict)
    counts = collections.Counter(assignment.values())
    for split, fraction in tiny.splits.fractions.items():
        assert abs(counts[split] - fraction * len(runs)) <= 1, (split, counts)
    reseeded = assign_splits(runs, edited(tiny, lambda d: d["splits"].update(seed=1)))
    assert collections.Counter(reseeded.values()) == counts and reseeded != assignment


def test_assign_splits_is_stable_when_runs_are_added(tiny):
    # The order is a keyed hash per run, so a run's rank never depends on the other ids.
    runs = run_ids(200)
    first, more = assign_splits(runs, tiny), assign_splits(runs + run_ids(400)[200:], tiny)
    moved = sum(first[r] != more[r] for r in runs)
    assert moved < 0.2 * len(runs)


def test_every_split_gets_a_run_when_there_are_enough(tiny):
    for count in range(3, 40):
        counts = collections.Counter(assign_splits(run_ids(count), tiny).values())
        assert set(counts) == {"train", "validation", "test"}, (count, counts)
        assert sum(counts.values()) == count


def test_too_few_runs_go_to_train_first(tiny):
    assert set(assign_splits(run_ids(1), tiny).values()) == {"train"}
    assert collections.Counter(assign_splits(run_ids(2), tiny).values())["train"] >= 1


def test_train_is_not_emptied_by_a_skewed_split(tiny):
    spec = edited(tiny, lambda d: d["splits"].update(fractions={"train": 0.1, "validation": 0.1, "test": 0.8}))
    for count in range(3, 40):
        counts = collections.Counter(assign_splits(run_ids(count), spec).values())
        assert min(counts[s] for s in ("train", "validation", "test")) >= 1, (count, counts)


def test_integer_spelling_of_a_float_hyperparameter_is_the_same_run(tiny):
    hparams = {"optimizer": "adam", "learning_rate": 1.0, "l2": 0.0, "init": "normal", "init_std": 0.1,
               "activation": "relu", "dropout": 0.0, "train_fraction": 1.0}
    as_floats = edited(tiny, lambda d: d["search_space"].update(fixed=dict(hparams), grid={}, sampled=None))
    as_ints = edited(tiny, lambda d: d["search_space"].update(
        fixed={**hparams, "learning_rate": 1, "dropout": 0, "train_fraction": 1}, grid={}, sampled=None))
    (a,), (b,) = plan_runs(as_floats), plan_runs(as_ints)
    assert b.hparams == a.hparams and all(type(b.hparams[k]) is type(v) for k, v in a.hparams.items())
    assert b.run_id == a.run_id


# --- integer range axes and index-range splits (the INR family's image_index) ---------------

@pytest.fixture(scope="module")
def inr_tiny():
    return load_spec("inr-mnist", "tiny")  # image_index: range(0, 70000, 2500); splits by image index


def test_range_axis_plans_the_runs_of_the_list_it_abbreviates(inr_tiny):
    listed = edited(inr_tiny, lambda d: d["search_space"]["grid"].update(image_index=list(range(0, 70000, 2500))))
    assert plan_runs(inr_tiny) == plan_runs(listed)
    assert [r.hparams["image_index"] for r in plan_runs(inr_tiny)] == list(range(0, 70000, 2500))
    crossed = edited(inr_tiny, lambda d: (d["search_space"]["fixed"].clear(),
                                          d["search_space"]["grid"].update(learning_rate=[1e-3, 1e-4])))
    points = [(c["image_index"], c["learning_rate"]) for c in configurations(crossed)]
    assert len(points) == 56 and points[:3] == [(0, 1e-3), (0, 1e-4), (2500, 1e-3)]  # crossed like any grid axis


def test_index_range_splits_follow_the_key(inr_tiny):
    runs = plan_runs(inr_tiny)
    split_of = assign_splits([r.run_id for r in runs], inr_tiny, runs)
    assert split_of == assign_splits([r.run_id for r in runs], inr_tiny)  # plans itself when not given runs
    for run in runs:
        index = run.hparams["image_index"]
        assert split_of[run.run_id] == ("train" if index < 45000 else "validation" if index < 50000 else "test")
    assert collections.Counter(split_of.values()) == {"train": 18, "validation": 2, "test": 8}
    # a run's split does not depend on the other runs, unlike a cut by fractions
    assert assign_splits([runs[20].run_id], inr_tiny, runs) == {runs[20].run_id: "test"}
    reseeded = edited(inr_tiny, lambda d: d["splits"].update(seed=7))
    assert assign_splits([r.run_id for r in runs], reseeded, runs) == split_of


def test_index_range_splits_refuse_runs_they_cannot_place(inr_tiny):
    with pytest.raises(ValueError, match="is not in the plan of spec 'inr-mnist'"):
        assign_splits(["not-a-run"], inr_tiny)
    # load_spec refuses a plan with uncovered values; a spec built in code can still have one
    narrowed = dataclasses.replace(inr_tiny, splits=dataclasses.replace(
        inr_tiny.splits, by=dataclasses.replace(inr_tiny.splits.by, ranges={"train": (0, 45000)})))
    runs = plan_runs(narrowed)
    with pytest.raises(ValueError, match="image_index=45000 falls in no split of 'inr-mnist'"):
        assign_splits([r.run_id for r in runs], narrowed, runs)


# --- a union of grids (search_space.grids) and the best checkpoint (training.keep_best) ----------

def with_grids(spec, grids, **grid):
    """`spec` (cnn-mnist tiny) with optimizer and learning rate (and the `grid` axes) moved from the
    sampled axes into `grids` (and `grid`)."""
    def edit(data):
        space = data["search_space"]
        for name in ("optimizer", "learning_rate", *grid):
            space["sampled"]["axes"].pop(name, None)
        space.update(grids=grids, grid=grid)
    return edited(spec, edit)


def test_grids_plan_each_sub_grid_in_turn_crossed_with_grid_and_draws(tiny):
    spec = with_grids(tiny, [{"optimizer": ["adam", "rmsprop"], "learning_rate": [1e-3, 1e-2, 1e-1]},
                             {"optimizer": ["sgd"], "learning_rate": [0.5, 0.7]}], dropout=[0.0, 0.5])
    count = spec.search_space.sampled.count
    configs = list(configurations(spec))
    assert len(configs) == (2 * 3 + 1 * 2) * 2 * count
    points = [(c["optimizer"], c["learning_rate"], c["dropout"]) for c in configs[::count]]
    # sorted axis names (dropout, learning_rate, optimizer), last fastest; the first sub-grid, then the second
    assert points[:4] == [("adam", 1e-3, 0.0), ("rmsprop", 1e-3, 0.0), ("adam", 1e-2, 0.0), ("rmsprop", 1e-2, 0.0)]
    assert {p[0] for p in points[:12]} == {"adam", "rmsprop"} and points[5:7] == [("rmsprop", 1e-1, 0.0),
                                                                                   ("adam", 1e-3, 0.5)]
    assert points[12:] == [("sgd", 0.5, 0.0), ("sgd", 0.7, 0.0), ("sgd", 0.5, 0.5), ("sgd", 0.7, 0.5)]
    assert {c["optimizer"] for c in configs if c["learning_rate"] > 0.1} == {"sgd"}  # never crossed across sub-grids
    draws = [{k: c[k] for k in spec.search_space.sampled.axes} for c in configs]
    assert draws[:count] == draws[count:2 * count]  # the same sampled draws under every grid point
    runs = plan_runs(spec)
    assert len(runs) == len(configs) * len(spec.seeds) and plan_runs(spec) == runs


def test_a_single_sub_grid_plans_like_the_grid_it_spells(tiny):
    axes = {"optimizer": ["adam", "sgd"], "learning_rate": [1e-3, 1e-2]}
    as_grids, as_grid = with_grids(tiny, [axes]), with_grids(tiny, [], **axes)
    assert as_grids.search_space.grids and not as_grid.search_space.grids
    assert plan_runs(as_grids) == plan_runs(as_grid)
    assert as_grids.search_space.names() == as_grid.search_space.names()


def test_keep_best_plans_one_more_checkpoint_per_run_with_its_own_id(tiny):
    kept = edited(tiny, lambda d: d["training"].update(keep_best=True))
    plain, runs = plan_runs(tiny), plan_runs(kept)
    assert "keep_best" not in run_definition(tiny)["training"]  # off: the run ids of older specs stay
    assert ids(runs) != ids(plain)  # on: it changes what a run's checkpoints are
    for run in runs:
        *regular, best = run.checkpoints
        assert [(c.epoch, c.best) for c in regular] == [(0, False), (1, False), (2, False)]
        assert (best.epoch, best.best) == (BEST_EPOCH, True)
        assert best.model_id == hashlib.sha256(f"{run.run_id}/best".encode()).hexdigest()[:20]
        assert all(c.model_id == hashlib.sha256(f"{run.run_id}/{c.epoch}".encode()).hexdigest()[:20] for c in regular)
    assert len(set(model_ids(runs))) == 4 * len(runs)
