"""A plugin model whose output breaks the contract (non-finite values, a non-finite loss, a wrong
shape) stops `nfnzoo bench run` with one line naming the model, the seed and the step; the seeds
already trained are kept as the harness's seed records, and the same command resumes from them.

The models live in a module of their own (an outside package, imported by its path MODULE:CLASS)
and run through the real CLI in fresh processes (`tests/forked_cli.py`) on the real tiny zoo.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest

MODULE = "flaky_models"  # the outside package: one module in the processes' working directory
MODELS_SOURCE = textwrap.dedent('''
    """Models that break nfnzoo's model contract in one way each (and one that keeps it)."""
    import dataclasses
    import os

    import torch
    from torch import nn


    @dataclasses.dataclass(frozen=True)
    class Config:
        out_features: int = 1


    class Linear(nn.Module):
        """A linear layer on the flattened weights: keeps the contract (the negative control)."""

        Config = Config
        symmetries = ()
        weight_spaces = ("feedforward",)
        def __init__(self, weight_space, out_features=1):
            super().__init__()
            self.calls = 0
            self.linear = nn.Linear(weight_space.num_params, out_features)

        def forward(self, weights):
            self.calls += self.training
            return self.linear(weights.flatten() / 10)  # (B, out_features)


    class NanFromSecondModel(Linear):
        """NaN in 3 rows of every output of the models trained after NAN_FROM_MODEL - 1 others in this process
        (2: seed 1's). Counted at a model's first training step: the claims check before training builds
        models too, in eval mode, and they stay finite."""

        trained = 0

        def forward(self, weights):
            if self.training and not hasattr(self, "order"):
                NanFromSecondModel.trained += 1
                self.order = NanFromSecondModel.trained
            output = super().forward(weights)
            if getattr(self, "order", 0) >= int(os.environ.get("NAN_FROM_MODEL", "1000000")):
                output = output.clone()
                output[:3] = float("nan")
            return output


    class NanFromFifthStep(Linear):
        """Finite for four training steps, then NaN everywhere (a training that diverged)."""

        def forward(self, weights):
            output = super().forward(weights)
            return output * float("nan") if self.calls >= 5 else output


    class Overflowing(Linear):
        """Finite outputs too large to square in float32: the MSE loss is inf."""

        def forward(self, weights):
            return super().forward(weights) * 0 + 1e30


    class Flat(Linear):
        """(B,) where the contract says (B, 1)."""

        def forward(self, weights):
            return super().forward(weights).squeeze(-1)


    class Wide(Linear):
        """(B, 2) for a task that sets out_features 1."""

        def forward(self, weights):
            return super().forward(weights).repeat(1, 2)


    class Pair(Linear):
        """A tuple, not a tensor."""

        def forward(self, weights):
            return super().forward(weights), None
