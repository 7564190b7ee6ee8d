"""Training into staging without Ray: resumable at checkpoint granularity, deterministic."""

from __future__ import annotations

from pathlib import Path

import torch

from zoo.storage.folder import STAGING_FOLDER
from zoo.planning.plan import plan_runs
from zoo.storage.staging import Staging
from zoo.training.worker import train_runs


def snapshot(staging: Staging) -> dict[str, tuple[int, bytes]]:
    return {m: (staging.path(m).stat().st_mtime_ns, staging.path(m).read_bytes()) for m in staging.model_ids()}


def test_fixture_staged_every_planned_checkpoint(tiny_zoo: Path, tiny_zoo_spec):
    planned = sorted(m for run in plan_runs(tiny_zoo_spec) for m in run.model_ids)
    assert Staging(tiny_zoo / STAGING_FOLDER).model_ids() == planned


def test_second_pass_writes_nothing(tiny_zoo_copy: Path, tiny_zoo_spec):
    staging = Staging(tiny_zoo_copy / STAGING_FOLDER)
    runs = plan_runs(tiny_zoo_spec)
    before = snapshot(staging)
    finished = []
    written = train_runs(tiny_zoo_spec, runs, staging, on_run_done=lambda run, n: finished.append((run.run_id, n)))
    assert written == 0
    assert finished == [(run.run_id, 0) for run in runs]  # every run reported, none retrained
    assert snapshot(staging) == before  # same files, same bytes, same mtimes


def test_deleted_checkpoint_is_retrained_byte_identically(tiny_zoo: Path, tiny_zoo_copy: Path, tiny_zoo_spec):
    staging = Staging(tiny_zoo_copy / STAGING_FOLDER)
    runs = plan_runs(tiny_zoo_spec)
    victim_run = runs[2]
    victim = victim_run.checkpoints[1].model_id  # epoch 1: the run must train to reach it
    staging.path(victim).unlink()
    before = snapshot(staging)
    finished = {}
    written = train_runs(tiny_zoo_spec, runs, staging, on_run_done=lambda run, n: finished.update({run.run_id: n}))
    assert written == 1
    assert finished == {run.run_id: (1 if run is victim_run else 0) for run in runs}
    after = snapshot(staging)
    assert set(after) == set(before) | {victim}
    assert {m: after[m] for m in before} == before  # nothing else rewritten
    original = Staging(tiny_zoo / STAGING_FOLDER).path(victim).read_bytes()
    assert after[victim][1] == original  # training is deterministic


def test_only_missing_epochs_of_several_runs_are_written(tiny_zoo_copy: Path, tiny_zoo_spec):
    staging = Staging(tiny_zoo_copy / STAGING_FOLDER)
    runs = plan_runs(tiny_zoo_spec)
    victims = [runs[0].checkpoints[0].model_id, runs[0].checkpoints[2].model_id]  # epoch 0 and the last epoch
    originals = {m: staging.path(m).read_bytes() for m in victims}
    for model_id in victims:
        staging.path(model_id).unlink()
    assert train_runs(tiny_zoo_spec, runs[:1], staging) == 2
    assert {m: staging.path(m).read_bytes() for m in victims} == originals


def test_resume_under_another_thread_count_is_byte_identical(tiny_zoo: Path, tiny_zoo_copy: Path, tiny_zoo_spec):
    staging = Staging(tiny_zoo_copy / STAGING_FOLDER)
    run = min(plan_runs(tiny_zoo_spec), key=lambda r: r.hparams["train_fraction"])  # the cheapest run
    victim = run.checkpoints[-1].model_id
    staging.path(victim).unlink()
    previous = torch.get_num_threads()
    torch.set_num_threads(2)  # the fixture trained on one thread
    try:
        assert train_runs(tiny_zoo_spec, [run], staging) == 1
    finally:
        torch.set_num_threads(previous)
    assert staging.path(victim).read_bytes() == Staging(tiny_zoo / STAGING_FOLDER).path(victim).read_bytes()


def test_best_checkpoint_is_written_under_its_real_epoch_and_each_run_reported_once(tmp_path: Path):
    from zoo.planning.plan import BEST_EPOCH
    from zoo.planning.spec import load_spec

    spec = load_spec("transformer-mnist", "tiny")  # training.keep_best: epochs 1, 2 and the best
    runs = plan_runs(spec)[:2]
    staging = Staging(tmp_path / STAGING_FOLDER)
    finished = []

    def report(run, n):
        finished.append((run.run_id, n))

    assert train_runs(spec, runs, staging, on_run_done=report) == 6
    assert finished == [(run.run_id, 3) for run in runs]  # once per run, after its last (best) checkpoint
    for run in runs:
        *regular, best = run.checkpoints
        assert best.best and best.epoch == BEST_EPOCH
        record = staging.read(best.model_id)
        assert record.metrics["is_best"] is True and record.epoch in (0, 1, 2)  # the real epoch, not the sentinel
        assert not any(staging.read(c.model_id).metrics["is_best"] for c in regular)
        if record.epoch in (1, 2):  # the same weights as that epoch's checkpoint
            same = next(c for c in regular if c.epoch == record.epoch)
            weights = staging.read(same.model_id).weights
            assert all(torch.equal(record.weights[k], weights[k]) for k in weights)
    # only the best is missing: the run retrains, writes it alone, and is reported once
    staging.path(runs[0].checkpoints[-1].model_id).unlink()
    finished.clear()
    assert train_runs(spec, runs, staging, on_run_done=report) == 1
    assert sorted(finished) == sorted([(runs[0].run_id, 1), (runs[1].run_id, 0)])
