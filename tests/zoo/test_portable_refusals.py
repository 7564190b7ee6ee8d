"""What the portable mode refuses before anything heavy starts, each in one line (`zoo.portable_command`).

A processor without x86-64-v3: refused before NumPy is imported, simulated in a child process whose
`/proc/cpuinfo` flags are replaced (`processor_problem` given another processor's flags) and whose
NumPy and torch imports fail, as NumPy's does on a processor below its baseline; and, where QEMU's
user mode is installed, on an emulated Nehalem, whose CPUID (`zoo.training.cpuid`) lacks AVX while
`/proc/cpuinfo` is the host's. A GPU device, or
`auto` beside a GPU: refused before the pinned child and Ray start, simulated by `torch.cuda.is_available`
patched in this process.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import zoo.training.reproducibility as reproducibility
from zoo.cli import main
from zoo.planning.declared import declared_mode
from zoo.training.cpuid import FLAGS, cpuid_flags
from zoo.training.device import DEVICE_VARIABLE, portable_device_problem

ROOT = Path(__file__).resolve().parents[2]
# a child process on a simulated processor without x86-64-v3; it prints what it tried to import
WITHOUT_V3 = """
import json, sys
attempts = []

class Refused:  # NumPy's import fails on a processor below its baseline; torch imports NumPy
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "torch"):
            attempts.append(name)
            raise ImportError(f"{name} is not importable on this processor")

sys.meta_path.insert(0, Refused())
import zoo.training.reproducibility as reproducibility
flags = reproducibility.processor_problem
below_v3 = "flags\\t: fpu sse sse2 ssse3\\n"
reproducibility.processor_problem = lambda cpuinfo=None, machine=None: flags(below_v3, "x86_64")
from zoo.cli import main
try:
    code = main(sys.argv[1:])
except BaseException as error:
    code = f"raised {type(error).__name__}"
print(json.dumps({"code": code, "attempts": attempts}))
"""


def _without_v3(*argv: str, cwd: Path = ROOT) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", WITHOUT_V3, "generate", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize("argv", [
    ("cnn-mnist", "--profile", "tiny", "--reproducibility", "portable"),  # asked for on the command line
    ("cnn-mnist", "--profile", "suite-v2"),  # declared by a bundled spec's profile
    ("extends-portable.yaml",),  # declared in a spec file that extends a bundled one
])
def test_a_processor_without_x86_64_v3_is_one_line_before_numpy(argv, tmp_path):
    (tmp_path / "extends-portable.yaml").write_text("extends: cnn-mnist\nname: mine\n"
                                                    "training: {reproducibility: portable}\n")
    outcome, stderr = _without_v3(*argv, "--out", str(tmp_path / "zoo"), cwd=tmp_path)
    assert outcome == {"code": 1, "attempts": []}, stderr
    assert stderr.splitlines() == ["nfnzoo generate: error: the portable mode needs x86-64-v3 (AVX2 + FMA); this "
                                   "processor lacks avx, avx2, fma, bmi1, bmi2, f16c, movbe, lzcnt: generate in the "
                                   "native mode (training.reproducibility: native), whose bytes are this machine's "
                                   "own"]
    assert not (tmp_path / "zoo").exists()


def test_the_simulation_sees_numpy_imported_by_a_native_spec(tmp_path):
    """Negative control: a native spec is not refused, and its validation reaches for NumPy and torch."""
    outcome, _ = _without_v3("cnn-mnist", "--profile", "tiny", "--out", str(tmp_path / "zoo"))
    assert outcome["attempts"] and outcome["code"] != 0


LINUX_X86_64 = sys.platform == "linux" and platform.machine().lower() in ("x86_64", "amd64")


@pytest.mark.skipif(not LINUX_X86_64, reason="CPUID is asked on Linux x86-64 only")
def test_cpuid_reports_at_least_the_flags_the_kernel_lists():
    """The kernel only drops CPUID's flags (AVX turned off), never adds: what it lists, CPUID reports."""
    listed = set(next(line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("flags")))
    assert listed & set(FLAGS) <= cpuid_flags() <= set(FLAGS)


def test_an_emulated_processor_is_judged_by_its_cpuid(monkeypatch):
    """Under QEMU's user mode /proc/cpuinfo is the host's; the flags CPUID reports are the emulated processor's."""
    import zoo.training.cpuid as cpuid

    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(cpuid, "cpuid_flags", lambda: {"fma", "movbe", "abm"})  # no AVX, AVX2, BMI, F16C
    assert "x86-64-v3 (AVX2 + FMA); this processor lacks avx, avx2, " in reproducibility.processor_problem()
    assert reproducibility.processor_problem("flags\t: avx avx2 fma bmi1 bmi2 f16c movbe abm\n") is None  # text alone


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None or not LINUX_X86_64,
                    reason="needs QEMU's user mode (apt install qemu-user)")
