"""A cheap check of NoRGa's motivation: estimating a prefix mixture of experts with linear and with NoRGa gates.

The paper is Le et al., "Mixture of Experts Meets Prompt-Based Continual Learning" (NeurIPS 2024).
It reads an attention head with prefixes as a mixture of experts. The pretrained experts have gating
scores that are quadratic in the input. They are fixed, since the backbone is frozen. The prefix
experts have scores linear in the input, s = beta_1^T x (+ beta_0).

Their analysis concerns an over-specified prefix mixture. With such linear gates, its
least-squares estimates converge slower than any polynomial rate. NoRGa's gate
s + alpha * sigma(tau * s), with sigma in {tanh, sigmoid, GELU}, restores polynomial rates. For the
Voronoi loss below, that is about n^(-1/2).

This module simulates that regression. The simulation's design is ours, not the paper's. Its theory
section and appendix were not available to us; see the README's NoRGa section. Every setting is in
`TheoryConfig` and in the JSON written.

The model has d-dimensional x, scalar y and Gaussian noise of variance `noise`. As the analysis
assumes, every parameter lies in a compact box [-bound, bound]. It is imposed as
theta = bound * tanh(u).

Write E_0(x) = exp(x^T A0 x + c0) and E_i(x) = exp(g(beta_1i^T x) + beta_0i). The model is

    f_G(x) = [ E_0(x) h0(x) + sum_i E_i(x) (a_i^T x + b_i) ] / [ E_0(x) + sum_i E_i(x) ].

The pretrained expert (A0, c0, h0) is known. The gate is g(s) = s (linear) or
s + alpha * sigma(tau * s) (NoRGa, alpha = tau = 1 known). There is one true prefix expert. The fit
has L' = 2 or L' = 1. L' = 2 is over-specified, where the rates differ. L' = 1 is exact: the control,
where both gates should give n^(-1/2).

The estimate is least squares: L-BFGS in float64, restarts near the truth, the lowest training
error kept. Its error is the Voronoi loss of the paper's analysis. One true atom
theta* = (beta_1*, a*, b*) owns every fitted atom. With L' = 1 the loss is

    D(G, G*) = | sum_i exp(beta_0i) - exp(beta_0*) | + sum_i exp(beta_0i) * (|d beta_1i| + |d a_i| + |d b_i|).

With L' > 1 its second sum takes squared distances:
sum_i exp(beta_0i) * (|d beta_1i|^2 + |d a_i|^2 + |d b_i|^2).

The measured rate is the slope of log D against log n. It is a least-squares fit over the grid of
n, on the median over replicates. An over-specified fit now and then lands far away, and one such
replicate would decide a mean. Every gate sees the same inputs and noise at each (n, replicate):
common random numbers."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

GATES: dict[str, Callable[[torch.Tensor], torch.Tensor] | None] = {
    "linear": None, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "gelu": F.gelu}


@dataclasses.dataclass(frozen=True)
class TheoryConfig:
    sizes: tuple[int, ...] = (100, 300, 1000, 3000, 10000)
    replicates: int = 8
    fitted: tuple[int, ...] = (2, 1)  # L': over-specified, then exact
    gates: tuple[str, ...] = ("linear", "tanh", "sigmoid", "gelu")
    noise: float = 0.01  # variance
    alpha: float = 1.0
    tau: float = 1.0
    beta1: tuple[float, ...] = (1.0, 0.5)  # the true prefix atom
    beta0: float = 0.0
    a: tuple[float, ...] = (-1.0, 1.0)
    b: float = 0.5
    a0_scale: float = 0.5  # A0 = a0_scale * I, the known pretrained gate
    c0: float = 0.0
    h0: tuple[float, ...] = (1.0, -1.0)  # the known pretrained expert's slope (its offset is 0)
    bound: float = 3.0  # the compact parameter box [-bound, bound] of every coordinate
    jitter: float = 0.1  # the restarts' distance from the truth
    restarts: int = 2
    iterations: int = 200
    seed: int = 0


def _gate(name: str, scores: torch.Tensor, config: TheoryConfig) -> torch.Tensor:
    sigma = GATES[name]
    return scores if sigma is None else scores + config.alpha * sigma(config.tau * scores)


def regression(x: torch.Tensor, params: dict[str, torch.Tensor], gate: str, config: TheoryConfig) -> torch.Tensor:
    """f_G(x) for prefix atoms `params` (beta1 (L, d), beta0 (L,), a (L, d), b (L,))."""
    h0 = torch.tensor(config.h0, dtype=x.dtype, device=x.device)
    pretrained_score = config.a0_scale * (x * x).sum(1) + config.c0  # (n,)
    prefix_score = _gate(gate, x @ params["beta1"].T, config) + params["beta0"]  # (n, L)
    scores = torch.cat([pretrained_score[:, None], prefix_score], dim=1)
    experts = torch.cat([(x @ h0)[:, None], x @ params["a"].T + params["b"]], dim=1)
    return (scores.softmax(dim=1) * experts).sum(1)


def truth(config: TheoryConfig) -> dict[str, torch.Tensor]:
    def t(v: list[float]) -> torch.Tensor:
        return torch.tensor(v, dtype=torch.float64)

    return {"beta1": t([config.beta1]), "beta0": t([config.beta0]), "a": t([config.a]), "b": t([config.b])}


def voronoi_loss(fitted: dict[str, torch.Tensor], true: dict[str, torch.Tensor]) -> float:
    """D(G, G*) for one true atom (every fitted atom is in its Voronoi cell)."""
    weights = fitted["beta0"].exp()
    mass = abs(float(weights.sum() - true["beta0"].exp()[0]))
    d_beta1 = (fitted["beta1"] - true["beta1"]).norm(dim=1)
    d_a = (fitted["a"] - true["a"]).norm(dim=1)
    d_b = (fitted["b"] - true["b"]).abs()
    power = 1 if len(weights) == 1 else 2
    return mass + float((weights * (d_beta1 ** power + d_a ** power + d_b ** power)).sum())


def _start(true: dict[str, torch.Tensor], atoms: int, config: TheoryConfig, generator: torch.Generator) -> dict:
    """Unconstrained u of each parameter theta = bound * tanh(u), near the truth."""
    start = {}
    for name, value in true.items():
        base = value.expand(atoms, *value.shape[1:]).clone()
        if name == "beta0":
            base = base - math.log(atoms)  # the true weight split over the atoms
        jitter = torch.randn(base.shape, generator=generator, dtype=torch.float64)  # on the CPU, then moved
        theta = base + config.jitter * jitter.to(base.device)
        limit = config.bound * (1 - 1e-6)
        start[name] = torch.atanh(theta.clamp(-limit, limit) / config.bound).requires_grad_(True)
    return start


def _constrained(raw: dict[str, torch.Tensor], config: TheoryConfig) -> dict[str, torch.Tensor]:
    return {name: config.bound * torch.tanh(value) for name, value in raw.items()}


def fit(x: torch.Tensor, y: torch.Tensor, atoms: int, gate: str, config: TheoryConfig,
        generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The least-squares atoms: L-BFGS from `restarts` starts near the truth, the best kept."""
    best, best_loss = None, math.inf
    for _ in range(config.restarts):
        raw = _start({k: v.to(x.device) for k, v in truth(config).items()}, atoms, config, generator)
        optimizer = torch.optim.LBFGS(list(raw.values()), lr=1.0, max_iter=config.iterations,
                                      tolerance_grad=1e-12, tolerance_change=1e-14, line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            loss = ((regression(x, _constrained(raw, config), gate, config) - y) ** 2).mean()
            loss.backward()
            return loss

        optimizer.step(closure)
        with torch.no_grad():
            params = _constrained(raw, config)
            loss = float(((regression(x, params, gate, config) - y) ** 2).mean())
        if math.isfinite(loss) and loss < best_loss:
            best, best_loss = {k: v.detach().clone() for k, v in params.items()}, loss
    if best is None:
        raise RuntimeError(f"every least-squares restart diverged (gate {gate}, n {len(y)}, L' {atoms})")
    return best


def simulate_point(config: TheoryConfig, n: int, replicate: int, device: str = "cpu") -> dict:
    """One sample of size n: the Voronoi loss of every (L', gate) fit, as {"L'": {gate: loss}}.

    The sample is drawn on the CPU, and the fits run on `device`."""
    true = {name: value.to(device) for name, value in truth(config).items()}
    data = torch.Generator().manual_seed(config.seed * 1_000_003 + n * 101 + replicate)
    x = (torch.rand((n, len(config.beta1)), generator=data, dtype=torch.float64) * 2 - 1).to(device)
    noise = (math.sqrt(config.noise) * torch.randn(n, generator=data, dtype=torch.float64)).to(device)
    losses: dict[str, dict[str, float]] = {str(atoms): {} for atoms in config.fitted}
    for gate in config.gates:
        with torch.no_grad():
            y = regression(x, true, gate, config) + noise
        for atoms in config.fitted:
            starts = torch.Generator().manual_seed(config.seed + 7919 * replicate + n)
            losses[str(atoms)][gate] = voronoi_loss(fit(x, y, atoms, gate, config, starts), true)
    return losses


def summarise(config: TheoryConfig, points: dict[tuple[int, int], dict]) -> dict:
    """Per (L', gate): the losses over (n, replicate), their mean and 10-90% band per n, the slope."""
    log_n = np.log(np.asarray(config.sizes, dtype=np.float64))
    results = {"config": dataclasses.asdict(config), "runs": []}
    for atoms in config.fitted:
        for gate in config.gates:
            values = np.array([[points[(n, r)][str(atoms)][gate] for r in range(config.replicates)]
                               for n in config.sizes])
            median = np.median(values, axis=1)
            slope = float(np.polyfit(log_n, np.log(median), 1)[0]) if len(log_n) > 1 else None
            results["runs"].append({
                "fitted_atoms": atoms, "gate": gate, "slope": slope, "median": median.tolist(),
                "mean": values.mean(axis=1).tolist(),
                "low": np.quantile(values, 0.1, axis=1).tolist(), "high": np.quantile(values, 0.9, axis=1).tolist(),
                "losses": values.tolist()})
    return results


def simulate(config: TheoryConfig) -> dict:
    """Every (n, replicate) in this process, summarised (the track runs the points as jobs)."""
    return summarise(config, {(n, r): simulate_point(config, n, r) for n in config.sizes
                              for r in range(config.replicates)})


def plot(results: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.files import save_figure

    sizes = np.asarray(results["config"]["sizes"])
    fitted = results["config"]["fitted"]
    figure, axes = plt.subplots(1, len(fitted), figsize=(5.5 * len(fitted), 4.5), squeeze=False)
    for axis, atoms in zip(axes[0], fitted):
        for run in (r for r in results["runs"] if r["fitted_atoms"] == atoms):
            slope = "" if run["slope"] is None else f" (slope {run['slope']:.2f})"
            line, = axis.loglog(sizes, run["median"], marker="o", label=f"{run['gate']}{slope}")
            axis.fill_between(sizes, run["low"], run["high"], color=line.get_color(), alpha=0.15)
        reference = np.asarray(next(r for r in results["runs"] if r["fitted_atoms"] == atoms)["median"])[0]
        axis.loglog(sizes, reference * (sizes / sizes[0]) ** -0.5, "k:", label="n^(-1/2)")
        kind = "over-specified" if atoms > 1 else "exact"
        axis.set_title(f"L' = {atoms} fitted atoms for 1 true ({kind})")
        axis.set_xlabel("sample size n")
        axis.set_ylabel("Voronoi loss D(G_n, G*) (median; 10-90% band)")
        axis.legend(fontsize="small")
        axis.grid(alpha=0.3, which="both")
    figure.suptitle("Prefix MoE least squares: linear gate vs NoRGa gates (our simulation design)")
    save_figure(figure, path)
    return path


def _register() -> None:
    from benchmarks.files import write_json_atomic
    from benchmarks.tracks.registry import Track, register_track

    @register_track("norga-theory")
    class NorgaTheoryTrack(Track):
        description = ("the prefix mixture-of-experts regression behind NoRGa: parameter-estimation error "
                       "against n, linear vs NoRGa gates (our simulation design)")
        PROFILES = {"tiny": TheoryConfig(sizes=(50, 100, 200), replicates=2, restarts=1, iterations=30,
                                         gates=("linear", "tanh")),
                    "default": TheoryConfig()}
        DEFAULT_SEEDS = (0,)

        def execute(self, run):
            from benchmarks.jobs import Job, fingerprint

            profile, seeds, out_dir, device, on_device = run.profile, run.seeds, run.out_dir, run.device, run.on_device
            written = []
            configs = {seed: dataclasses.replace(run.settings, seed=seed) for seed in seeds}
            jobs = [Job(f"jobs/seed{seed}/n{n}-r{r}", simulate_point, (config, n, r, device),
                        fingerprint(config, n, r, *on_device))
                    for seed, config in configs.items() for n in config.sizes for r in range(config.replicates)]
            outcomes = run.run_jobs(jobs)
            for seed, config in configs.items():
                points = {(n, r): outcomes[f"jobs/seed{seed}/n{n}-r{r}"] for n in config.sizes
                          for r in range(config.replicates)}
                results = {"track": self.name, "profile": profile, "device": device, **summarise(config, points)}
                suffix = "" if len(seeds) == 1 else f"-seed{seed}"
                written.append(write_json_atomic(out_dir / f"theory{suffix}.json", results))
                written.append(plot(results, out_dir / f"theory-estimation{suffix}.png"))
                run.say("slopes of log D against log n: " + ", ".join(
                    f"L'={r['fitted_atoms']} {r['gate']} {r['slope']:.2f}" for r in results["runs"]
                    if r["slope"] is not None))
            return written


_register()
