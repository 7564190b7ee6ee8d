"""Tree-ensemble baselines on flattened weights: XGBoost, LightGBM (GBDT) and a random forest.

Tran et al. 2025, "Equivariant Neural Functional Networks for Transformers" (ICLR 2025), Sec. 6: its
baselines for generalization prediction on the Small Transformer Zoo. Gradient-boosted trees and a random
forest regress a checkpoint's test accuracy on its flattened raw weights. The authors'
`nfn_transformer/xgb.py` and `gbm.py` read every weight and bias, flattened. The per-tensor statistics go
only to STATNN. These models ignore every symmetry.

Settings (facts from that code), each a field of the model's config:

XGBoost (`xgboost`): squared error, learning rate 0.1, depth 10, min child weight 50. It subsamples 0.8 of
the rows and 0.8 of the columns per tree, with L2 0.01, L1 0.02, `hist`, and up to 50 rounds. We keep the
number of rounds with the lowest validation RMSE. Theirs retrains for 1..50 rounds and keeps the best by
validation RMSE. That is the same model, since boosting is sequential.

LightGBM GBDT (`lightgbm`): regression (RMSE), learning rate 0.1, 256 leaves, depth 10, min 50 rows per
leaf. It uses feature fraction 0.8, L1 0.1, L2 0.2, min split gain 0.01 and 255 bins. It runs up to 1,000
rounds, stopping early after 50 rounds without a lower validation RMSE. Their `subsample: 0.8` without a
bagging frequency is inert in LightGBM. Ours is the same (`bagging_fraction` 0.8, `bagging_freq` 0). Theirs
ran on a GPU; ours runs on the CPU.

Random forest: theirs is LightGBM's `rf` boosting. Ours is scikit-learn's `RandomForestRegressor` (exact
splits) with the same tree shape. That is at most 256 leaves, depth 10, and min 50 rows per leaf. Each split
sees 80% of the features and each tree 80% of the rows. Trees are added 10 at a time, up to 1,000, until 50
trees bring no lower validation RMSE. Then the forest is cut back to the best size.

These models are fitted, not trained by gradient steps (`trained_by = "fit"`, see `nfn_models.registry`).
`fit(train, targets, validation, validation_targets, seed)` returns how the model was selected. The forward
pass predicts the target directly. Their size (`num_parameters`) is the number of tree nodes.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import torch
from torch import nn

from nfn_models.registry import check_weight_space, register_model
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch, WeightSpace


def _threads() -> int:
    """All cores this process may use. Sums over threads may round differently with another core count. So
    results are reproducible on one machine, like the zoos' own training."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _features(weights: WeightBatch) -> np.ndarray:
    return weights.flatten().detach().to("cpu", torch.float32).numpy()


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)))


def _positive(where: str, key: str, values: dict[str, float], non_negative: dict[str, float] | None = None) -> None:
    prefix = f"{key}." if key else ""
    for name, value in values.items():
        if not value > 0:
            raise SchemaError(where, f"{prefix}{name}", f"expected a positive number, got {value}")
    for name, value in (non_negative or {}).items():
        if not value >= 0:
            raise SchemaError(where, f"{prefix}{name}", f"expected a non-negative number, got {value}")


class FittedTrees(nn.Module):
    """The shared part: weight-space checks, flattened features, predictions as (B, 1) float32."""

    trained_by = "fit"
    symmetries: tuple[str, ...] = ()  # reads weights in a fixed order
    PRESETS = {"generalization": {}}

    def __init__(self, weight_space: WeightSpace, config):
        super().__init__()
        self.weight_space, self.config, self.estimator = weight_space, config, None
        config.validate(f"model {type(self).__name__}", "")
        self.register_buffer("_device", torch.zeros(0), persistent=False)  # follows .to(device)

    def forward(self, weights: WeightBatch) -> torch.Tensor:
        check_weight_space(self.weight_space, weights)
        if self.estimator is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(...) first")
        prediction = self._predict(_features(weights))
        return torch.as_tensor(np.asarray(prediction, np.float32)).reshape(-1, 1).to(self._device.device)

    def fit(self, train: WeightBatch, targets, validation: WeightBatch, validation_targets, seed: int) -> dict:
        for batch in (train, validation):
            check_weight_space(self.weight_space, batch)
        y, y_val = (np.asarray(torch.as_tensor(t).cpu(), np.float64) for t in (targets, validation_targets))
        return self._fit(_features(train), y, _features(validation), y_val, seed)


