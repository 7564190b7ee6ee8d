"""The portable reproducibility mode (`zoo.training.reproducibility`): recorded bytes reproduce whatever the
environment says, and the comparison can fail.

`portable_bytes.json` holds the sha256 of every checkpoint of small generations of each family under
both draw schemes, and of a CNN trained on colour images converted to grey (`portable_probe.py`),
made in the portable mode. Here they are made again in a child process whose environment starts
hostile (ATen, oneDNN, MKL and NumPy set to other instruction sets, OpenBLAS left to choose its kernel
by processor, two OpenMP threads, another CPU affinity) and goes through `portable_environment`, as
`nfnzoo generate` does it; and once through the real command (`nfnzoo generate --reproducibility portable`,
a Ray instance, its re-run in the pinned environment), whose zoo `verify --retrain` then retrains in
the mode. The negative control: in the native mode, ATen's `default` and `avx2` kernels give other
bytes, so a comparison like this one sees a setting that reaches the bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from shadows import imported, plant
from zoo.cli import main
from zoo.planning.plan import plan_runs
from zoo.planning.spec import spec_from_data
from zoo.storage.staging import Staging
from zoo.training.reproducibility import (PORTABLE_ENV, environment_problem, portable_environment,
                                          processor_problem)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RECORD = json.loads((HERE / "portable_bytes.json").read_text())
HOSTILE = {"ATEN_CPU_CAPABILITY": "avx512", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2",
           "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "MKL_CBWR": "AUTO", "NPY_DISABLE_CPU_FEATURES": "X86_V4",
           "KMP_AFFINITY": "compact"}
UNPINNED = ("OPENBLAS_CORETYPE",)  # removed: OpenBLAS then takes its AVX-512 kernels where the processor has them
pytestmark = pytest.mark.skipif(processor_problem() is not None, reason=f"{processor_problem()}")


def _affinity() -> list[str]:
    """`taskset` onto another CPU than this process's first, where there is one."""
    cpus = sorted(os.sched_getaffinity(0))
    return ["taskset", "-c", str(cpus[-1])] if len(cpus) > 1 else []


