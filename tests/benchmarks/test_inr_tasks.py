"""INR classification and INR editing on a real (tiny) SIREN zoo, through the harness.

The zoo is `inr-mnist`'s `tiny` profile (tests/conftest.py): 28 SIRENs fitted to real MNIST
images. Checked here: both tasks run end to end for every model they list and write what the
results schema documents; the edit target is OpenCV's dilation and equals an independent 3x3
maximum filter on real images; group augmentation keeps each SIREN's function; an edited
SIREN's render is invariant to the symmetry group for equivariant models and not for the MLP
(negative control); and the wrong kind of zoo or model fails before training with a message
naming what is needed.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from benchmarks.edits import apply_edit
from benchmarks.harness import examples_path, load_splits, predictions_path, run_benchmark, run_on_splits
from benchmarks.plots import edit_grid
from benchmarks.results import load_results
from benchmarks.tasks.inr_editing import EditedRender, INREditingConfig
from benchmarks.tasks.learners import Problem, by_gradient, warmed_up
from benchmarks.tasks.rows import augment_rows, select_rows
from nfn_models import create_model
from zoo.data.images import SOURCES
from zoo.families import create_family
from zoo.families.inr import INRArchitecture, coordinate_grid, siren_forward
from zoo.weightspace import WeightBatch
from benchmarks.run_options import RunOptions

SMALL = {"np": {"channels": (4,), "hidden_sizes": (16,)}, "hnp": {"channels": (4,), "hidden_sizes": (16,)},
         "monomial_nfn": {"group": "sign", "channels": (4,), "hidden_sizes": (16,)},
         "magep_nfn": {"group": "sign", "channels": (4, 4), "invariant_channels": 4, "hidden_sizes": (16,)},
         "mlp": {"hidden_sizes": (16,)}, "statnn": {"hidden_sizes": (16,)},
         "ng_gnn": {"hidden_dim": 8, "num_layers": 2, "fourier_features": 8},
         "ng_t": {"hidden_dim": 8, "num_layers": 2, "num_heads": 2, "fourier_features": 8},
         "scalegmn": {"mode": "sign", "hidden_dim": 8, "num_layers": 2}}
FAST = {"epochs": 2, "batch_size": 8}


@pytest.fixture(scope="module")
def inr_splits(tiny_inr_zoo_folder):
    return load_splits(tiny_inr_zoo_folder, None)


@pytest.fixture(scope="module")
def mnist_images():
    train, test, _ = SOURCES.get("mnist")()
    return torch.cat([train.x, test.x])


# --- the edit operators ----------------------------------------------------------------------

def test_dilation_is_opencvs_and_equals_an_independent_3x3_maximum_filter_on_real_images(mnist_images):
    from scipy.ndimage import grey_dilation

    images = mnist_images[[0, 7, 12345, 69999]]
    edited = apply_edit("dilate", images)
    pooled = torch.nn.functional.max_pool2d(images, kernel_size=3, stride=1, padding=1)  # -inf padding
    torch.testing.assert_close(edited, pooled, rtol=0, atol=0)
    for image, out in zip(images, edited):
        as_bytes = np.round(image[0].numpy() * 255).astype(np.uint8)
        assert np.array_equal(np.round(out[0].numpy() * 255).astype(np.uint8), grey_dilation(as_bytes, size=(3, 3)))
    assert (edited >= images).all() and (edited > images).any()  # dilation only brightens


def test_contrast_edit_is_clahe_on_the_lightness_channel_of_a_synthetic_color_image():
    generator = torch.Generator().manual_seed(0)
    low_contrast = (0.45 + 0.1 * torch.rand(2, 3, 32, 32, generator=generator)).mul(255).round().div(255)
    out = apply_edit("contrast", low_contrast)
    assert out.shape == low_contrast.shape and out.min() >= 0 and out.max() <= 1
    assert out.std() > 2 * low_contrast.std()  # CLAHE stretches a narrow intensity range
    with pytest.raises(ValueError, match="color images"):
        apply_edit("contrast", low_contrast[:, :1])
    with pytest.raises(ValueError, match="not 8-bit intensities"):
        apply_edit("dilate", torch.full((1, 1, 4, 4), 0.5001))


# --- rows and augmentation -------------------------------------------------------------------

def test_augmented_copies_are_the_same_functions(inr_splits):
    splits, _ = inr_splits
    train = splits["train"]
    keep = select_rows(train.metadata, "train", ["image_index"], "final")
    assert keep.sum() == 18  # one final checkpoint per run
    weights, source, ids = augment_rows(train, keep, "train", seed=3, copies=2)
    assert len(weights) == 54 and ids[18].endswith("~1") and ids[53].endswith("~2")
    architecture = INRArchitecture()
    coords = coordinate_grid(28)
    renders = siren_forward(architecture, weights.tensors, coords)
    torch.testing.assert_close(renders[18:36], renders[:18], rtol=1e-4, atol=1e-4)  # same image
    assert (weights.tensors[0][18:36] - weights.tensors[0][:18]).abs().max() > 0.1  # different weights
    assert list(source[18:36]) == list(range(18))


def test_a_step_warmup_ramps_linearly_then_holds():
    rates = [warmed_up(1e-3, step, 4) for step in range(6)]
    assert rates == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])
    assert warmed_up(1e-3, 0, 0) == 1e-3


def _scripted(scores: list[float], higher_is_better: bool, **progress):
    """by_gradient on a tiny linear model whose validation scores are `scores`, epoch by epoch."""
    space = create_family("inr").weight_space({})
    weights = WeightBatch(space, tuple(torch.randn(6, *t.shape, generator=torch.Generator().manual_seed(0))
                                       for t in space.tensors))
    script = iter(scores)
    problem = Problem(weights, torch.zeros(6), weights, torch.zeros(6), torch.zeros(6), torch.nn.functional.mse_loss,
                      lambda targets, predictions: next(script), "score", 0, higher_is_better=higher_is_better,
                      **progress)
    config = INREditingConfig(epochs=len(scores), batch_size=3)
    return by_gradient(create_model("mlp", space, hidden_sizes=(4,)), problem, config).selection


def test_a_long_training_reports_its_epochs_and_a_quick_one_stays_quiet():
    lines: list[str] = []
    selection = _scripted([3.0, 1.0, 2.0], higher_is_better=False, report=lines.append, report_every_s=0.0)
    assert len(lines) == 3 and lines[0].startswith("epoch 1/3: training loss ")
    assert lines[1].endswith(" s]") and "validation score 1.0000 (best 1.0000, epoch 2)" in lines[1]
    assert "validation score 2.0000 (best 1.0000, epoch 2)" in lines[2]
    assert selection == _scripted([3.0, 1.0, 2.0], higher_is_better=False)  # reporting changes nothing
    quiet: list[str] = []
    _scripted([3.0, 1.0, 2.0], higher_is_better=False, report=quiet.append, report_every_s=3600.0)
    assert quiet == []


def test_selection_keeps_the_lowest_mse_or_the_highest_score_and_skips_non_finite_epochs():
    assert _scripted([3.0, 1.0, 2.0], higher_is_better=False) == {"epoch": 2, "validation_score": 1.0}
    assert _scripted([3.0, 1.0, 2.0], higher_is_better=True) == {"epoch": 1, "validation_score": 3.0}
    assert _scripted([math.nan, 2.0, 1.0], higher_is_better=False) == {"epoch": 3, "validation_score": 1.0}
    with pytest.raises(ValueError, match="validation score was not finite after any of the 2 epochs"):
        _scripted([math.nan, math.inf], higher_is_better=False)


# --- INR classification ------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["mlp", "statnn", "np", "hnp", "monomial_nfn", "magep_nfn"])
def test_classification_runs_for_every_listed_model(inr_splits, model, tmp_path):
    splits, dataset = inr_splits
    out = tmp_path / f"{model}.json"
    results = run_on_splits("inr-classification", model, splits, dataset,
                            RunOptions([0], model_overrides=SMALL[model], task_overrides=FAST, progress=False),
                            out)
    metrics = results["per_seed"][0]["metrics"]
    assert 0 <= metrics["accuracy"] <= 1 and set(metrics) == {"accuracy"}
    table = __import__("pandas").read_csv(predictions_path(out))
    assert len(table) == 8 and set(table["prediction"]) <= set(range(10))  # the 8 test SIRENs' final fits
    labels = splits["test"].metadata.set_index("model_id")["label"]
    assert (table["target"].to_numpy() == labels.loc[table["model_id"]].to_numpy()).all()
    table_accuracy = float((table["target"] == table["prediction"]).mean())
    assert metrics["accuracy"] == pytest.approx(table_accuracy)  # the predictions re-score to the metric
    assert results["model_config"]["out_features"] == 10  # what ran: the task sets the class count
    assert load_results(out).examples is None


def test_classification_with_augmentation_records_it_and_differs(inr_splits):
    splits, dataset = inr_splits
    plain = run_on_splits("inr-classification", "mlp", splits, dataset,
                          RunOptions([0], model_overrides=SMALL["mlp"], task_overrides=FAST, progress=False))
    augmented = run_on_splits("inr-classification", "mlp", splits, dataset,
                              RunOptions([0], model_overrides=SMALL["mlp"],
                                         task_overrides={**FAST, "augment_copies": 2}, progress=False))
    assert augmented["task_config"]["augment_copies"] == 2
    assert plain["per_seed"][0]["selection"]["train_rows"] == 18
    assert augmented["per_seed"][0]["selection"]["train_rows"] == 54  # the originals and 2 views of each


def test_classification_refuses_a_cnn_zoo_a_fitted_model_and_a_wrong_class_count(inr_splits, tiny_zoo):
    with pytest.raises(ValueError, match="reads each checkpoint's class from the 'label' metadata column"):
        run_benchmark("inr-classification", "mlp", tiny_zoo, None,
                      RunOptions([0], model_overrides=SMALL["mlp"], task_overrides=FAST, progress=False))
    splits, dataset = inr_splits
    with pytest.raises(ValueError, match="fitted"):
        run_on_splits("inr-classification", "xgboost", splits, dataset,
                      RunOptions([0], model_overrides={"max_rounds": 2}, task_overrides=FAST, progress=False))
    with pytest.raises(ValueError, match="the splits hold 10 classes; the model's out_features is 3"):
        run_on_splits("inr-classification", "mlp", splits, dataset,
                      RunOptions([0], model_overrides={"out_features": 3}, task_overrides=FAST, progress=False))
    with pytest.raises(ValueError, match="reads a model's invariant output; model 'np' is configured with "
                                         "output='weights'"):
        run_on_splits("inr-classification", "np", splits, dataset,
                      RunOptions([0], model_overrides={"preset": "inr-editing-budget"}, task_overrides=FAST,
                                 progress=False))


# --- INR editing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["np", "hnp", "monomial_nfn", "magep_nfn", "mlp", "ng_gnn", "ng_t", "scalegmn"])
def test_editing_runs_for_every_listed_model_and_scores_renders_against_the_dilated_source(
        inr_splits, mnist_images, model, tmp_path):
    splits, dataset = inr_splits
    out = tmp_path / f"{model}.json"
    overrides = {k: v for k, v in SMALL[model].items() if k != "hidden_sizes" or model == "mlp"}
    results = run_on_splits("inr-editing", model, splits, dataset,
                            RunOptions([0, 1], model_overrides=overrides, task_overrides={**FAST, "examples": 3},
                                       progress=False),
                            out)
    seed = results["per_seed"][0]
    # the unedited baseline, recomputed independently: each test SIREN's final fit, rendered, against
    # a 3x3 maximum filter of its MNIST image, on [-1, 1]
    test = splits["test"].metadata.reset_index(drop=True)
    final = (test["epoch"] == 200).to_numpy()
    weights = splits["test"].weights[torch.tensor(final)]
    renders = siren_forward(INRArchitecture(), weights.tensors, coordinate_grid(28))[..., 0]
    images = mnist_images[torch.tensor(test.loc[final, "image_index"].to_numpy())]
    targets = torch.nn.functional.max_pool2d(images, 3, 1, 1).flatten(1) * 2 - 1
    assert seed["ranking"]["mse_unedited"] == pytest.approx(float((renders - targets).square().mean()), rel=1e-5)
    assert np.isfinite(seed["metrics"]["mse"]) and results["summary"]["mse"]["mean"] > 0
    assert seed["metrics"]["mse"] != seed["ranking"]["mse_unedited"]  # the delta changed the renders
    assert results["model_config"]["output"] == "weights"  # recorded as run
    table = __import__("pandas").read_csv(predictions_path(out))
    assert len(table) == 16
    assert table.loc[table["seed"] == 0, "prediction"].mean() == pytest.approx(seed["metrics"]["mse"])
    arrays = dict(np.load(examples_path(out), allow_pickle=False))
    assert arrays["edited"].shape == arrays["target"].shape == arrays["original"].shape == (3, 1, 28, 28)
    assert load_results(out).examples == examples_path(out).name


@pytest.mark.parametrize("model, group", [("np", "permutation"), ("hnp", "permutation"), ("monomial_nfn", "sign"),
                                          ("magep_nfn", "sign"), ("mlp", None), ("ng_gnn", "permutation"),
                                          ("ng_t", "permutation"), ("scalegmn", "sign")])
def test_edited_renders_are_invariant_to_the_group_at_the_editing_presets(inr_splits, model, group):
    """A SIREN and its group-transformed copy render the same image; an equivariant editor keeps that
    true of the edited SIRENs (at the budget preset the suite runs); the MLP does not (the control)."""
    splits, _ = inr_splits
    weights = splits["test"].weights.to(dtype=torch.float32)[:4]
    symmetry = dataclasses.replace(create_family("inr").symmetry({}), mode=group or "sign")
    moved = symmetry.act(symmetry.sample(torch.Generator().manual_seed(0), 4), weights)
    torch.manual_seed(0)
    net = EditedRender(create_model(model, weights.space, preset="inr-editing-budget"), weights.space,
                       INRArchitecture(), delta_scale=1.0).eval()
    with torch.no_grad():
        gap = float((net(moved) - net(weights)).abs().max())
        unedited = float((siren_forward(INRArchitecture(), moved.tensors, net.coords)
                          - siren_forward(INRArchitecture(), weights.tensors, net.coords)).abs().max())
    assert unedited < 1e-4  # the group preserves each SIREN's function
    if group:
        assert gap < 1e-3, f"{model}: edited renders differ by {gap:.2e} under {group}"
    else:
        assert gap > 1e-2, "the MLP's edit should depend on the weights' order"


def test_editing_refuses_a_model_without_a_weight_output_a_cnn_zoo_and_unreachable_images(
        inr_splits, tiny_zoo, monkeypatch):
    splits, dataset = inr_splits
    with pytest.raises(ValueError, match="needs a model with a weight-space output.*'statnn' has none"):
        run_on_splits("inr-editing", "statnn", splits, dataset,
                      RunOptions([0], model_overrides={}, task_overrides=FAST, progress=False))
    with pytest.raises(ValueError, match="edits SIRENs"):
        run_benchmark("inr-editing", "mlp", tiny_zoo, None,
                      RunOptions([0], model_overrides={}, task_overrides=FAST, progress=False))
    bare = {name: dataclasses.replace(split, metadata=split.metadata.copy()) for name, split in splits.items()}
    for split in bare.values():
        split.metadata.attrs.pop("spec")
    with pytest.raises(ValueError, match="needs the zoo's spec to find the source images"):
        run_on_splits("inr-editing", "mlp", bare, dataset,
                      RunOptions([0], model_overrides={}, task_overrides=FAST, progress=False))

    def unreachable():
        raise OSError("no local mnist.npz and no network")

    monkeypatch.setitem(SOURCES._items, "mnist", unreachable)
    with pytest.raises(ValueError, match=r"images the SIRENs were fitted to \(data source 'mnist', by the "
                                         r"image_index column\), and they are not reachable here: no local"):
        run_on_splits("inr-editing", "mlp", splits, dataset,
                      RunOptions([0], model_overrides={}, task_overrides=FAST, progress=False))


def test_the_edit_figure_puts_each_models_render_beside_the_target(inr_splits, tmp_path):
    splits, dataset = inr_splits
    paths = []
    for model in ("np", "mlp"):
        path = tmp_path / f"{model}.json"
        overrides = {"channels": (4,)} if model == "np" else {"hidden_sizes": (16,)}
        run_on_splits("inr-editing", model, splits, dataset,
                      RunOptions([0], model_overrides=overrides, task_overrides={**FAST, "examples": 4},
                                 progress=False),
                      path)
        paths.append(path)
    figure = edit_grid(paths, tmp_path / "edits.png", images=3)
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = tmp_path / "other.json"
    run_on_splits("inr-editing", "mlp", splits, dataset,
                  RunOptions([0], model_overrides={"hidden_sizes": (16,)},
                             task_overrides={**FAST, "examples": 2, "checkpoints": "all"}, progress=False),
                  other)
    data = json.loads(other.read_text())
    assert data["examples"] == "other.examples.npz"
    with pytest.raises(ValueError, match="example SIRENs differ"):
        edit_grid([paths[0], other], tmp_path / "bad.png")
    with pytest.raises(ValueError, match="kept no example renders"):
        classification = tmp_path / "cls.json"
        run_on_splits("inr-classification", "mlp", splits, dataset,
                      RunOptions([0], model_overrides=SMALL["mlp"], task_overrides=FAST, progress=False),
                      classification)
        edit_grid([classification], tmp_path / "none.png")


def test_the_inr_suites_run_their_budget_entries_and_tabulate_the_main_metric(tiny_inr_zoo_folder, tmp_path):
    from benchmarks.suite import SUITES, run_suite, suite_table

    graph_models = {"ng_gnn", "ng_t", "scalegmn", "dwsnet"}  # issue 35's, with ProbeGen for classification
    assert {e.model for e in SUITES.get("inr-classification")().entries} == \
        {"mlp", "statnn", "np", "hnp", "monomial_nfn", "magep_nfn", "probegen", *graph_models}
    assert {e.model for e in SUITES.get("inr-editing")().entries} == \
        {"np", "hnp", "monomial_nfn", "magep_nfn", "mlp", *graph_models}
    rows = run_suite("inr-editing", tiny_inr_zoo_folder, tmp_path / "edit",
                     RunOptions([0, 1], task_overrides={"epochs": 1}), only=["mlp", "monomial_nfn"])
    table = suite_table(rows)
    assert "| mse | mse_unedited |" in table and "| monomial_nfn | monomial_nfn | budget, dilate |" in table
    rows = run_suite("inr-classification", tiny_inr_zoo_folder, tmp_path / "cls",
                     RunOptions([0], task_overrides={"epochs": 1}), only=["mlp-aug4"])
    assert rows[0][1]["task_config"]["augment_copies"] == 4
    assert "| accuracy | majority_class_accuracy |" in suite_table(rows)


def test_inr_results_go_on_a_leaderboard_ranked_lower_mse_first(inr_splits, tiny_inr_zoo_folder, tmp_path):
    from leaderboards import render, submit
    from leaderboards.escape import markdown_cell

    splits, dataset = inr_splits
    board = tmp_path / "board"
    means = {}
    for model, overrides in (("mlp", {"hidden_sizes": (16,)}), ("monomial_nfn", {"group": "sign", "channels": (4,)})):
        path = tmp_path / f"{model}.json"
        results = run_on_splits("inr-editing", model, splits, dataset,
                                RunOptions([0, 1, 2], model_overrides=overrides,
                                           task_overrides={"epochs": 1, "batch_size": 8}, progress=False),
                                path)
        means[model] = results["summary"]["mse"]["mean"]
        submit(path, board, dataset_dir=tiny_inr_zoo_folder)
    path = tmp_path / "classifier.json"
    run_on_splits("inr-classification", "mlp", splits, dataset,
                  RunOptions([0, 1, 2], model_overrides=SMALL["mlp"], task_overrides=FAST, progress=False), path)
    submit(path, board, dataset_dir=tiny_inr_zoo_folder)
    text = render(board, tmp_path / "site")
    assert "Ranked by `mse` (lower is better)" in text and "Ranked by `accuracy` (higher is better)" in text
    editing = text.split("Ranked by `mse`")[1]
    order = [markdown_cell(model) for model in sorted(means, key=means.get)]  # as the table writes them (`\_`)
    assert editing.index(f"| {order[0]} ") < editing.index(f"| {order[1]} ")
    written = {p.name for p in (tmp_path / "site").iterdir()}
    assert {"index.md", "index.html", "inr-classification.md", "inr-classification.html", "inr-classification.png",
            "inr-classification-predictions.png", "inr-editing.md", "inr-editing.html", "inr-editing.png"} <= written
    assert "inr-editing-predictions.png" not in written  # its targets are renders' errors, not pinned metadata
    assert text.count("| yes |") == 3  # all three entries re-scored (verified)


def test_bad_task_settings_are_refused_with_the_key():
    from benchmarks.tasks import create_task
    from zoo.validation.schema import SchemaError

    with pytest.raises(SchemaError, match=r"edit: expected one of \['contrast', 'dilate'\], got 'blur'"):
        create_task("inr-editing", edit="blur")
    with pytest.raises(SchemaError, match="warmup_epochs: expected 0 <= warmup_epochs <= epochs"):
        create_task("inr-classification", epochs=2, warmup_epochs=5)
    with pytest.raises(SchemaError, match="delta_scale"):
        create_task("inr-editing", delta_scale=0.0)
    assert create_task("inr-classification", preset="nfn").config.epochs == 142
    assert create_task("inr-editing", preset="nfn").config.warmup_steps == 1000


def test_editing_measures_renders_on_minus_one_to_one_whatever_range_the_sirens_fit():
    """A SIREN fitted to [0, 1] (the DWSNets INRs' intensity_range) renders x there; the task's MSE compares
    2x - 1 with its [-1, 1] targets. The same weights under the default range are taken as they are."""
    from benchmarks.tasks.inr_editing import _render
    from zoo.families import create_family
    from zoo.families.inr import INRArchitecture
    from zoo.weightspace import WeightBatch

    signed = INRArchitecture(image_size=4, hidden_features=8, out_features=1)
    unit = dataclasses.replace(signed, intensity_range="unit")
    space = create_family("inr").weight_space(dataclasses.asdict(signed))
    generator = torch.Generator().manual_seed(0)
    weights = WeightBatch(space, tuple(torch.randn(3, *t.shape, generator=generator) * 0.1 for t in space.tensors))
    as_is = _render(signed, weights, 2)
    assert torch.allclose(_render(unit, weights, 2), as_is * 2 - 1)
    assert not torch.allclose(_render(unit, weights, 2), as_is)  # the control: the range is not ignored
