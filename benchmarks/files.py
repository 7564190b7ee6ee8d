"""Atomic file writes (`zoo.atomic`) and JSON reading with errors that name the file.

A results file, a plot or a leaderboard entry is either complete or absent: it is written to
a temporary file in the target folder and renamed over the target, with the user's normal
file mode.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from zoo.atomic import replacing, write_bytes_atomic, write_json_atomic, write_text_atomic

__all__ = ["read_json", "read_npz", "replacing", "save_figure", "write_json_atomic", "write_npz_atomic",
           "write_text_atomic"]


def save_figure(figure, path: str | Path, dpi: int = 110) -> Path:
    """Writes a matplotlib figure as a PNG atomically (after `tight_layout`) and closes it."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    try:
        with replacing(path) as temporary:
            figure.savefig(temporary, format="png", dpi=dpi)
    finally:
        plt.close(figure)
    return Path(path)


def write_npz_atomic(path: str | Path, arrays: Mapping[str, Any]) -> Path:
    """Plain numeric or string arrays as one .npz (object arrays are refused: no pickles)."""
    converted = {name: np.asarray(value) for name, value in arrays.items()}
    odd = [name for name, value in converted.items() if value.dtype == object]
    if odd:
        raise ValueError(f"{path}: the arrays {odd} are object arrays; only plain numbers and strings are saved")
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **converted)
    return write_bytes_atomic(path, buffer.getvalue())


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz written by `write_npz_atomic` (pickled content is refused)."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (ValueError, OSError) as error:
        raise ValueError(f"{path}: not a plain .npz of arrays ({error})") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not plain JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"the keys {repeated} appear twice in one object")
    return dict(pairs)


def read_json(path: str | Path, *, strict: bool = False) -> Any:
    """Reads a JSON file; a missing, unreadable or malformed file raises ValueError naming it.

    `strict` also refuses NaN and Infinity and an object with a repeated key (a submission)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; expected a JSON file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a text file (byte {error.start} is not UTF-8); expected a JSON file") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    options = {"parse_constant": _refuse_constant, "object_pairs_hook": _unique_keys} if strict else {}
    try:
        return json.loads(text, **options)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    except ValueError as error:
        raise ValueError(f"{path}: not plain JSON ({error})") from None
