"""The token-dynamics track's tables and figures.

`minilm_table` lists every MiniLM head's predicted regime and eigenvalue ranges. It adds the
data-level drift and the observed growth of its tokens' moving parts, with the counts and the
agreement.

`training_table` gives test accuracy and loss, mean +- std over seeds. It has one row per
benchmark, regime and encoding.

`zoo_table` gives, per zoo (plain, residual) and regime count, the members and their accuracy.

`plot_trajectories` draws the mean norm and mean pairwise distance of the moving parts against
time. It draws one line per trained regime, from seed 0's first head with absolute encoding.
MiniLM's heads are grouped by observed behaviour (median and quartiles).

`plot_zoo` draws each member's test accuracy against the mean negative share of its heads' sym(A)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from benchmarks.files import save_figure
from benchmarks.tracks.tokens.conditions import REGIMES
from benchmarks.tracks.tokens.constrained import expected_regime

OBSERVED = ("divergent", "bounded", "convergent")


def _mean_std(values: Sequence[float], digits: int = 3) -> str:
    values = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    if not np.isfinite(values).all():
        return "diverged"
    return f"{values.mean():.{digits}f} ± {values.std(ddof=1) if len(values) > 1 else 0.0:.{digits}f}"


def minilm_table(study: Mapping) -> str:
    heads = study["heads"]
    lines = [f"MiniLM (all-MiniLM-L6-v2): {len(heads)} heads on {study['tokens']} tokens of {study['texts']} "
             "AG News articles", "", "| regime (conditions) | heads | observed divergent | bounded | convergent |",
             "|---|---|---|---|---|"]
    for regime in REGIMES:
        rows = [h for h in heads if h["regime"] == regime]
        seen = [sum(h["trajectory"]["observed"] == o for h in rows) for o in OBSERVED]
        lines.append(f"| {regime} | {len(rows)} | " + " | ".join(map(str, seen)) + " |")
    decided = [h for h in heads if h["regime"] in ("divergent", "convergent")]
    agree = sum(h["trajectory"]["observed"] == h["regime"] for h in decided)
    drift = [h for h in heads if h["energy_drift"] is not None]
    by_drift = sum((h["energy_drift"] > 0) == (h["trajectory"]["observed"] == "divergent") for h in drift)
    lines += ["", f"Decided by the conditions: {len(decided)} of {len(heads)} heads; the integration agrees on "
              f"{agree} of them. Not decided: {len(heads) - len(decided)}.",
              f"The data-level drift's sign (positive: divergent) matches the integration on {by_drift} of "
              f"{len(drift)} heads.", "",
              "| layer | head | regime | dim | sym(W) eig. | sym(A) eig. | neg. share | drift | growth | observed |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for h in heads:
        t = h["trajectory"]
        lines.append(f"| {h['layer']} | {h['head']} | {h['regime']} | {h['dimension']} | "
                     f"[{h['score_eigenvalues'][0]:.3f}, {h['score_eigenvalues'][1]:.3f}] | "
                     f"[{h['value_eigenvalues'][0]:.3f}, {h['value_eigenvalues'][1]:.3f}] | "
                     f"{h['negative_share']:.2f} | {_number(h['energy_drift'], '.4f')} | "
                     f"{_number(t['growth'], '.3g')} | "
                     f"{t['observed']} |")
    return "\n".join(lines) + "\n"


def _number(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def training_table(outcomes: Mapping[tuple[str, str, str], Sequence[dict]], title: str) -> str:
    """outcomes: (benchmark, regime, encoding) -> the seeds' outcomes."""
    lines = [f"## {title}", "", "| benchmark | regime | encoding | test accuracy | test loss | heads in regime | "
             "rotated positions in regime | s / seed |", "|---|---|---|---|---|---|---|---|"]
    for (benchmark, regime, encoding), runs in outcomes.items():
        kept = [sum(h["regime"] == expected_regime(regime) for h in run["head_regimes"]) for run in runs]
        total = len(runs[0]["head_regimes"])
        rotated = [x for run in runs for h in run["head_regimes"] for x in h.get("rotary_regimes", [])]
        positions = f"{sum(x == expected_regime(regime) for x in rotated)}/{len(rotated)}" if rotated else "—"
        lines.append(f"| {benchmark} | {regime} | {encoding} | "
                     f"{_mean_std([r['metrics']['test_accuracy'] for r in runs])} | "
                     f"{_mean_std([r['metrics']['test_loss'] for r in runs])} | "
                     f"{min(kept)}/{total} | {positions} | {np.mean([r['train_time_s'] for r in runs]):.0f} |")
    return "\n".join(lines) + "\n"


