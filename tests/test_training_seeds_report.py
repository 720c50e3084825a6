"""``benchmarks.training_seeds``' per-workload tables: each run's ratios from its evaluation's
``per_workload_objective``, then mean and spread over the runs (no training, no evaluation)."""

from __future__ import annotations

import pytest

from benchmarks.training_seeds import to_markdown, workload_figures_of, workload_spreads


def evaluated(policy: float, without_relocate: float | None, oracle: float = 0.5) -> dict:
    """A run's evaluation payload reduced to what the per-workload tables read: one scenario, two
    workloads (the second evaluated without the ablation, as a policy that cannot relocate)."""
    row = {
        "policy": policy,
        "static_request": 1.0,
        "best_static_oracle": oracle,
        "policy_from_forecast": 0.55,
    }
    if without_relocate is not None:
        row["policy_without_relocate"] = without_relocate
    plain = {"policy": 0.9, "static_request": 1.2, "best_static_oracle": 0.6, "jobs": 3}
    return {"per_workload_objective": {"deadline-critical": {"ncf": row, "ml20m": plain}}}


def test_a_runs_ratios_come_from_its_per_workload_objectives() -> None:
    figures = workload_figures_of(evaluated(0.6, 0.75))["deadline-critical"]
    assert figures["ncf"] == pytest.approx(
        {
            "over_request": 0.6,
            "over_oracle": 1.2,
            "over_without_relocate": 0.8,
            "forecast_start/over_oracle": 1.1,
        }
    )
    assert figures["ml20m"] == pytest.approx({"over_request": 0.75, "over_oracle": 1.5})


def test_the_spread_over_runs_keeps_only_the_figures_every_run_has() -> None:
    runs = [workload_figures_of(evaluated(p, w)) for p, w in ((0.6, 0.75), (0.7, None), (0.8, 0.8))]
    spreads = workload_spreads(runs)["deadline-critical"]
    assert spreads["ncf"]["over_request"] == pytest.approx({"mean": 0.7, "std": 0.1, "min": 0.6, "max": 0.8})
    assert "over_without_relocate" not in spreads["ncf"]  # the second run has no ablation
    payload = {
        "seeds": [0, 1, 2],
        "runs": ["a", "b", "c"],
        "episodes": 8,
        "eval_seeds": 1,
        "figures": {},
        "per_seed": {},
        "per_workload": workload_spreads(runs),
        "machine": "test",
    }
    markdown = to_markdown(payload)
    assert "## deadline-critical by workload" in markdown
    assert "| ncf | 0.700 ± 0.100 | 1.400 ± 0.200 | 1.100 ± 0.000 |" in markdown
