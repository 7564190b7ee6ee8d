"""Which seeds a benchmark run may take: the one rule for `--seeds`, the harness and the tracks.

Seeds go to torch, numpy and scikit-learn. scikit-learn's `random_state` takes at most 2**32 - 1.
So a seed is an integer from 0 to `MAX_SEED`. A run takes at most `MAX_SEEDS` of them. A thousand
seeds is already days of work, and each seed's record is kept until the results are written.

`benchmarks.command_arguments.parse_seeds` checks a range's length arithmetically against the
same bound, before it lists any seed. This module imports nothing, so the CLI can use it cheaply."""

from __future__ import annotations

from typing import Sequence

MAX_SEEDS = 1_000
MAX_SEED = 2**32 - 1


def check_seeds(seeds: Sequence[int]) -> list[int]:
    """`seeds` as a list if they are 1 to `MAX_SEEDS` distinct integers from 0 to `MAX_SEED`, else a ValueError."""
    if len(seeds) > MAX_SEEDS:
        raise ValueError(f"expected at most {MAX_SEEDS:,} seeds, got {len(seeds):,}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("give at least one seed")
    if any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds must be integers, got {seeds[:20]}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be unique, got {seeds[:20]}")
    outside = [seed for seed in seeds if not 0 <= seed <= MAX_SEED]
    if outside:
        raise ValueError(f"seeds are integers from 0 to {MAX_SEED:,}; got {outside[:5]}")
    return seeds
