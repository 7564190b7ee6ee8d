"""The tracks' learners on the job's device: what moves, what a CPU run keeps, and what travels to a job.

There is no GPU here, so nothing runs on CUDA: a learner is moved to the `meta` device (no data,
no computation) to show that everything it holds follows it; an explicit CPU device gives the
default's outcome to the bit; and each track is run up to its jobs with the driver's device
decision replaced, to show that the device travels to every job and joins the fingerprint only
when it is not the CPU (a CPU run's records stay valid).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

pytest.importorskip("timm")

from benchmarks.tracks.common.backbone import BackboneConfig, create_vit
from benchmarks.tracks.common.incremental import glyph_sequence
from benchmarks.tracks.common.learners import Base
from benchmarks.tracks.norga import track as norga_track
from benchmarks.tracks.norga.evaluate import run_sequence
from benchmarks.tracks.registry import create_track
from benchmarks.tracks.reporting import job_hardware, runs_hardware

LETTERS = ("A", "B", "D", "\u0416", "\u03a8", "\u044f")


def _backbone() -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return create_vit(BackboneConfig(embed_dim=16, depth=2, num_heads=2))


def _tensors(value, seen=None):
    """Every tensor a learner holds: in its attributes, modules, lists and dataclasses."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, nn.Module):
        yield from value.parameters()
        yield from value.buffers()
    elif isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _tensors(getattr(value, field.name), seen)
    elif isinstance(value, Base):
        for item in vars(value).values():
            yield from _tensors(item, seen)


def _wave_data():
    from benchmarks.tracks.wave.encoder import EncoderConfig, load_encoder
    from benchmarks.tracks.wave.learners import RelationData

    _, encoder, _ = load_encoder(EncoderConfig(name="tiny-random"))
    return RelationData(encoder, None, torch.zeros((4, 2 * encoder.dim)), torch.zeros(4, dtype=torch.long), 6, 3)


def _learners():
    from benchmarks.tracks.wave import track as wave_track

    norga = norga_track.PROFILES["tiny"]
    for name, build in norga_track.METHODS.items():
        yield pytest.param(lambda build=build: build(_backbone(), 6, 3, norga, 1), id=f"norga-{name}")
    wave = wave_track.PROFILES["tiny"]
    for name, build in wave_track.METHODS.items():
        yield pytest.param(lambda build=build: build(_wave_data(), wave, 1), id=f"wave-{name}")


@pytest.mark.parametrize("build", list(_learners()))
def test_a_learner_moves_everything_it_holds_and_keeps_drawing_on_the_cpu(build):
    learner = build()
    before = sum(t.numel() for t in _tensors(learner))
    learner.to("meta")  # no data on it: nothing is computed, only where each tensor lives
    moved = list(_tensors(learner))
    assert moved and all(t.device.type == "meta" for t in moved)
    assert sum(t.numel() for t in moved) == before  # nothing dropped on the way
    assert learner.device == torch.device("meta") and learner.generator.device.type == "cpu"
    for parameter in (v for v in vars(learner).values() if isinstance(v, nn.Parameter)):
        assert parameter.is_leaf and parameter.requires_grad  # still a parameter an optimizer can take


@pytest.mark.parametrize("method", ["norga-tanh", "dualprompt", "coda-prompt", "joint"])
def test_an_explicit_cpu_device_gives_the_default_runs_outcome(method):
    settings = norga_track.PROFILES["tiny"]
    sequence = glyph_sequence(LETTERS, tasks=3, train_per_class=6, test_per_class=3, seed=0)
    default = norga_track.METHODS[method](_backbone(), 6, 3, settings, 4)
    explicit = norga_track.METHODS[method](_backbone(), 6, 3, settings, 4).to(torch.device("cpu"))
    first, second = run_sequence(default, sequence), run_sequence(explicit, sequence.to("cpu"))
    assert first["accuracy_matrix"] == second["accuracy_matrix"]
    for name, value in vars(default).items():  # the trained state itself, bit for bit
        if isinstance(value, nn.Module):
            assert all(torch.equal(a, b) for a, b in zip(value.state_dict().values(),
                                                        getattr(explicit, name).state_dict().values()))
        elif isinstance(value, torch.Tensor):
            assert torch.equal(value, getattr(explicit, name))


