"""Submission checks that need only the results file: each rule, and all problems at once."""

from __future__ import annotations

import copy
import math

import pytest

from leaderboards.validate import check_results


def test_valid_results_have_no_problems(make_data):
    results, problems = check_results(make_data(), "r.json")
    assert problems == []
    assert results.model == "statnn" and results.seeds == (0, 1, 2)


def mutated(data, change):
    data = copy.deepcopy(data)
    change(data)
    return data


RULES = {
    "too few seeds": (lambda d: (d.update(seeds=[0, 1]), d["per_seed"].pop(), d.update(summary=_summary(d))),
                      "at least 3 seeds"),
    "repeated seeds": (lambda d: (d.update(seeds=[0, 0, 2]), d["per_seed"][1].update(seed=0)), "seeds must be unique"),
    "per_seed mismatch": (lambda d: d.update(seeds=[0, 1, 5]), "per_seed covers the seeds [0, 1, 2]"),
    "mean off": (lambda d: d["summary"]["kendall_tau"].update(mean=0.9), "summary.kendall_tau.mean is 0.9"),
    "std off": (lambda d: d["summary"]["rmse"].update(std=d["summary"]["rmse"]["std"] + 1e-5),
                "summary.rmse.std"),
    "summary lacks a metric": (lambda d: d["summary"].pop("r2"), "summary lists the metrics"),
    "unequal metrics": (lambda d: d["per_seed"][2]["metrics"].pop("r2"), "report different metrics"),
    "task metric missing": (lambda d: ([e["metrics"].pop("rmse") for e in d["per_seed"]], d["summary"].pop("rmse")),
                            "missing ['rmse']"),
    "unknown task": (lambda d: d.update(task="no-such-task"), "unknown benchmark task 'no-such-task'"),
    "bad model name": (lambda d: d.update(model="../statnn"), "model name '../statnn'"),
    "bad hash": (lambda d: d["dataset"].update(dataset_hash="abc"), "not a sha256 hex digest"),
    "no params": (lambda d: d.update(num_params=0), "num_params must be from 1 to"),
}


def _summary(data):
    from benchmarks.results import summarize

    return summarize([entry["metrics"] for entry in data["per_seed"]])


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_rejects(rule, make_data):
    change, message = RULES[rule]
    _, problems = check_results(mutated(make_data(), change), "r.json")
    assert any(message in problem for problem in problems), problems


def test_a_mean_within_tolerance_is_accepted(make_data):
    data = mutated(make_data(),
                   lambda d: d["summary"]["kendall_tau"].update(mean=d["summary"]["kendall_tau"]["mean"] + 5e-7))
    assert check_results(data, "r.json")[1] == []


def test_every_problem_is_reported(make_data):
    def break_many(d):
        d.update(num_params=-1, model="bad name")
        d["summary"]["r2"]["mean"] = 0.0

    _, problems = check_results(mutated(make_data(), break_many), "r.json")
    assert len(problems) == 3


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(extra=1), "r.json: extra: unknown key"),
    (lambda d: d.pop("hardware"), "r.json: hardware: missing"),
    (lambda d: d["per_seed"][0].update(train_time_s="fast"), "per_seed[0].train_time_s: expected a number"),
    (lambda d: d["per_seed"][1]["metrics"].update(r2=math.nan), "per_seed[1].metrics.r2: expected a finite number"),
    (lambda d: d.update(schema_version=2), "schema_version: expected 1"),
])
def test_schema_errors_name_the_file_and_key(change, message, make_data):
    results, problems = check_results(mutated(make_data(), change), "r.json")
    assert results is None
    assert len(problems) == 1 and message in problems[0]
