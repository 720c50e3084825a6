"""Tests of the per-job deviation spreads sized from the vendored data (calibration/job_spread.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slamorl_jax.calibration import job_spread
from slamorl_jax.calibration.workloads import WORKLOADS


@pytest.fixture(scope="module")
def spread() -> job_spread.JobSpread:
    return job_spread.job_spread()


def test_sigmas_are_finite_positive_and_plausible(spread):
    for sigma in (spread.sigma_compute, spread.sigma_sync, spread.compute_rms, spread.sync_median):
        assert math.isfinite(sigma) and 0.02 < sigma < 1.0


def test_sigmas_follow_the_stated_rules(spread):
    assert spread.sigma_compute == round(spread.compute_rms, 2)
    assert spread.sigma_sync == round(spread.sync_median, 2)
    assert spread.sync_median == pytest.approx(float(np.median([v for _, v, _ in spread.sync_per_fit])))
    n_pollux = sum(s.source == "pollux" for s in WORKLOADS)
    rms = job_spread.compute_cell_rms(
        n_pollux,
        len(WORKLOADS) - n_pollux,
        spread.k80_ratio[0],
        spread.p100_ratio[0],
        spread.t4_ratio_rms,
        spread.repeat_compute,
        shared=(2, 2),  # ResNet-18 and ResNet-50: cifar10 / imagenet and their Gavel twins
    )
    assert spread.compute_rms == pytest.approx(rms)


def test_shared_models_are_counted_from_the_workloads():
    names = [s.name for s in WORKLOADS]
    assert job_spread.shared_model_counts([{"name": n} for n in names]) == (2, 2)
    pollux_only = [n for n in names if n not in {"cifar10-resnet18-gavel", "imagenet-resnet50-gavel"}]
    assert job_spread.shared_model_counts([{"name": n} for n in pollux_only]) == (2, 0)


def test_shared_models_count_as_measured_cells():
    # With no shared model every Pollux workload takes the median ratios' spread; with every workload
    # shared only the repeat noise is left.
    k80, p100, t4, rep = 0.7, 0.4, 0.1, 0.02
    none = job_spread.compute_cell_rms(6, 7, k80, p100, t4, rep)
    two = job_spread.compute_cell_rms(6, 7, k80, p100, t4, rep, shared=(2, 2))
    assert two < none
    assert job_spread.compute_cell_rms(3, 3, k80, p100, t4, rep, shared=(3, 3)) == pytest.approx(rep)
    with pytest.raises(ValueError, match="within the workloads"):
        job_spread.compute_cell_rms(6, 7, k80, p100, t4, rep, shared=(7, 0))


def test_evidence_matches_the_documented_calibration(spread):
    # docs/calibration.md, "GPU types": 26 Gavel job types; T4/V100 0.521 (ResNet-18), 0.650 (ResNet-50).
    assert spread.num_gavel_job_types == 26
    ratios = dict(spread.t4_ratios)
    assert ratios["ResNet-18"] == pytest.approx(0.521, abs=5e-4)
    assert ratios["ResNet-50"] == pytest.approx(0.650, abs=5e-4)
    assert spread.t4_ratio_rms == pytest.approx(0.5 * math.log(0.650 / 0.521), abs=2e-3)
    # Every data-parallel fit contributes points; the Pollux fits have hundreds.
    data_parallel = [s.name for s in WORKLOADS if s.data_parallel]
    assert [name for name, _, _ in spread.sync_per_fit] == data_parallel
    for name, value, points in spread.sync_per_fit:
        assert math.isfinite(value) and value >= 0.0
        assert points >= (500 if name in {s.name for s in WORKLOADS if s.source == "pollux"} else 3)
    assert spread.sync_transfer[1] > 0
    # Repeat noise is a floor, well below the cross-model spreads.
    assert 0.0 < spread.repeat_compute < spread.t4_ratio_rms < spread.p100_ratio[0] < spread.k80_ratio[0]


def test_robust_sd_estimates_a_normal_standard_deviation():
    x = np.random.default_rng(0).normal(scale=0.3, size=20_000)
    assert job_spread.robust_sd(x) == pytest.approx(0.3, rel=0.03)
    # One wild outlier barely moves it.
    assert job_spread.robust_sd(np.append(x, 1e6)) == pytest.approx(0.3, rel=0.03)


def test_format_markdown_lists_the_evidence_and_the_chosen_values(spread):
    table = job_spread.format_markdown(spread)
    lines = table.splitlines()
    assert lines[0].startswith("| term | evidence |")
    assert all(line.startswith("|") and line.endswith("|") for line in lines)
    assert f"**{spread.sigma_compute:.2f}**" in table and f"**{spread.sigma_sync:.2f}**" in table
    for name, _, _ in spread.sync_per_fit:
        assert name in table


def test_chosen_values_are_the_environment_defaults(spread):
    from slamorl_jax.env.defaults import DEFAULT_COMPUTE_SPREAD, DEFAULT_SYNC_SPREAD

    assert round(DEFAULT_COMPUTE_SPREAD, 2) == spread.sigma_compute
    assert round(DEFAULT_SYNC_SPREAD, 2) == spread.sigma_sync