def _probe(env: dict[str, str], mode: str, specs: str | None = None) -> dict[str, dict[str, str]]:
    argv = [*_affinity(), sys.executable, str(HERE / "portable_probe.py"), "--mode", mode,
            *(["--specs", specs] if specs else [])]
    done = subprocess.run(argv, env={**env, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_recorded_generations_reproduce_bit_for_bit_whatever_the_environment_says():
    hostile = {key: value for key, value in {**os.environ, **HOSTILE}.items() if key not in UNPINNED}
    found = _probe(portable_environment(hostile), "portable")
    # CNN, SIREN, transformer x both draw schemes, and the CNN on grey-converted colour images
    assert set(found) == set(RECORD["generations"]) and "cnn-cifar10-gs/tiny/torch-generator" in found
    for generation, recorded in RECORD["generations"].items():
        assert found[generation] == recorded, (f"{generation}: the portable bytes differ from those recorded on "
                                               f"{RECORD['recorded_on']}")


def test_the_comparison_can_fail_the_native_mode_follows_atens_capability():
    native = {key: value for key, value in os.environ.items() if key != "ATEN_CPU_CAPABILITY"}
    default = _probe({**native, "ATEN_CPU_CAPABILITY": "default"}, "native", "cnn-mnist")
    avx2 = _probe({**native, "ATEN_CPU_CAPABILITY": "avx2"}, "native", "cnn-mnist")
    assert set(default) == set(avx2) and default != avx2  # the same checkpoints, other bytes


@pytest.fixture(scope="module")
def portable_zoo(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`nfnzoo generate cnn-mnist --profile tiny --reproducibility portable --out zoo` from the hostile
    environment. The output folder `zoo` sits in the working folder: it must not shadow the package on
    the Ray workers, which start after it exists."""
    folder = tmp_path_factory.mktemp("portable")
    env = {**os.environ, **HOSTILE, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([*_affinity(), str(Path(sys.executable).parent / "nfnzoo"), "generate", "cnn-mnist",
                           "--profile", "tiny", "--reproducibility", "portable", "--num-cpus", "2", "--max-failures",
                           "0", "--out", "zoo"], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ImportError" not in done.stderr and "trials failed" not in done.stderr, done.stderr[-3000:]
    return folder / "zoo", done


def test_generate_runs_itself_again_pinned_and_its_ray_workers_make_the_recorded_bytes(portable_zoo):
    out, done = portable_zoo
    assert "portable mode: running again with ATEN_CPU_CAPABILITY=avx2" in done.stderr
    assert "reproducibility: portable" in done.stdout
    staged = {path.stem: path for path in (out / "staging").rglob("*.safetensors")}
    import hashlib

    recorded = RECORD["generations"]["cnn-mnist/tiny/torch-generator"]  # the plan's first runs, trained alone
    assert set(recorded) <= set(staged)
    assert {model_id: hashlib.sha256(staged[model_id].read_bytes()).hexdigest() for model_id in recorded} == recorded
    manifest = json.loads((out / "manifest.json").read_text())["configs"]["cnn-mnist"]
    planned = sorted(m for run in plan_runs(spec_from_data(manifest["spec"], "manifest")) for m in run.model_ids)
    assert Staging(out / "staging").model_ids() == planned  # the workers imported the package, not the folder
    assert manifest["reproducibility"]["mode"] == "portable"
    assert manifest["reproducibility"]["settings"] == PORTABLE_ENV
    assert {m["aten_isa"] for m in manifest["machines"]} == {"AVX2"}  # what the Ray workers dispatched to
    assert manifest["spec"]["training"]["reproducibility"] == "portable"


def test_verify_retrains_a_portable_zoo_in_its_mode_and_info_names_it(portable_zoo, capsys, tmp_path):
    """The retraining runs in a child process, started from a folder holding a `zoo/cli.py` and a `numpy.py`:
    the child imports nfnzoo's own (`python -P`; docs/security.md, "working folder")."""
    out, _ = portable_zoo
    assert main(["info", str(out)]) == 0
    assert "reproducibility: portable (the same bytes on any x86-64-v3 processor with mkl " in capsys.readouterr().out
    env = {**os.environ, **HOSTILE, "HF_HUB_OFFLINE": "1"}
    folder, markers = tmp_path / "project", tmp_path / "markers"
    folder.mkdir()
    plant(folder, markers)
    done = subprocess.run([str(Path(sys.executable).parent / "nfnzoo"), "verify", str(out), "--retrain", "1"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "portable mode: running again with" in done.stderr  # the child ran
    assert "(portable mode):" in done.stdout and "identical" in done.stdout and "DIFFERENT" not in done.stdout
    assert imported(markers) == []


def test_the_dry_run_names_the_mode(capsys):
    assert main(["generate", "cnn-mnist", "--profile", "tiny", "--reproducibility", "portable", "--dry-run"]) == 0
    assert "reproducibility: portable" in capsys.readouterr().out


@pytest.mark.parametrize("cpuinfo, machine, message", [
    ("flags\t: fpu sse sse2 avx\n", "x86_64", "lacks avx2, fma, bmi1, bmi2, f16c, movbe, lzcnt"),
    ("", "aarch64", "this machine is aarch64"),
])
def test_a_processor_the_mode_cannot_pin_is_named(cpuinfo, machine, message):
    assert message in processor_problem(cpuinfo, machine)
    assert processor_problem("flags\t: avx avx2 fma bmi1 bmi2 f16c movbe abm\n", "x86_64") is None


def test_a_processor_without_the_baseline_is_refused_before_anything_runs(monkeypatch, tmp_path, capsys):
    import zoo.training.reproducibility as reproducibility

    monkeypatch.setattr(reproducibility, "processor_problem", lambda: "the portable mode needs x86-64-v3 (AVX2 + FMA)")
    assert main(["generate", "cnn-mnist", "--profile", "tiny", "--reproducibility", "portable", "--out",
                 str(tmp_path / "z")]) == 1
    assert "needs x86-64-v3" in capsys.readouterr().err and not (tmp_path / "z").exists()


def test_the_environment_check_names_what_differs():
    pinned = portable_environment({"PATH": "/bin", "OMP_PROC_BIND": "true", "ATEN_CPU_CAPABILITY": "avx512"})
    assert environment_problem(pinned) is None and pinned["PATH"] == "/bin" and "OMP_PROC_BIND" not in pinned
    assert "ATEN_CPU_CAPABILITY='avx512' is set" in environment_problem({**pinned, "ATEN_CPU_CAPABILITY": "avx512"})
    assert "KMP_AFFINITY='compact' is set; the portable mode leaves it unset" in environment_problem(
        {**pinned, "KMP_AFFINITY": "compact"})


def test_the_portable_optimizers_take_ieees_square_root():
    """Adam's and RMSprop's square roots in the portable mode are IEEE's (correctly rounded: the same bits on
    every processor), checked against float64's sqrt rounded once to float32 (exact for float32 inputs).
    torch's CPU sqrt goes through MKL's vector math, whose bits depend on the processor's kernel."""
    import numpy

    from zoo.training.optim_stacked import StackedOptimizer, correctly_rounded_sqrt

    values = torch.rand(200_000, generator=torch.Generator().manual_seed(0)) * 100 + 1e-3
    reference = numpy.sqrt(values.numpy().astype(numpy.float64)).astype(numpy.float32)
    assert numpy.array_equal(correctly_rounded_sqrt(values).numpy(), reference)
    assert numpy.array_equal(correctly_rounded_sqrt(values.double()).numpy(), numpy.sqrt(values.double().numpy()))
    off = reference.copy()  # negative control: one result a unit in the last place away is seen
    off[12345] = numpy.nextafter(off[12345], numpy.float32(numpy.inf))
    assert not numpy.array_equal(correctly_rounded_sqrt(values).numpy(), off)

    def adam_steps(exact: bool) -> torch.Tensor:
        param = torch.linspace(-1, 1, 64).reshape(2, 32).clone()
        opt = StackedOptimizer([param], torch.tensor([1e-3, 1e-2], dtype=torch.float64), "adam", exact_sqrt=exact)
        for step in range(3):
            param.grad = torch.sin(param * (step + 1))
            opt.step(torch.tensor([True, True]))
        return param

    exact, default = adam_steps(True), adam_steps(False)
    assert torch.allclose(exact, default, rtol=0, atol=1e-6)  # the same update, to float32 rounding
