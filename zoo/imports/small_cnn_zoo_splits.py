"""The papers' split sets of the Small CNN Zoo: each a pure function of the NFN split file's row order.

Every paper below starts from the same file: Zhou et al. 2023's
`experiments/predict_gen_data_splits/<data set>_split.csv` (AllanYangZhou/nfn). It is read as their
loaders read it, with `pd.read_csv(..., header=None)`. So the header line "0", which writing a
one-column frame puts there, is read as row 0 too. Row 0 is then in the order twice.

Each loader keeps the rows with `step == 86`, in that order. It calls the final half (from `int(0.5 n)`)
the test set. It shuffles the first half's positions with `random.Random(0)`. It cuts them at `int(0.8
m)` into train and validation ("val" in their code).

Where they differ is the activation subset (the `config.activation` column).

`nfn` is Zhou et al. 2023's `experiments/data_utils.py` `ZooDataset`, with no activation filter.

`scalegmn-relu` and `scalegmn-tanh` are Kalogeropoulos et al. 2024's `src/data/cifar10_dataset.py`
`NFNZooDataset`. Its `activation_function` is relu / tanh (`configs/{cifar10,svhn}/scalegmn_*.yml`). The
`nfn` split is drawn first, on every final-step row. Each split then keeps its rows of the one
activation, in order. Their "hetero" runs (`activation_function: null`) are `nfn`.

`monomial-nfn-relu` and `monomial-nfn-tanh` are Tran et al. 2024's `experiments/data_utils.py`
`ZooDataset`. Its `filter_activation` is relu / tanh
(`experiments/predict_gen_configs/dset/zoo_cifar*.yaml`). The final-step rows of the one activation are
kept *before* the split. So the halves and the shuffle act on a shorter list, and the sets differ from
ScaleGMN's.

A rule is recorded only on the data sets its paper used: ScaleGMN on CIFAR-10-GS and SVHN-GS,
Monomial-NFN on CIFAR-10-GS. `nfn` is recorded on every one. This module is written from the reference
code's facts, not copied.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from zoo.dataset.provenance import KALOGEROPOULOS_BIBTEX, TRAN_MONOMIAL_BIBTEX, ZHOU_BIBTEX
from zoo.validation.bounds import MAX_SPLIT_FILE_BYTES, MAX_TABLE_ROWS
from zoo.validation.inputs import InputError, read_capped

NFN_FINAL_STEP = 86  # the references' `metrics["step"] == 86`
TEST_FRACTION, TRAIN_FRACTION_OF_REST, SHUFFLE_SEED = 0.5, 0.8, 0  # ZooDataset._split_indices_iid
Positions = dict[str, list[int]]  # split -> source rows (weights.npy / metrics.csv.gz row numbers), in order


def read_nfn_split_file(path: Path, rows: int) -> list[int]:
    """The NFN split file's indices as the references read it.

    They read it with `header=None`. So the first line, the header "0" that writing a one-column frame
    puts there, is read as index 0 too.
    """
    text = read_capped(path, MAX_SPLIT_FILE_BYTES, "NFN split file").decode("ascii", errors="replace")
    indices = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(indices) > MAX_TABLE_ROWS:
            raise InputError(f"{path}: more than {MAX_TABLE_ROWS:,} indices (zoo.validation.bounds.MAX_TABLE_ROWS)")
        try:
            value = int(line.strip())
        except ValueError:
            raise InputError(f"{path}: line {number}: {ascii(line)[:40]} is not a row index") from None
        if not 0 <= value < rows:
            raise InputError(f"{path}: line {number}: row {value} is outside the zoo's {rows:,} rows")
        indices.append(value)
    return indices


def zoo_dataset_cut(kept: Sequence[int]) -> Positions:
    """`kept` cut as `ZooDataset._split_indices_iid` cuts it.

    The second half (from int(0.5 n)) is the test set. The first half's positions are shuffled by
    random.Random(0) and cut at int(0.8 m).
    """
    half = int(TEST_FRACTION * len(kept))
    positions = list(range(half))
    cut = int(TRAIN_FRACTION_OF_REST * len(positions))
    random.Random(SHUFFLE_SEED).shuffle(positions)
    return {"train": [kept[p] for p in positions[:cut]], "validation": [kept[p] for p in positions[cut:]],
            "test": list(kept[half:])}


def nfn_split_positions(order: Sequence[int], steps: np.ndarray, final_step: int = NFN_FINAL_STEP) -> Positions:
    """Source rows per split of the NFN split (Zhou et al. 2023, experiments/data_utils.py `ZooDataset`).

    Rows are taken in the split file's order, kept where step == `final_step`, then `zoo_dataset_cut`.
    """
    return zoo_dataset_cut([row for row in order if steps[row] == final_step])


def scalegmn_split_positions(order: Sequence[int], steps: np.ndarray, activations: Sequence[str], activation: str,
                             final_step: int = NFN_FINAL_STEP) -> Positions:
    """ScaleGMN's subset (Kalogeropoulos et al. 2024, `NFNZooDataset`).

    The NFN split comes first. Then each split keeps its rows whose activation is `activation`, in the
    split's order.
    """
    split = nfn_split_positions(order, steps, final_step)
    return {name: [row for row in rows if activations[row] == activation] for name, rows in split.items()}


def monomial_split_positions(order: Sequence[int], steps: np.ndarray, activations: Sequence[str], activation: str,
                             final_step: int = NFN_FINAL_STEP) -> Positions:
    """Monomial-NFN's subset (Tran et al. 2024, `ZooDataset(filter_activation=...)`).

    First the final-step rows whose activation is `activation` are kept, in the split file's order. Then
    comes `zoo_dataset_cut`.
    """
    return zoo_dataset_cut([row for row in order if steps[row] == final_step and activations[row] == activation])


# --- the registry: split-set name -> the paper's rule -----------------------------------------------

@dataclasses.dataclass(frozen=True)
class SplitRule:
    description: str  # the rule said once, for the card and the docs; "{step}" is the final step
    citation: str  # the BibTeX of the paper whose loader this is
    datasets: tuple[str, ...] | None  # our data-set names the paper split this way; None: every one
    positions: Callable[[Sequence[int], np.ndarray, Sequence[str], int], Positions]  # (order, steps, activations, step)


SPLIT_RULES: dict[str, SplitRule] = {}


def register_split_rule(name: str, rule: SplitRule) -> SplitRule:
    if name in SPLIT_RULES:
        raise ValueError(f"split set {name!r} is registered already")
    SPLIT_RULES[name] = rule
    return rule


_READ = ("the split file's row order read with header=None, its header line putting row 0 in once more "
         "as the reference reads it")
_CUT = ("the second half the test set, the first half shuffled by random.Random(0) and cut 80/20 into train and "
        "validation, the reference's \"val\"")

register_split_rule("nfn", SplitRule(
    "the split of Zhou et al. 2023 (NFN, experiments/data_utils.py ZooDataset) and the papers that reuse its split "
    f"files: {_READ}, rows with step == {{step}} kept, {_CUT}. Row 0 appears twice where it is a step-{{step}} row.",
    ZHOU_BIBTEX, None, lambda order, steps, activations, final_step: nfn_split_positions(order, steps, final_step)))

SCALEGMN_DATASETS = ("cifar10_gs", "svhn_gs")  # configs/cifar10/, configs/svhn/
MONOMIAL_DATASETS = ("cifar10_gs",)  # experiments/predict_gen_configs/dset/zoo_cifar*.yaml
for _activation in ("relu", "tanh"):
    register_split_rule(f"scalegmn-{_activation}", SplitRule(
        f"the {_activation} subset of Kalogeropoulos et al. 2024 (ScaleGMN, src/data/cifar10_dataset.py NFNZooDataset, "
        f"activation_function: {_activation}): the `nfn` split drawn first, on every step-{{step}} row ({_READ}; "
        f"{_CUT}); then in each split only the rows with config.activation == {_activation!r} kept, in that order. "
        f"The filter comes after the split (Monomial-NFN's comes before it: `monomial-nfn-{_activation}` differs).",
        KALOGEROPOULOS_BIBTEX, SCALEGMN_DATASETS,
        lambda order, steps, activations, final_step, a=_activation:
            scalegmn_split_positions(order, steps, activations, a, final_step)))
    register_split_rule(f"monomial-nfn-{_activation}", SplitRule(
        f"the {_activation} subset of Tran et al. 2024 (Monomial-NFN, experiments/data_utils.py ZooDataset, "
        f"filter_activation: {_activation}): {_READ}, only rows with step == {{step}} and config.activation == "
        f"{_activation!r} kept, then {_CUT}. The filter comes before the split, so the halves and the shuffle act "
        f"on the {_activation} rows alone (ScaleGMN's comes after it: `scalegmn-{_activation}` differs).",
        TRAN_MONOMIAL_BIBTEX, MONOMIAL_DATASETS,
        lambda order, steps, activations, final_step, a=_activation:
            monomial_split_positions(order, steps, activations, a, final_step)))


def split_positions(order: Sequence[int], steps: np.ndarray, activations: Sequence[str], dataset: str,
                    final_step: int = NFN_FINAL_STEP) -> dict[str, Positions]:
    """Split-set name -> source rows per split, for every registered rule whose paper used `dataset`."""
    return {name: rule.positions(order, steps, activations, final_step) for name, rule in SPLIT_RULES.items()
            if rule.datasets is None or dataset in rule.datasets}
