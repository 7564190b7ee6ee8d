"""Benchmark: a population's random draws from the counter-based generator vs one generator per member.

A population has `--members` members drawing `--indices` values each. The defaults are 256 members
x 60,000, an MNIST epoch's worth of per-example draws. They also include x 512, one step's worth,
where the per-member Python loop counts. In one run, best of `--repeat`, it measures three ways.

The per-member torch.Generator is the present method. It calls
`torch.rand(indices, generator=g)` on each member's own generator, then `torch.stack`. The
generators are made once, outside the timing, as a population keeps them.

Counter-v1 calls `zoo.training.counter_rng.uniform` for all members at once, with per-member seeds.

Fused is the same with `fused=True`: the rounds as one torch.compile'd kernel. The compile happens
in the warm-up call, and is not timed.

It times the same pair for batch orders: `torch.randperm` per member vs `counter_rng.permutation`.
It prints draws per second, and the ratio counter / per-member. Only integer ops run in
counter-v1, so the ratio depends on the device's int64 throughput.

Run: `python -m benchmarks.perf.counter_rng` (add `--device cuda` where a GPU is present)."""

from __future__ import annotations

import argparse

import torch

from zoo.training import counter_rng
from benchmarks.perf.nfn import timed
from zoo.training.train import seeded_generator


def best_seconds(function, repeat: int, device: torch.device) -> float:
    """Best wall time of `repeat` calls after one warm-up, synchronising a CUDA device (`nfn.timed`)."""
    function()
    return min(timed(function, device) for _ in range(repeat))


def measure(members: int, indices: int, repeat: int, device: torch.device) -> list[tuple[str, float, float, float]]:
    """(draw, per-member, counter, fused counter draws/s) for uniform floats and permutations."""
    seeds = list(range(1000, 1000 + members))
    generators = [seeded_generator(seed, "dropout") for seed in seeds]
    cuda_generators = ([torch.Generator(device).manual_seed(seed) for seed in seeds]
                       if device.type == "cuda" else generators)
    seed_tensor = torch.tensor(seeds, device=device)

    def per_member_uniform():
        return torch.stack([torch.rand(indices, generator=g, device=device) for g in cuda_generators])

    def counter_uniform():
        return counter_rng.uniform(seed_tensor, 0, 0, 0, indices)

    def fused_uniform():
        return counter_rng.uniform(seed_tensor, 0, 0, 0, indices, fused=True)

    def per_member_permutation():
        return torch.stack([torch.randperm(indices, generator=g, device=device) for g in cuda_generators])

    def counter_permutation():
        return counter_rng.permutation(seed_tensor, 0, 0, 0, indices)

    def fused_permutation():
        return counter_rng.permutation(seed_tensor, 0, 0, 0, indices, fused=True)

    draws = members * indices
    rows = []
    for name, present, counter, fused in (("uniform float32", per_member_uniform, counter_uniform, fused_uniform),
                                          ("permutation", per_member_permutation, counter_permutation,
                                           fused_permutation)):
        rows.append((name, *(draws / best_seconds(f, repeat, device) for f in (present, counter, fused))))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=256)
    parser.add_argument("--indices", type=int, nargs="+", default=[60_000, 512],
                        help="draws per member: an epoch's worth, and a step's (e.g. a batch's crop offsets)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: as one Ray trial runs)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"{args.members} members on {device}, {args.threads} thread(s), best of {args.repeat}")
    print("Mdraw/s; ratios to per-member. fused: torch.compile'd rounds (compiled in the warm-up, not timed)")
    print(f"{'draw':<17}{'per member':>11}{'per-member':>12}{'counter-v1':>12}{'fused':>10}"
          f"{'counter/per-member':>20}{'fused/per-member':>18}")
    for indices in args.indices:
        for name, present, counter, fused in measure(args.members, indices, args.repeat, device):
            print(f"{name:<17}{indices:>11,}{present / 1e6:>12.1f}{counter / 1e6:>12.1f}{fused / 1e6:>10.1f}"
                  f"{counter / present:>19.2f}x{fused / present:>17.2f}x", flush=True)


if __name__ == "__main__":
    main()
