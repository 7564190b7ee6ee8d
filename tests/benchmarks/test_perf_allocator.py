"""benchmarks.perf.allocator: both malloc settings measured in fresh processes, one table row each."""

import pytest

from benchmarks.memory import _glibc
from benchmarks.perf import allocator

pytestmark = pytest.mark.skipif(_glibc() is None, reason="keep_freed_memory needs glibc")


def test_prints_a_row_with_both_settings_and_their_ratios(capsys):
    allocator.main(["--rows", "cnn:mlp@generalization", "--batch", "2", "--steps", "1", "--rounds", "1"])
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("| cnn:mlp"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    default_s, kept_s, ratio = float(cells[1]), float(cells[2]), float(cells[3].rstrip("x"))
    assert default_s > 0 and kept_s > 0
    assert ratio == pytest.approx(kept_s / default_s, abs=0.01 + 0.01 * ratio)
    assert float(cells[4].replace(",", "")) > 0 and float(cells[5].replace(",", "")) > 0


@pytest.mark.parametrize("row", ["cnn:mlp", "sound:mlp@generalization"])
def test_a_malformed_row_is_an_error_naming_it(row):
    with pytest.raises(SystemExit, match=f"row '{row}': expected SPACE:MODEL@PRESET"):
        allocator.main(["--rows", row])
