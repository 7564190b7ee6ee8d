"""The three studies of the token-dynamics track, each one job (`benchmarks.jobs`).

`minilm_study` classifies every head of all-MiniLM-L6-v2 by the conditions. They are read on the
range of its value map (`conditions`). It integrates each head's ODE on the layer's real input
tokens for AG News articles (`heads`, `dynamics`). So the predicted regime meets the observed one.
It also reads Eq. (2) on the data: the mean of x^T sym(A) x over the moving parts. Those are the
tokens whose self-score x^T sym(W) x is positive. The sign says whether their energy grows.

`regime_run` trains one tiny transformer in one regime and encoding (`training`). It then
integrates its first layer's heads on the tokens they see. Those are test examples, embedded,
encoded and layer-normalised as the forward pass does.

`zoo_study` generates a Transformer-zoo profile twice, through Ray. The first zoo has no residual
connections, as released; the second has them (the family's option). It classifies every member's
heads, and integrates its first block's heads on MNIST test images. Per member it reports its
heads' regimes, the mean negative share of sym(A) and the growth of its tokens. Each sits beside
the member's test accuracy."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import torch

from benchmarks.tracks.tokens.conditions import classify, reduce_to_value_range, sym, value_range
from benchmarks.tracks.tokens.constrained import ModelConfig
from benchmarks.tracks.tokens.dynamics import integrate
from benchmarks.tracks.tokens.training import BENCHMARKS, BenchmarkConfig, TrainConfig, train_run


def json_safe(value):
    """The outcome with every non-finite float as None, since job records are strict JSON.

    Such floats come from a head with no qualifying token, or a blown-up trajectory's last values."""
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class OdeConfig:
    units: float = 10.0  # the horizon in units of 1 / |V|_2
    steps: int = 100  # RK4 steps
    sequences: int = 8  # test sequences integrated at once


@dataclasses.dataclass(frozen=True)
class MiniLMConfig:
    texts: int = 8  # AG News test articles
    max_length: int = 64
    layers: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    heads: tuple[int, ...] = tuple(range(12))


def energy_drift(w: np.ndarray, v: np.ndarray, tokens: np.ndarray) -> float:
    """Eq. (2) read on the data: the mean of r^T sym(A_r) r / |r|^2 over the moving parts r.

    Only parts with r^T sym(W_r) r > 0 count. A_r = sym(W_r) V_r is on the range of V. NaN if no token
    qualifies."""
    basis = value_range(v)
    w_r, v_r = reduce_to_value_range(w, v, basis=basis)
    r = tokens @ basis
    s_w = sym(w_r)
    a = sym(s_w @ v_r)
    energy = np.einsum("ni,ij,nj->n", r, s_w, r)
    keep = energy > 0
    if not keep.any():
        return float("nan")
    drift = np.einsum("ni,ij,nj->n", r[keep], a, r[keep]) / np.einsum("ni,ni->n", r[keep], r[keep])
    return float(drift.mean())


def minilm_study(config: MiniLMConfig, ode: OdeConfig, device: str = "cpu") -> dict:
    """MiniLM's heads (a job).

    The model reads the texts on `device`; the heads' analyses run in float64 on the CPU."""
    from benchmarks.tracks.common.backbone import state_sha256
    from benchmarks.tracks.tokens.heads import bert_heads, bert_layer_inputs, load_minilm
    from zoo.data.text import ag_news_7600

    tokenizer, model = load_minilm()
    encoder_sha256, heads = state_sha256(model), bert_heads(model)
    texts = ag_news_7600()[2][:config.texts]
    inputs, mask = bert_layer_inputs(tokenizer, model.to(device), texts, config.max_length)
    rows = []
    for head in heads:
        if head.layer not in config.layers or head.head not in config.heads:
            continue
        regime = classify(head.w, head.v)
        x = inputs[head.layer]
        trajectory = integrate(head.w, head.v, x, mask, units=ode.units, steps=ode.steps)
        tokens = x[mask].numpy()
        rows.append({"layer": head.layer, "head": head.head, **dataclasses.asdict(regime),
                     "energy_drift": energy_drift(head.w, head.v, tokens), "trajectory": trajectory.to_data()})
    return json_safe({"heads": rows, "encoder_sha256": encoder_sha256, "texts": len(texts),
                      "tokens": int(mask.sum())})


@functools.lru_cache(maxsize=2)
def benchmark_data(benchmark: BenchmarkConfig, length: int):
    """The benchmark's sequences (`training.BENCHMARKS`), read from the data folder.

    The track reads them on the driver and passes them to the jobs."""
    return BENCHMARKS[benchmark.name](benchmark, length)


@torch.no_grad()
def _first_layer_tokens(model, x: torch.Tensor) -> torch.Tensor:
    """The tokens the first layer's heads see: embedded, encoded and layer-normalised."""
    h = model.embed(x)
    if model.encoding == "absolute":
        h = h + model.positions[:h.shape[1]]
    return model.norms[0](h).double()