@dataclasses.dataclass(frozen=True)
class XGBoostConfig:
    learning_rate: float = 0.1
    max_depth: int = 10
    min_child_weight: float = 50.0
    subsample: float = 0.8
    colsample_bytree: float = 0.8
    reg_lambda: float = 0.01
    reg_alpha: float = 0.02
    max_rounds: int = 50
    out_features: int = 1

    def validate(self, where: str, key: str) -> None:
        _positive(where, key, {"learning_rate": self.learning_rate, "max_depth": self.max_depth,
                               "subsample": self.subsample, "colsample_bytree": self.colsample_bytree,
                               "max_rounds": self.max_rounds},
                  {"min_child_weight": self.min_child_weight, "reg_lambda": self.reg_lambda,
                   "reg_alpha": self.reg_alpha})
        if self.out_features != 1:
            raise SchemaError(where, "out_features", f"the tree baselines predict one scalar, got {self.out_features}")


@register_model("xgboost")
class XGBoost(FittedTrees):
    Config = XGBoostConfig

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__(weight_space, XGBoostConfig(**hparams))

    def _fit(self, x, y, x_val, y_val, seed: int) -> dict:
        import xgboost

        c = self.config
        params = {"objective": "reg:squarederror", "eval_metric": "rmse", "eta": c.learning_rate,
                  "max_depth": c.max_depth, "min_child_weight": c.min_child_weight, "subsample": c.subsample,
                  "colsample_bytree": c.colsample_bytree, "lambda": c.reg_lambda, "alpha": c.reg_alpha,
                  "tree_method": "hist", "seed": seed, "nthread": _threads(),
                  "max_cached_hist_node": 256}  # bounds memory (a node's histogram: features x bins), not results
        train, val = xgboost.DMatrix(x, label=y), xgboost.DMatrix(x_val, label=y_val)
        booster = xgboost.train(params, train, num_boost_round=c.max_rounds, evals=[(val, "validation")],
                                early_stopping_rounds=c.max_rounds, verbose_eval=False)
        self.rounds = booster.best_iteration + 1
        self.estimator = booster
        return {"rounds": self.rounds, "validation_rmse": _rmse(self._predict(x_val), y_val)}

    def _predict(self, x: np.ndarray) -> np.ndarray:
        import xgboost

        return self.estimator.predict(xgboost.DMatrix(x), iteration_range=(0, self.rounds))

    def num_parameters(self) -> int:
        return 0 if self.estimator is None else sum(t.count("\n") for t in self.estimator.get_dump()[:self.rounds])


@dataclasses.dataclass(frozen=True)
class LightGBMConfig:
    learning_rate: float = 0.1
    num_leaves: int = 256
    max_depth: int = 10
    min_data_in_leaf: int = 50
    feature_fraction: float = 0.8
    bagging_fraction: float = 0.8  # inert without bagging_freq, as in the reference
    bagging_freq: int = 0
    lambda_l1: float = 0.1
    lambda_l2: float = 0.2
    min_gain_to_split: float = 0.01
    max_bin: int = 255
    max_rounds: int = 1000
    early_stopping_rounds: int = 50
    out_features: int = 1

    def validate(self, where: str, key: str) -> None:
        _positive(where, key, {"learning_rate": self.learning_rate, "num_leaves": self.num_leaves,
                               "feature_fraction": self.feature_fraction, "bagging_fraction": self.bagging_fraction,
                               "max_bin": self.max_bin, "max_rounds": self.max_rounds,
                               "early_stopping_rounds": self.early_stopping_rounds},
                  {"min_data_in_leaf": self.min_data_in_leaf, "bagging_freq": self.bagging_freq,
                   "lambda_l1": self.lambda_l1, "lambda_l2": self.lambda_l2,
                   "min_gain_to_split": self.min_gain_to_split})
        if self.out_features != 1:
            raise SchemaError(where, "out_features", f"the tree baselines predict one scalar, got {self.out_features}")


