"""Benchmark: the PSNR distribution of SIREN fitting recipes on the same images.

`inr-mnist`'s base spec fits with SIREN's recipe: Adam at 1e-4, 3,000 steps. Its `fast` profile uses
a higher rate and fewer steps. A faster recipe may replace the paper's only if its fits are at
least as good.

So this fits the same images with each recipe. It takes every `--every`-th of the 70,000; 1,000 by
default. Each image starts from the same seeded initialization the zoo uses (`init_siren`, seeded
by run seed and image index). Fits go through the zoo's population trainer on one thread.

Per recipe it prints the PSNR quantiles (min, 1%, 5%, 25%, median) and the count below 30 dB. It
prints the seconds and SIREN-steps per second. It says whether the fast recipe is at least as good
at every quantile. A diverged fit counts as the worst PSNR, and the fast recipe may not diverge
more often.

Run: `python -m benchmarks.perf.inr_recipes [--profiles base,fast] [--every 70] [--json out.json]`."""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch

from zoo.families import create_family
from zoo.families.inr import INRArchitecture, fit_metrics, init_siren
from zoo.families.inr_population import fit_population
from zoo.planning.spec import load_spec
from zoo.training.train import seeded_generator

QUANTILES = {"min": 0, "p1": 1, "p5": 5, "p25": 25, "median": 50}
POPULATION = 64  # the CPU population size of the INR family


def fit_psnr(spec, images: torch.Tensor, index: list[int], seed: int) -> tuple[np.ndarray, float]:
    """PSNR (dB) of each listed image's fit under `spec`'s recipe, and the seconds it took."""
    arch = INRArchitecture(**spec.architecture)
    learning_rate = float(spec.search_space.fixed["learning_rate"])
    steps = spec.training.epochs
    start, psnr = time.perf_counter(), []
    for first in range(0, len(index), POPULATION):
        chunk = index[first:first + POPULATION]
        inits = [init_siren(arch, seeded_generator(seed, f"siren_init/{i}")) for i in chunk]
        _, mses, finite = fit_population(arch, inits, images[chunk],
                                         [learning_rate] * len(chunk), steps, [steps])[steps]
        psnr += [fit_metrics(m if ok else math.nan, 0)["psnr"] for m, ok in zip(mses, finite)]
    return np.array(psnr), time.perf_counter() - start


def summarize(psnr: np.ndarray) -> dict[str, float]:
    """Quantiles with a diverged fit counted as -inf dB (the worst), never dropped."""
    scored = np.where(np.isnan(psnr), -np.inf, psnr)
    out = {name: float(np.percentile(scored, q, method="lower")) for name, q in QUANTILES.items()}
    out.update(diverged=int(np.isnan(psnr).sum()), below_30_db=int((scored < 30).sum()))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="inr-mnist")
    parser.add_argument("--profiles", default="base,fast", help="comma-separated; 'base' is the spec without a profile")
    parser.add_argument("--every", type=int, default=70, help="fit every N-th image of the 70,000 (default 70: 1,000)")
    parser.add_argument("--json", default=None, help="also write the figures (and every PSNR) here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as a Ray trial

    specs = {name: load_spec(args.spec, None if name == "base" else name) for name in args.profiles.split(",")}
    images = create_family("inr").load_data(specs[next(iter(specs))]).x
    index = list(range(0, len(images), args.every))
    rows = {}
    for name, spec in specs.items():
        psnr, seconds = fit_psnr(spec, images, index, seed=spec.seeds[0])
        steps = spec.training.epochs
        rows[name] = {"learning_rate": float(spec.search_space.fixed["learning_rate"]), "steps": steps,
                      "seconds": seconds, "siren_steps_per_s": len(index) * steps / seconds, **summarize(psnr),
                      "psnr": [value if math.isfinite(value) else None for value in psnr.tolist()]}
    print(f"{len(index)} images (every {args.every}th), one thread; PSNR in dB on the [0, 1] scale")
    print(f"{'recipe':<8}{'lr':>9}{'steps':>7}" + "".join(f"{q:>8}" for q in QUANTILES) + f"{'<30dB':>7}{'s':>8}")
    for name, row in rows.items():
        print(f"{name:<8}{row['learning_rate']:>9.0e}{row['steps']:>7}" + "".join(f"{row[q]:>8.2f}" for q in QUANTILES)
              + f"{row['below_30_db']:>7}{row['seconds']:>8.0f}")
    if "base" in rows:
        for name, row in rows.items():
            if name != "base":
                better = all(row[q] >= rows["base"][q]
                             for q in QUANTILES) and row["diverged"] <= rows["base"]["diverged"]
                print(f"{name} vs base: "
                      f"{'at least as good at every quantile' if better else 'WORSE at some quantile'}; "
                      f"{rows['base']['seconds'] / row['seconds']:.2f}x faster")
    if args.json:
        with open(args.json, "w") as handle:  # -inf quantiles (diverged fits) as null: strict JSON
            json.dump({"images": index, "recipes": {name: {k: (None if isinstance(v, float) and not math.isfinite(v)
                                                               else v) for k, v in row.items()}
                                                        for name, row in rows.items()}}, handle, allow_nan=False)


if __name__ == "__main__":
    main()