def zoo_table(study: Mapping) -> str:
    lines = [f"Transformer zoo ({study['spec']}, profile {study['profile']}): every member's heads by the conditions",
             "", "| zoo | members | heads divergent | convergent | mixed | undecided | mean neg. share | "
             "block-1 heads observed divergent / bounded / convergent | test acc. (median) | "
             "Spearman(acc., neg. share) |", "|---|---|---|---|---|---|---|---|---|---|"]
    from scipy.stats import spearmanr

    for residual in (False, True):
        members = [m for m in study["members"] if m["residual"] == residual]
        if not members:
            continue
        counts = {r: sum(m["regimes"].count(r) for m in members) for r in REGIMES}
        acc = np.array([m["test_accuracy"] for m in members])
        share = np.array([m["negative_share"] for m in members])
        varied = len(members) > 2 and acc.std() > 0 and share.std() > 0
        rho = spearmanr(acc, share).statistic if varied else float("nan")
        seen = [sum(m["first_block_observed"].count(o) for m in members) for o in OBSERVED]
        lines.append(f"| {'residual' if residual else 'plain (released)'} | {len(members)} | {counts['divergent']} | "
                     f"{counts['convergent']} | {counts['mixed']} | {counts['undecided']} | {share.mean():.3f} | "
                     f"{' / '.join(map(str, seen))} | "
                     f"{np.median(acc):.3f} | {rho:.3f} |")
    return "\n".join(lines) + "\n"


def plot_trajectories(regime_runs: Mapping[str, dict], minilm: Mapping | None, path: Path) -> Path:
    """regime_runs: label -> a run outcome (its first head's trajectory is drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for label, run in regime_runs.items():
        t = run["trajectories"][0]
        times = np.asarray(t["times"]) / t["times"][-1] if t["times"][-1] else np.asarray(t["times"])
        axes[0, 0].semilogy(times, np.asarray(t["moving_norm"], dtype=float), label=label)
        axes[0, 1].semilogy(times, np.maximum(np.asarray(t["moving_distance"], dtype=float), 1e-12), label=label)
    axes[0, 0].set_title("trained regimes: mean token norm (moving part)")
    axes[0, 1].set_title("trained regimes: mean pairwise distance")
    if minilm is not None:
        for observed, colour in zip(OBSERVED, ("tab:red", "tab:gray", "tab:blue")):
            rows = [h["trajectory"] for h in minilm["heads"] if h["trajectory"]["observed"] == observed]
            for axis, key in ((axes[1, 0], "moving_norm"), (axes[1, 1], "moving_distance")):
                if not rows:
                    continue
                length = min(len(r[key]) for r in rows)
                values = np.array([np.asarray(r[key][:length], dtype=float) / max(r[key][0] or 0.0, 1e-300)
                                   for r in rows])
                grid = np.linspace(0, length / (len(rows[0]["times"])), length)
                low, mid, high = np.nanpercentile(values, [25, 50, 75], axis=0)
                axis.semilogy(grid, mid, color=colour, label=f"{observed} ({len(rows)} heads)")
                axis.fill_between(grid, low, high, color=colour, alpha=0.2)
        axes[1, 0].set_title("MiniLM heads: norm / initial (median, quartiles)")
        axes[1, 1].set_title("MiniLM heads: distance / initial")
    for axis in axes.flat:
        axis.set_xlabel("time / horizon (10 / |V|)")
        if axis.lines:
            axis.legend(fontsize=7)
    figure.tight_layout()
    return save_figure(figure, path)


def zoo_targets(study: Mapping):
    """Per member, the quantities a weight-space model can be asked to predict.

    They are its heads' mean negative share of sym(A), the mean log10 growth of its first block's heads
    on MNIST, and their regimes. Rows carry `model_id`, so they join with the zoo's metadata."""
    import pandas

    return pandas.DataFrame([{"model_id": m["model_id"], "residual": m["residual"], "split": m["split"],
                              "test_accuracy": m["test_accuracy"], "negative_share": m["negative_share"],
                              "log10_growth": float(np.mean(np.log10(np.maximum(
                                  np.asarray(m["first_block_growth"], dtype=float), 1e-300)))),
                              "regimes": ",".join(m["regimes"])} for m in study["members"]])


def plot_zoo(study: Mapping, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = zoo_targets(study)
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for residual, marker in ((False, "o"), (True, "^")):
        rows = targets[targets["residual"] == residual]
        label = "residual" if residual else "plain (released)"
        axes[0].scatter(rows["negative_share"], rows["test_accuracy"], s=14, marker=marker, alpha=0.7, label=label)
        axes[1].scatter(rows["log10_growth"], rows["test_accuracy"], s=14, marker=marker, alpha=0.7, label=label)
    axes[0].set_xlabel("mean share of negative eigenvalues of sym(A) over the member's heads")
    axes[1].set_xlabel("mean log10 growth of the first block's tokens (ODE on MNIST)")
    axes[0].set_ylabel("test accuracy")
    figure.suptitle(f"{study['spec']} ({study['profile']}): heads' regime vs accuracy")
    axes[0].legend()
    return save_figure(figure, path)