def test_a_norga_job_moves_its_learner_and_images_to_its_device(monkeypatch):
    from benchmarks.tracks.common.backbone import state_sha256
    from benchmarks.tracks.common.incremental import TaskSequence

    calls = []
    for cls in (Base, TaskSequence):
        original = cls.to
        monkeypatch.setattr(cls, "to", lambda self, device, original=original, cls=cls: (
            calls.append((cls.__name__, str(device))), original(self, device))[1])
    settings = norga_track.PROFILES["tiny"]
    sequence = glyph_sequence(LETTERS, tasks=3, train_per_class=6, test_per_class=3, seed=0)
    backbone = _backbone()
    outcome = norga_track.run_job(settings, settings.benchmarks[0], "l2p", 0, sequence, backbone,
                                  state_sha256(backbone), "cpu")
    assert calls == [("Base", "cpu"), ("TaskSequence", "cpu")]
    assert outcome["hardware"] == {"device": "cpu", "gpu_model": None}


def test_a_token_run_on_an_explicit_cpu_trains_the_same_model():
    from benchmarks.tracks.tokens.constrained import ModelConfig
    from benchmarks.tracks.tokens.training import SequenceData, TrainConfig, train_run

    generator = torch.Generator().manual_seed(0)
    data = SequenceData(torch.rand((32, 8, 6), generator=generator), torch.randint(0, 3, (32,), generator=generator),
                        torch.rand((8, 8, 6), generator=generator), torch.randint(0, 3, (8,), generator=generator),
                        6, 3, False, False, {})
    config, train = ModelConfig(8, 2, 1, 16, 8), TrainConfig(steps=4, batch_size=4)
    _, default = train_run(data, config, train, "pd", "rotary-diag", 1)
    model, explicit = train_run(data, config, train, "pd", "rotary-diag", 1, torch.device("cpu"))
    assert default["example_loss"] == explicit["example_loss"] and default["head_regimes"] == explicit["head_regimes"]
    assert next(model.parameters()).device.type == "cpu"


def test_a_theory_point_on_an_explicit_cpu_is_the_same():
    from benchmarks.tracks.norga.theory import simulate_point

    config = create_track("norga-theory").profile("tiny")
    assert simulate_point(config, 50, 0) == simulate_point(config, 50, 0, "cpu")


class _Stop(Exception):
    pass


@pytest.mark.parametrize("name", ["norga", "norga-theory", "wave-cre", "token-dynamics"])
def test_the_device_travels_to_every_job_and_joins_only_a_gpu_runs_fingerprint(name, tmp_path, monkeypatch):
    """The driver's decision (`job_device`) is replaced, as on a cluster with GPUs: no CUDA runs here."""
    import importlib

    import benchmarks.jobs
    import benchmarks.run_options

    track = create_track(name)
    module = importlib.import_module(type(track).__module__)
    jobs = {}

    def capture(device):
        def run_jobs(batch, *args, **kwargs):
            jobs[device] = list(batch)
            raise _Stop

        return run_jobs

    for device in ("cpu", "cuda"):
        for target in (benchmarks.jobs, benchmarks.run_options, module):  # `Track.run`'s placement decides
            monkeypatch.setattr(target, "job_device", lambda *a, device=device: device, raising=False)
            monkeypatch.setattr(target, "run_jobs", capture(device), raising=False)
        with pytest.raises(_Stop):
            track.run("tiny", list(track.DEFAULT_SEEDS[:1]), tmp_path, workers=1,
                      gpus_per_job=1.0 if device == "cuda" else 0.0)
    cpu, cuda = jobs["cpu"], jobs["cuda"]
    assert [j.key for j in cpu] == [j.key for j in cuda] and cpu
    for on_cpu, on_gpu in zip(cpu, cuda):
        assert "cpu" in on_cpu.arguments and "cuda" in on_gpu.arguments
        assert on_cpu.fingerprint != on_gpu.fingerprint


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error is for a machine without CUDA")
@pytest.mark.parametrize("name", ["norga", "norga-theory", "wave-cre", "token-dynamics"])
def test_gpus_per_job_without_a_gpu_is_one_line_before_anything_runs(name, tmp_path):
    with pytest.raises(ValueError, match="no CUDA GPU on this machine"):
        create_track(name).run("tiny", [0], tmp_path, workers=1, gpus_per_job=1)
    assert not any(Path(tmp_path).iterdir())


def test_results_name_the_device_their_jobs_ran_on():
    assert job_hardware("cpu") == {"device": "cpu", "gpu_model": None}
    assert runs_hardware([{}, {}])["device"] == "cpu"  # records from before a job named its device
    gpu = {"hardware": {"device": "cuda (NVIDIA H200)", "gpu_model": "NVIDIA H200"}}
    block = runs_hardware([gpu, gpu])
    assert (block["device"], block["gpu_model"]) == ("cuda (NVIDIA H200)", "NVIDIA H200")
    assert runs_hardware([gpu, {}])["device"] == "cuda (NVIDIA H200), cpu"