def test_on_an_emulated_nehalem_generate_refuses_in_one_line(tmp_path):
    done = subprocess.run(["qemu-x86_64", "-cpu", "Nehalem", sys.executable, "-m", "zoo.cli", "generate", "cnn-mnist",
                           "--profile", "suite-v2", "--out", str(tmp_path / "zoo")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    lines = [line for line in done.stderr.splitlines() if not line.startswith("qemu-x86_64: warning:")]
    assert done.returncode == 1 and lines == ["nfnzoo generate: error: the portable mode needs x86-64-v3 (AVX2 + FMA); "
                                              "this processor lacks avx, avx2, fma, bmi1, bmi2, f16c, movbe, lzcnt: "
                                              "generate in the native mode (training.reproducibility: native), "
                                              "whose bytes are this machine's own"], done.stderr[-2000:]
    assert not (tmp_path / "zoo").exists()


def test_the_declared_mode_is_read_as_load_spec_merges_it(tmp_path):
    (tmp_path / "base.yaml").write_text("extends: cnn-mnist\nname: base\nprofiles: {pinned: "
                                        "{training: {reproducibility: portable}}}\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nname: child\n")
    assert declared_mode("cnn-mnist", "tiny") == "native" and declared_mode("cnn-mnist", "suite-v2") == "portable"
    assert declared_mode(tmp_path / "child.yaml") == "native"
    assert declared_mode(tmp_path / "child.yaml", "pinned") == "portable"
    assert declared_mode(tmp_path / "child.yaml", "absent") == "native"  # load_spec names the missing profile


@pytest.mark.parametrize("requested, environment, gpus, refused", [
    (None, None, False, None),  # auto, no GPU: the CPU
    ("cpu", None, True, None),  # --device cpu beside a GPU: the fix
    (None, None, True, "device 'auto' (from --device or NFNZOO_DEVICE) takes the GPU here"),
    ("auto", None, True, "device 'auto'"),
    ("cuda:1", None, False, "device 'cuda:1' (from --device or NFNZOO_DEVICE) is a GPU"),
    (None, "cuda", False, "device 'cuda'"),
    ("cpu", "cuda", True, None),  # the option beats the environment
    ("tpu", None, True, None),  # not a GPU: `training_device` and `trial_resources` name it as unknown
])
def test_the_portable_mode_takes_the_cpu_only(requested, environment, gpus, refused, monkeypatch):
    monkeypatch.delenv(DEVICE_VARIABLE, raising=False)
    if environment:
        monkeypatch.setenv(DEVICE_VARIABLE, environment)
    problem = portable_device_problem("cnn-mnist", requested, gpus)
    if refused is None:
        assert problem is None
    else:
        assert refused in problem and problem.startswith("cnn-mnist: the portable mode trains on the CPU only")
        assert problem.endswith("add --device cpu, or generate in the native mode on the GPU")


@pytest.fixture
def beside_a_gpu(monkeypatch):
    """This process sees a GPU; the processor passes the mode's check; no Ray address is set."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(reproducibility, "processor_problem", lambda cpuinfo=None, machine=None: None)
    for variable in (DEVICE_VARIABLE, "RAY_ADDRESS"):
        monkeypatch.delenv(variable, raising=False)


def test_generate_at_device_auto_beside_a_gpu_is_one_line_before_ray(beside_a_gpu, tmp_path, capsys):
    import ray

    assert main(["generate", "cnn-mnist", "--profile", "tiny", "--reproducibility", "portable", "--out",
                 str(tmp_path / "zoo")]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == ["nfnzoo generate: error: cnn-mnist: the portable mode trains on the CPU only, and "
                                "device 'auto' (from --device or NFNZOO_DEVICE) takes the GPU here: add --device "
                                "cpu, or generate in the native mode on the GPU"]
    assert "running again" not in err and not (tmp_path / "zoo").exists() and not ray.is_initialized()


class _RayReached(Exception):
    pass


def _reach_ray(*args, **kwargs):
    raise _RayReached


def test_the_driver_refuses_before_ray_and_lets_device_cpu_through(beside_a_gpu, monkeypatch, tmp_path):
    import zoo.distributed.driver as driver
    from zoo.planning.spec import load_spec

    spec = load_spec("cnn-mnist", "suite-v2")
    monkeypatch.setattr(driver, "connected", _reach_ray)
    with pytest.raises(ValueError, match=r"^cnn-mnist: the portable mode trains on the CPU only, and device 'auto'"):
        driver.generate(spec, tmp_path / "zoo", device=None)
    assert not (tmp_path / "zoo").exists()
    with pytest.raises(_RayReached):  # --device cpu: past the refusal, to the cluster
        driver.generate(spec, tmp_path / "zoo", device="cpu")


def test_a_clusters_gpus_refuse_auto_once_connected_before_any_trial(monkeypatch):
    """On a cluster (`--address`) the driver's own GPU says nothing: the cluster's resources decide."""
    import ray

    import zoo.distributed.driver as driver
    from zoo.families import create_family
    from zoo.planning.spec import load_spec

    spec = load_spec("cnn-mnist", "suite-v2")
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 8.0, "GPU": 1.0})
    monkeypatch.setattr(driver, "trial_resources", _reach_ray)  # the trials' resources come next
    generation = driver._Generation(spec, create_family(spec.family), [], None, 0, False, None, None)
    with pytest.raises(ValueError, match="device 'auto' .* takes the GPU here: add --device cpu"):
        generation.run(None, None, None)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 8.0})
    with pytest.raises(_RayReached):
        generation.run(None, None, None)
