"""The weights ablation's report: each adaptive form's gain over static, with its standard error."""

from __future__ import annotations

import pytest

from benchmarks.weights_ablation import gain_over


def _seeds(mean: float, std: float, low: float, high: float) -> dict[str, float]:
    return {"mean": mean, "std": std, "min": low, "max": high}


def test_the_gain_is_the_difference_of_means_with_welchs_standard_error() -> None:
    # 8 seeds at std 0.03 against 4 at std 0.04: sqrt(0.0009 / 8 + 0.0016 / 4) = 0.0226 -> 2.3 points.
    text = gain_over(_seeds(0.59, 0.03, 0.55, 0.63), 8, _seeds(0.55, 0.04, 0.50, 0.60), 4)
    assert text == "+4.0 ± 2.3 (overlap)"


@pytest.mark.parametrize(("low", "expected"), [(0.61, "no overlap"), (0.60, "overlap")])
def test_ranges_overlap_when_they_touch(low: float, expected: str) -> None:
    text = gain_over(_seeds(0.62, 0.0, low, 0.63), 3, _seeds(0.55, 0.0, 0.50, 0.60), 3)
    assert text == f"+{100 * (0.62 - 0.55):.1f} ± 0.0 ({expected})"