''')
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """The CLI in fresh processes forked from one warm server whose working directory holds the plugin
    module (`python -m` puts the working directory on the path, so MODULE:CLASS imports it)."""
    from forked_cli import ForkedCLI

    folder = tmp_path_factory.mktemp("plugin_package")
    (folder / f"{MODULE}.py").write_text(MODELS_SOURCE)
    forked = ForkedCLI(folder)
    forked.folder = folder
    yield forked
    forked.close()


def _bench(cli, tmp_path, tiny_zoo, model: str, seeds: str, *more: str, **env: str):
    out = tmp_path / "results" / "run.json"
    argv = ["bench", "run", "--task", "generalization", "--model", f"{MODULE}:{model}", "--data", str(tiny_zoo),
            "--seeds", seeds, "--out", str(out), "--device", "cpu", "--set", "task.epochs=2", *more]
    environment = {**{k: v for k, v in os.environ.items() if k != "NAN_FROM_MODEL"}, "HF_HUB_OFFLINE": "1",
                   "HF_DATASETS_OFFLINE": "1", "RAY_AUTH_MODE": "disabled", "HF_HOME": str(tmp_path / "hf"),
                   "PYTHONWARNINGS": "ignore", **env}
    return cli.run(argv, cwd=cli.folder, env=environment, timeout=TIMEOUT_S), out


def _error_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert lines and lines[-1].startswith("nfnzoo bench: error: "), done.stderr
    return lines[-1].removeprefix("nfnzoo bench: error: ")


def test_a_nan_output_names_the_model_seed_and_step_and_the_rerun_resumes(cli, tmp_path, tiny_zoo):
    failed, out = _bench(cli, tmp_path, tiny_zoo, "NanFromSecondModel", "0,1", NAN_FROM_MODEL="2")
    assert failed.returncode == 1, failed.stderr
    error = _error_line(failed)
    assert error.startswith(f"model {MODULE}:NanFromSecondModel, seed 1, epoch 1 step 1: output is not finite "
                            "(3 of 12 values NaN); expected finite values"), error
    seeds = out.with_name("run.seeds")
    assert error.endswith(f"seed0 finished and is kept in {seeds}: the same command resumes from it"), error
    record = seeds / "seed0.json"
    kept = record.read_bytes()
    assert not out.exists() and not (seeds / "seed1.json").exists()

    resumed, _ = _bench(cli, tmp_path, tiny_zoo, "NanFromSecondModel", "0,1")  # the model fixed: no NaN
    assert resumed.returncode == 0, resumed.stderr
    assert f"1 of 2 job(s) already done in {seeds}; running 1" in resumed.stderr
    results = json.loads(out.read_text())
    first = json.loads(kept)["outcome"]["entry"]
    assert results["per_seed"][0] == first  # seed 0's record, not a retrained seed (its time would differ)
    assert not seeds.exists()  # the results hold every seed now
    assert [entry["seed"] for entry in results["per_seed"]] == [0, 1]


@pytest.mark.parametrize("model, more, expected", [
    ("NanFromFifthStep", ["--set", "task.batch_size=4"],
     "seed 0, epoch 2 step 2: output is not finite (4 of 4 values NaN); expected finite values"),
    ("Overflowing", [], "seed 0, epoch 1 step 1: loss is not finite (inf) on a finite output; expected finite values"),
    ("Flat", [], "seed 0, epoch 1 step 1: output has shape (12,); expected a tensor (B, out_features) = (12, 1)"),
    ("Wide", [], "seed 0, epoch 1 step 1: output has shape (12, 2); expected a tensor (B, out_features) = (12, 1)"),
    ("Pair", [], "seed 0, epoch 1 step 1: output is a tuple; expected a tensor (B, out_features) = (12, 1)"),
])
def test_each_broken_output_is_one_line(cli, tmp_path, tiny_zoo, model, more, expected):
    done, out = _bench(cli, tmp_path, tiny_zoo, model, "0", *more)
    assert done.returncode == 1, done.stderr
    error = _error_line(done)
    assert error.startswith(f"model {MODULE}:{model}, {expected}"), error
    assert error.endswith("; no seed finished") and not out.exists()


def test_a_model_that_keeps_the_contract_trains(cli, tmp_path, tiny_zoo):
    done, out = _bench(cli, tmp_path, tiny_zoo, "Linear", "0")
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    assert results["model"] == "Linear" and results["model_source"]["import_path"] == f"{MODULE}:Linear"
    assert results["claims"]["verdict"] == "holds" and results["claims"]["groups"] == []  # claims nothing


def test_the_watch_on_a_gpu_reads_once_per_epoch_and_still_names_the_step():
    import torch

    from benchmarks.outputs import FiniteWatch, ModelOutputError

    watch = FiniteWatch(torch.device("cpu"), every_step=False)  # as on a GPU: nothing read until `check`
    watch.start(3)
    finite, loss = torch.ones(4, 1), torch.tensor(0.5)
    watch.add(finite, loss)
    watch.add(torch.tensor([[1.0], [float("inf")], [float("nan")], [2.0]]), loss)
    watch.add(finite, torch.tensor(float("nan")))
    with pytest.raises(ModelOutputError, match=r"^epoch 3 step 2: output is not finite \(2 of 4 values NaN or inf: "
                                               r"1 NaN, 1 inf\); expected finite values"):
        watch.check()
    watch.start(1)
    watch.add(finite, loss)
    watch.check()  # a finite epoch passes
    watch.add(finite, torch.tensor(float("inf")))
    with pytest.raises(ModelOutputError, match=r"^epoch 1 step 2: loss is not finite \(inf\) on a finite output"):
        watch.check()


def test_the_python_api_raises_the_same_line(tiny_zoo, tmp_path):
    import torch

    import benchmarks
    from benchmarks.outputs import ModelOutputError

    class HalfNan(torch.nn.Linear):
        def forward(self, weights):
            output = super().forward(weights.flatten() / 10)
            return torch.where(torch.arange(len(output)).unsqueeze(1) % 2 == 0, output, float("nan"))

    with pytest.raises(ModelOutputError) as error:
        benchmarks.evaluate(lambda space: HalfNan(space.num_params, 1), data=tiny_zoo, seeds=[3],
                            out=tmp_path / "half.json", name="half_nan", task_overrides={"epochs": 1})
    assert str(error.value).startswith("model half_nan, seed 3, epoch 1 step 1: output is not finite (6 of 12 values "
                                       "NaN)"), error.value
    assert not (tmp_path / "half.json").exists()


def _outcome(value: float) -> dict:
    return {"metric": value}


def test_a_job_whose_outcome_no_record_can_hold_fails_alone(tmp_path):
    from benchmarks.jobs import Job, JobsFailed, UnrecordableOutcome, run_jobs

    jobs = [Job("good", _outcome, (1.0,), "a"), Job("nan", _outcome, (float("nan"),), "b"),
            Job("after", _outcome, (2.0,), "c")]
    with pytest.raises(JobsFailed) as failed:
        run_jobs(jobs, tmp_path)
    (key, error), = failed.value.errors
    assert key == "nan" and isinstance(error, UnrecordableOutcome)
    assert str(error).startswith("nan: its outcome cannot be recorded as JSON (Out of range float values")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["after.json", "good.json"]  # the others kept
    assert run_jobs(jobs[::2], tmp_path) == {"good": {"metric": 1.0}, "after": {"metric": 2.0}}  # resumed, not rerun
