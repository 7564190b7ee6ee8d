"""Bounds on the task and model settings that size an allocation, checked before anything is built.

A setting from `--set` or a suite is data. `task.augment_copies=100000000` would ask for a hundred
million copies of every training row. `model.hidden_sizes=[1000000,1000000]` would ask for a
trillion parameters. Either would be an out-of-memory kill instead of a line. Each bound here sits
far above the largest value a real run uses. That value is stated beside it in
`zoo.validation.bounds`, the one place for bounds. So no honest setting meets one.

`MAX_AUGMENT_COPIES` bounds group-augmented copies of a row (`augment_copies`).

`MAX_AUGMENTED_BYTES` bounds the float32 bytes a split's rows and their copies hold together. It is
checked from the row count and the weight space, before the copies are drawn
(`augmented_bytes_problem`).

`MAX_BATCH_SIZE` bounds `batch_size` and `eval_batch_size`.

`MAX_MODEL_PARAMETERS` bounds a model's parameters. They are counted on PyTorch's meta device, with
no memory, before the model is built for real (`benchmarks.harness.prepare_run`). Its constructor
runs once more for that. A plugin that counts its constructions sees one more, before the seeds'
own."""

from __future__ import annotations

from zoo.validation.bounds import (MAX_AUGMENT_COPIES, MAX_AUGMENTED_BYTES, MAX_BATCH_SIZE,  # noqa: F401 (the one place)
                                   MAX_MODEL_PARAMETERS)


def augmented_bytes_problem(rows: int, copies: int, keep_original: bool, num_params: int) -> str | None:
    """Why `rows` rows of `num_params` float32 weights with `copies` copies each are too many bytes, or None."""
    total = rows * (copies + keep_original) * num_params * 4
    if total <= MAX_AUGMENTED_BYTES:
        return None
    return (f"{rows:,} rows x {copies + keep_original} views x {num_params:,} weights is {total:,} bytes of float32; "
            f"at most {MAX_AUGMENTED_BYTES:,} (MAX_AUGMENTED_BYTES): use fewer augment_copies")


def model_size_problem(model: str, weight_space, overrides: dict) -> str | None:
    """Why model `model` with `overrides` on `weight_space` has too many parameters, or None.

    They are counted by building it on the meta device, where no parameter holds memory. A model that
    cannot be built there is not counted here, e.g. one using an operation the meta device lacks. Its
    own build then says what is wrong."""
    import torch

    from nfn_models import create_model

    try:
        with torch.device("meta"):
            built = create_model(model, weight_space, **overrides)
        count = sum(parameter.numel() for parameter in built.parameters())
    except Exception:  # noqa: BLE001 (the real build reports its own errors)
        return None
    if count <= MAX_MODEL_PARAMETERS:
        return None
    given = ", ".join(f"model.{key}={value!r}"[:80] for key, value in overrides.items()) or "its defaults"
    return (f"model {model!r} with {given} has {count:,} parameters and does not fit in memory: expected at most "
            f"{MAX_MODEL_PARAMETERS:,} (MAX_MODEL_PARAMETERS); a width or hidden size too large?")
