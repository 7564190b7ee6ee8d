"""`nfnzoo bench check-model` on plugins that fight the check: a layer too large to allocate is refused
in `bench run`'s one line before anything is built (run under a memory limit it would exceed), and a
forward pass that ends its process (`os._exit(0)`, a signal) or raises `SystemExit` or `KeyboardInterrupt`
is no pass: exit 1 and one line naming the model and the check that did not finish. The console
script runs as a user runs it, in the plugin's folder, the folder on PYTHONPATH."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.check_model import build_model, space
from benchmarks.tasks.limits import MAX_MODEL_PARAMETERS
from memory_limit import GIB, run_limited
from zoo.cli import main

NFNZOO = Path(sys.executable).parent / "nfnzoo"

PLUGIN = textwrap.dedent('''
    import dataclasses
    import os
    import signal
    import sys

    import torch
    from torch import nn


    @dataclasses.dataclass(frozen=True)
    class MomentsConfig:
        out_features: int = 1


    class Honest(nn.Module):
        """Two permutation-invariant moments of each tensor's entries, then a linear map."""

        Config = MomentsConfig
        symmetries = ("permutation",)
        weight_spaces = ("feedforward",)

        def __init__(self, weight_space, out_features: int = 1):
            super().__init__()
            self.head = nn.Linear(2 * len(weight_space.tensors), out_features)

        def forward(self, weights):
            flat = [t.reshape(len(weights), -1) for t in weights.tensors]
            return self.head(torch.stack([m for f in flat for m in (f.mean(1), f.abs().mean(1))], dim=1))


    class Huge(Honest):
        """A 4e9-parameter layer declared in its constructor (16 GB of float32), no size field to shrink."""

        def __init__(self, weight_space, out_features: int = 1):
            super().__init__(weight_space, out_features)
            self.huge = nn.Linear(200_000, 20_000)


    class ExitsZero(Honest):
        def forward(self, weights):
            os._exit(0)


    class SysExit(Honest):
        def forward(self, weights):
            sys.exit(0)


    class Interrupts(Honest):
        def forward(self, weights):
            raise KeyboardInterrupt


    class KillsItself(Honest):
        def forward(self, weights):
            os.kill(os.getpid(), signal.SIGKILL)


    class ExitsOnSmall(Honest):
        """Honest, bar members whose every entry is below 0.05 (the last magnitude): it ends the process there."""

        def forward(self, weights):
            if max(t.abs().max() for t in weights.tensors) < 0.05:
                os._exit(0)
            return super().forward(weights)
''')


@pytest.fixture
def plugin(tmp_path) -> Path:
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "hostile_models.py").write_text(PLUGIN)
    return folder


def _check_model(plugin: Path, model: str, *more: str, limit: int = 3 * GIB):
    env = {**os.environ, "PYTHONPATH": str(plugin), "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
    return run_limited([str(NFNZOO), "bench", "check-model", f"hostile_models:{model}", "--seeds", "0", *more],
                       limit_bytes=limit, timeout=300, env=env, cwd=plugin)


def _one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfnzoo bench") and ": error: " in lines[0], result.describe()
    return lines[0]


def test_a_huge_layer_is_refused_in_one_line_before_it_is_built(plugin):
    result = _check_model(plugin, "Huge", limit=2 * GIB)  # a real build needs 16 GB: killed, or a failed allocation
    assert not result.oom_killed, result.describe()
    assert result.returncode == 1, result.describe()
    error = _one_line(result)
    parameters = 200_000 * 20_000 + 20_000 + 2 * len(space("cnn-relu").tensors) + 1  # the layer and the head
    assert error.endswith(  # `bench run`'s line (`model_size_problem`)
        f"error: model 'hostile_models:Huge' with its defaults has {parameters:,} parameters and does not fit in "
        f"memory: expected at most {MAX_MODEL_PARAMETERS:,} (MAX_MODEL_PARAMETERS); a width or hidden size "
        "too large?"), error
    assert result.stdout == ""  # no table: nothing was checked


def test_an_honest_plugin_under_the_same_limit_passes_and_says_its_size(plugin):  # the negative control
    result = _check_model(plugin, "Honest", "--spaces", "siren", limit=2 * GIB)
    assert result.returncode == 0 and not result.oom_killed, result.describe()
    parameters = 2 * len(space("siren").tensors) + 1
    assert f"checked at: siren: {parameters} parameters, its own size (no size field shrunk)\n" in result.stdout, \
        result.stdout
    assert "hostile_models:Honest: every claim holds" in result.stdout


@pytest.mark.parametrize("model, how", [
    ("ExitsZero", "the process ended with exit status 0 before reporting it"),
    ("SysExit", "its code raised SystemExit(0)"),
    ("Interrupts", "its code raised KeyboardInterrupt"),
    ("KillsItself", "the process was killed by SIGKILL (out of memory?) before reporting it"),
])
def test_a_forward_that_ends_its_process_is_not_a_pass(plugin, model, how):
    result = _check_model(plugin, model)
    assert result.returncode == 1, result.describe()
    error = _one_line(result)
    assert error.endswith(f"error: model 'hostile_models:{model}': the check 'output on cnn-relu at unit' did not "
                          f"finish: {how}"), error
    assert "every claim holds" not in result.stdout and "| cnn-relu |" not in result.stdout


def test_the_check_that_did_not_finish_is_the_one_named(plugin):
    """The checks before it finished (their records came); the small members' output check ended the process."""
    result = _check_model(plugin, "ExitsOnSmall", "--spaces", "siren")
    assert result.returncode == 1, result.describe()
    assert _one_line(result).endswith("the check 'output on siren at small' did not finish: the process ended "
                                      "with exit status 0 before reporting it"), result.describe()


def test_the_size_it_checked_at_is_the_built_model_s_and_names_what_was_shrunk(capsys):
    assert main(["bench", "check-model", "statnn", "--seeds", "0", "--spaces", "siren"]) == 0
    built = sum(p.numel() for p in build_model("statnn", "siren", 0).parameters())
    out = capsys.readouterr().out
    assert f"checked at: siren: {built:,} parameters, shrunk to model.hidden_sizes=[16]\n" in out, out
    assert main(["bench", "check-model", "statnn", "--seeds", "0", "--spaces", "siren",
                 "--set", "model.hidden_sizes=[8]"]) == 0  # a size given is the user's: not shrunk
    assert "parameters, its own size (no size field shrunk)\n" in capsys.readouterr().out
