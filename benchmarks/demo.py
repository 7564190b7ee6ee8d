"""The end-to-end demo behind `make demo`: zoo -> dataset -> baselines -> leaderboard.

By default it runs the `demo` profile of the bundled cnn-mnist spec, on 2 CPUs. It takes four
steps.

1. It trains a Small CNN Zoo on real MNIST with a local Ray instance, and packs it.
2. It loads the packed folder with `datasets.load_dataset`, and verifies it by recomputing metrics.
3. It benchmarks the MLP and STATNN baselines on generalization prediction over 3 seeds.
4. It submits both results to a leaderboard, which pins the zoo's test metadata and re-scores
   them. It renders the board (Markdown, plots, the HTML site) with a predicted-vs-true scatter
   plot, and audits it.

It prints the leaderboard table and the wall time. Every step is the same `nfnzoo` subcommand a
user would type. Everything it writes goes under `runs/demo/` (git-ignored)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from zoo.cli import main as nfnzoo


def step(title: str, argv: list[str]) -> None:
    print(f"\n=== {title}\n$ nfnzoo {' '.join(argv)}", flush=True)
    code = nfnzoo(argv)
    if code:
        raise SystemExit(f"demo step failed ({title}): exit code {code}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the nfnzoo demo end to end.")
    parser.add_argument("--out", default="runs/demo", help="folder for everything the demo writes")
    parser.add_argument("--profile", default="demo", help="profile of the cnn-mnist spec")
    parser.add_argument("--num-cpus", default=str(os.cpu_count() or 2))
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    out = Path(args.out)
    zoo_dir, results, board = out / "cnn-mnist", out / "results", out / "leaderboard"
    shutil.rmtree(board, ignore_errors=True)  # the demo's own board: re-running must not hit duplicates

    step("1. generate a Small CNN Zoo on MNIST with Ray, then pack it",
         ["generate", "cnn-mnist", "--profile", args.profile, "--out", str(zoo_dir), "--num-cpus", args.num_cpus])
    step("2. describe it", ["info", str(zoo_dir)])

    print(f"\n=== 3. load it with datasets.load_dataset\n>>> datasets.load_dataset({str(zoo_dir)!r}, 'cnn-mnist')")
    import datasets

    print(datasets.load_dataset(str(zoo_dir), "cnn-mnist"))
    step("4. verify checksums and recompute 4 checkpoints' metrics", ["verify", str(zoo_dir), "--recompute", "4"])

    for model in ("mlp", "statnn"):
        step(f"5. benchmark {model} on generalization prediction over seeds {args.seeds}",
             ["bench", "run", "--task", "generalization", "--model", model, "--data", str(zoo_dir),
              "--seeds", args.seeds, "--out", str(results / f"{model}.json")])
    for model in ("mlp", "statnn"):
        step(f"6. submit {model} to the leaderboard",
             ["leaderboard", "submit", str(results / f"{model}.json"), "--root", str(board), "--dataset", str(zoo_dir)])
    step("7. plot predicted against true test accuracy",
         ["bench", "scatter", str(results / "mlp.json"), str(results / "statnn.json"),
          "--out", str(out / "scatter.png")])
    step("8. render the leaderboard", ["leaderboard", "render", "--root", str(board), "--out", str(board / "rendered")])
    step("9. audit it: every entry re-scored from its stored predictions",
         ["leaderboard", "audit", "--root", str(board), "--require-verified"])
    print(f"\ndemo finished in {time.perf_counter() - start:.0f} s; outputs: {out}/ "
          f"(zoo, results, leaderboard/rendered/ with index.html, scatter.png)")


if __name__ == "__main__":
    sys.exit(main())