def regime_run(benchmark: BenchmarkConfig, model_config: ModelConfig, train: TrainConfig, ode: OdeConfig,
               regime: str, encoding: str, seed: int, data=None, device: str = "cpu") -> dict:
    """One regime and encoding trained with one seed on `device` (a job).

    `data` is `benchmark_data`'s, read here when not given. Its heads' trajectories are integrated on
    the CPU."""
    from benchmarks.memory import peak_mb, reset_peak
    from benchmarks.tracks.reporting import job_hardware

    reset_peak(device)
    data = benchmark_data(benchmark, model_config.length) if data is None else data
    model, outcome = train_run(data, model_config, train, regime, encoding, seed, device)
    tokens = _first_layer_tokens(model, data.test_x[:ode.sequences].to(device)).cpu()
    w, v = (matrix.cpu() for matrix in model.head_matrices()[0])
    scale = 1 / np.sqrt(model_config.dim if regime != "free" else 1.0)  # the forward pass's score scale
    trajectories = []
    for h in range(w.shape[0]):
        wh, vh = w[h].detach().double().numpy() * scale, v[h].detach().double().numpy()
        diagonal = None
        if model.diagonal is not None:
            diagonal = torch.nn.functional.softplus(model.diagonal[0, h]).detach().double().cpu().numpy() * scale
        trajectories.append(integrate(wh, vh, tokens, None, units=ode.units, steps=ode.steps,
                                      rotary=encoding != "absolute" and regime != "free",
                                      diagonal=diagonal).to_data())
    return json_safe({**outcome, "trajectories": trajectories, "peak_memory_mb": peak_mb(device),
                      "hardware": job_hardware(device)})


@dataclasses.dataclass(frozen=True)
class ZooConfig:
    spec: str = "transformer-mnist"
    profile: str = "tiny"
    num_cpus: int = 2
    # train in this process, one run after another, instead of through a local Ray instance: the same
    # checkpoints (a member trains alike anywhere), without Ray's start (the tiny profile's 8 members)
    in_process: bool = False


def _generate(config: ZooConfig, residual: bool, folder: Path):
    from zoo.dataset.pack import pack
    from zoo.validation.schema import to_data
    from zoo.planning.spec import load_spec, spec_from_data

    data = to_data(load_spec(config.spec, config.profile))
    data["architecture"] = {**data["architecture"], "residual": residual}
    spec = spec_from_data(data)
    out = folder / f"{config.spec}-{config.profile}-{'residual' if residual else 'plain'}"
    if config.in_process:
        from zoo.planning.plan import plan_runs
        from zoo.storage.folder import STAGING_FOLDER, save_spec
        from zoo.storage.staging import Staging
        from zoo.training.worker import train_runs

        save_spec(spec, out)
        train_runs(spec, plan_runs(spec), Staging(out / STAGING_FOLDER))  # only what is missing: resumable
    else:
        from zoo.distributed.driver import generate

        report = generate(spec, out, num_cpus=config.num_cpus, progress=False)
        if report.missing:
            raise RuntimeError(f"{out}: {report.missing} checkpoints failed to train; run the track again to resume")
    pack(out)
    return spec, out


@torch.no_grad()
def _block_inputs(arch, state: dict, images: torch.Tensor) -> torch.Tensor:
    """The tokens a member's first block's heads see, for the images (B, 1, 28, 28).

    They are the patch embedding plus the positional encoding, layer-normalised (the block's pre-LN)."""
    from zoo.families.transformer_model import SmallTransformer

    model = SmallTransformer(arch)
    model.load_state_dict({name: torch.as_tensor(value) for name, value in state.items()})
    h, _ = model.embedding(images)
    h = h + model.positional_encoding[:h.shape[1]]
    return torch.nn.functional.layer_norm(h, h.shape[-1:]).double()


def zoo_study(config: ZooConfig, folder: str, ode: OdeConfig = OdeConfig()) -> dict:
    """Every member's last checkpoint, not its best-validation copy.

    It gives the heads' regimes, the first block's heads integrated on MNIST test images, and the
    test accuracy."""
    from benchmarks.tracks.tokens.heads import member_heads
    from zoo.data.images import SOURCES
    from zoo.families.transformer_model import TransformerArchitecture
    from zoo.loader import dataset_hash, load_split

    images = SOURCES.get("mnist")()[1].x[:ode.sequences]
    members, hashes = [], {}
    for residual in (False, True):
        spec, out = _generate(config, residual, Path(folder))
        arch = TransformerArchitecture(**spec.architecture)
        blocks, heads_per_block = arch.num_blocks, arch.num_heads
        hashes["residual" if residual else "plain"] = dataset_hash(out)
        for split in ("train", "validation", "test"):
            part = load_split(out, split=split)
            meta = part.metadata
            last = (meta["epoch"].to_numpy() == meta["epoch"].max()) & ~meta["is_best"].to_numpy(dtype=bool)
            names = part.weights.space.names
            for row in np.flatnonzero(last):
                state = {name: tensor[row].numpy() for name, tensor in zip(names, part.weights.tensors)}
                heads = member_heads(state, blocks, heads_per_block)
                regimes = [classify(h.w, h.v) for h in heads]
                tokens = _block_inputs(arch, state, images)
                observed = [integrate(h.w, h.v, tokens, units=ode.units, steps=ode.steps).to_data()
                            for h in heads[:heads_per_block]]
                members.append({
                    "residual": residual, "split": split, "model_id": str(meta["model_id"].iloc[row]),
                    "optimizer": str(meta["optimizer"].iloc[row]) if "optimizer" in meta else "",
                    "test_accuracy": float(meta["test_accuracy"].iloc[row]),
                    "regimes": [r.regime for r in regimes], "first_block_observed": [o["observed"] for o in observed],
                    "first_block_growth": [o["growth"] for o in observed],
                    "negative_share": float(np.mean([r.negative_share for r in regimes])),
                    "score_min_eigenvalue": float(np.mean([r.score_eigenvalues[0] for r in regimes]))})
    return json_safe({"members": members, "dataset_hashes": hashes, "spec": config.spec, "profile": config.profile})