@register_model("lightgbm")
class LightGBM(FittedTrees):
    Config = LightGBMConfig

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__(weight_space, LightGBMConfig(**hparams))

    def _fit(self, x, y, x_val, y_val, seed: int) -> dict:
        import lightgbm

        c = self.config
        params = {"objective": "regression", "metric": "rmse", "learning_rate": c.learning_rate,
                  "num_leaves": c.num_leaves, "max_depth": c.max_depth, "min_data_in_leaf": c.min_data_in_leaf,
                  "feature_fraction": c.feature_fraction, "bagging_fraction": c.bagging_fraction,
                  "bagging_freq": c.bagging_freq, "lambda_l1": c.lambda_l1, "lambda_l2": c.lambda_l2,
                  "min_gain_to_split": c.min_gain_to_split, "max_bin": c.max_bin, "seed": seed,
                  "deterministic": True, "force_col_wise": True, "num_threads": _threads(), "verbose": -1,
                  "histogram_pool_size": 1024}  # MB: without it 256 leaves x 18,506 features cache ~19 GB
        train = lightgbm.Dataset(x, y, params={"max_bin": c.max_bin, "verbose": -1})
        val = lightgbm.Dataset(x_val, y_val, reference=train)
        booster = lightgbm.train(params, train, num_boost_round=c.max_rounds, valid_sets=[val],
                                 callbacks=[lightgbm.early_stopping(c.early_stopping_rounds, verbose=False)])
        self.rounds = booster.best_iteration or booster.current_iteration()
        self.estimator = booster
        return {"rounds": self.rounds, "validation_rmse": _rmse(self._predict(x_val), y_val)}

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self.estimator.predict(x, num_iteration=self.rounds)

    def num_parameters(self) -> int:
        if self.estimator is None:
            return 0
        trees = self.estimator.dump_model(num_iteration=self.rounds)["tree_info"]
        return sum(2 * tree["num_leaves"] - 1 for tree in trees)


@dataclasses.dataclass(frozen=True)
class RandomForestConfig:
    max_leaf_nodes: int = 256
    max_depth: int = 10
    min_samples_leaf: int = 50
    max_features: float = 0.8  # of the features, per split
    max_samples: float = 0.8  # of the rows, per tree (bootstrap)
    max_trees: int = 1000
    trees_per_step: int = 10
    early_stopping_trees: int = 50
    out_features: int = 1

    def validate(self, where: str, key: str) -> None:
        _positive(where, key, {"max_leaf_nodes": self.max_leaf_nodes, "max_depth": self.max_depth,
                               "min_samples_leaf": self.min_samples_leaf, "max_trees": self.max_trees,
                               "trees_per_step": self.trees_per_step,
                               "early_stopping_trees": self.early_stopping_trees})
        for name in ("max_features", "max_samples"):
            if not 0 < getattr(self, name) <= 1:
                raise SchemaError(where, name, f"expected a fraction in (0, 1], got {getattr(self, name)}")
        if self.out_features != 1:
            raise SchemaError(where, "out_features", f"the tree baselines predict one scalar, got {self.out_features}")


@register_model("random_forest")
class RandomForest(FittedTrees):
    Config = RandomForestConfig

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__(weight_space, RandomForestConfig(**hparams))

    def _fit(self, x, y, x_val, y_val, seed: int) -> dict:
        from sklearn.ensemble import RandomForestRegressor

        c = self.config
        forest = RandomForestRegressor(n_estimators=0, max_leaf_nodes=c.max_leaf_nodes, max_depth=c.max_depth,
                                       min_samples_leaf=c.min_samples_leaf, max_features=c.max_features,
                                       max_samples=c.max_samples, bootstrap=True, random_state=seed,
                                       warm_start=True, n_jobs=_threads())
        best_rmse, best_size, summed = math.inf, 0, np.zeros(len(x_val))
        while forest.n_estimators < c.max_trees and forest.n_estimators - best_size < c.early_stopping_trees:
            start = forest.n_estimators
            forest.set_params(n_estimators=min(c.max_trees, start + c.trees_per_step))
            forest.fit(x, y)
            for tree in forest.estimators_[start:]:  # the running mean of the trees' validation predictions
                summed += tree.predict(x_val)
            rmse = _rmse(summed / forest.n_estimators, y_val)
            if rmse < best_rmse:
                best_rmse, best_size = rmse, forest.n_estimators
        forest.estimators_ = forest.estimators_[:best_size]
        forest.set_params(n_estimators=best_size)
        self.estimator = forest
        return {"trees": best_size, "validation_rmse": _rmse(self._predict(x_val), y_val)}

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self.estimator.predict(x)

    def num_parameters(self) -> int:
        return 0 if self.estimator is None else sum(t.tree_.node_count for t in self.estimator.estimators_)
