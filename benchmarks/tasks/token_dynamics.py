"""The `token-dynamics` task: what the token-dynamics track's regime training reports, for the board.

The track (`benchmarks.tracks.tokens`, `nfnzoo track run token-dynamics`) trains tiny transformers
whose heads are held in a regime (Pham et al., NeurIPS 2025). They learn a character-level
language model of AG News text, and MNIST rows as tokens. So this task has no `run`: it is the
board's description of those results. Its metrics are the test cross-entropy and the test
accuracy. Cross-entropy is in nats per character or per image; lower is better. Accuracy is
next-character or digit, and is the ranking metric.

The dataset is the benchmark's definition (`task_config["definition"]`). That is the data, the
windows or the subset, the model's size and its training. Its canonical-JSON sha256 is the dataset
hash (`continual_learning.definition_hash`). Every regime and encoding shares it, so they rank on
one board.

The board pins two cells per test example as the dataset's test metadata (`definition_cells`).
Their model_ids are "example{k}/loss" and "example{k}/correct". A submission's predictions are each
example's mean cross-entropy and its share of correct predictions. Re-scoring recomputes both
metrics as their means. The per-example values need the model, and are taken as reported."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas

from benchmarks.tasks.registry import register_task
from benchmarks.tasks.track_task import TrackTask

METRICS = {"test_accuracy": True, "test_loss": False}
KINDS = ("loss", "correct")


MAX_TEST_EXAMPLES = 250_000  # a definition's declared test examples (the track's: 1,000); two cells each


def declared_examples(definition: Mapping) -> int:
    """The definition's number of test examples, checked before anything is built.

    It must be an int from 1 to MAX_TEST_EXAMPLES."""
    benchmark = definition.get("benchmark") if isinstance(definition, Mapping) else None
    examples = benchmark.get("test_examples") if isinstance(benchmark, Mapping) else None
    if isinstance(examples, bool) or not isinstance(examples, int):
        raise ValueError("the definition names no benchmark.test_examples (the number of test examples, an integer)")
    if not 1 <= examples <= MAX_TEST_EXAMPLES:
        raise ValueError(f"the definition's benchmark.test_examples must be from 1 to {MAX_TEST_EXAMPLES:,}, "
                         f"got {examples:,}")
    return examples


def definition_cells(definition: Mapping) -> pandas.DataFrame:
    """Every cell a results file reports for the definition's test examples: (model_id, example, kind)."""
    examples = declared_examples(definition)
    rows = [(f"example{k}/{kind}", k, kind) for k in range(examples) for kind in KINDS]
    return pandas.DataFrame(rows, columns=["model_id", "example", "kind"])


def example_predictions(loss: np.ndarray, correct: np.ndarray, seed: int) -> pandas.DataFrame:
    """Per-example losses and correct shares as predictions rows (seed, model_id, prediction)."""
    rows = [(seed, f"example{k}/{kind}", float(value)) for k in range(len(loss))
            for kind, value in (("loss", loss[k]), ("correct", correct[k]))]
    return pandas.DataFrame(rows, columns=["seed", "model_id", "prediction"])


@register_task("token-dynamics")
class TokenDynamics(TrackTask):
    """The token-dynamics track's trained regimes (see the module docstring); run with `nfnzoo track run`."""

    TRACKS = "token-dynamics"
    metrics = METRICS
    main_metric = "test_accuracy"
    required_metrics = ("test_accuracy", "test_loss")
    RESCORING = ("test loss and accuracy recomputed as the means of the submitted per-example cross-entropies and "
                 "correct shares (those need the model, and are taken as reported)")

    @classmethod
    def definition_cells(cls, definition: Mapping) -> pandas.DataFrame:
        return definition_cells(definition)

    @classmethod
    def cell_count(cls, definition: Mapping) -> int:
        return len(KINDS) * declared_examples(definition)

    @classmethod
    def describe_protocol(cls, task_config: Mapping[str, Any]) -> str:
        benchmark = task_config.get("benchmark", {})
        return (f"track {task_config.get('track')} ({task_config.get('profile')} profile): {benchmark.get('name')}, "
                f"{benchmark.get('test_examples')} test examples; the model's size and training are in the "
                "definition, its regime and encoding in its config")

    @classmethod
    def test_targets(cls, metadata: pandas.DataFrame, task_config: Mapping[str, Any]) -> pandas.DataFrame:
        return pandas.DataFrame({"model_id": metadata["model_id"].astype(str).to_numpy(), "target": np.nan,
                                 "kind": metadata["kind"].astype(str).to_numpy()})

    @classmethod
    def score_rows(cls, expected: pandas.DataFrame, predictions: np.ndarray) -> dict[str, float]:
        kind = expected["kind"].to_numpy()
        if not (kind == "loss").any() or not (kind == "correct").any():
            raise ValueError("the cells hold no loss or no correct-share rows")
        return {"test_loss": float(np.mean(predictions[kind == "loss"])),
                "test_accuracy": float(np.mean(predictions[kind == "correct"]))}
