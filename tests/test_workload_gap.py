"""``benchmarks.workload_gap``: its per-job ratios and splits on hand-made figures, the grid rule
over the policy's targets, and whether a first action follows the forecast, read a second way
from the observation's own ``suggested`` flags."""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.workload_gap import (
    FORECAST_START,
    GRID,
    HELD,
    INFORMED,
    METHODS,
    ORACLE,
    first_choice_allocations,
    follows_forecast,
    grid_oracle,
    informed_differs,
    informed_placement,
    jobs_at_request,
    objective_ratios,
    run,
    to_markdown,
    workload_row,
)
from slamorl_jax.agent.decision import greedy_actions
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.env.action_sets import NUM_MOVES, NUM_TARGETS, WIDEST_ACTION_SET
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.observation import FEATURE_NAMES, observe
from slamorl_jax.env.probes import first_placement
from slamorl_jax.env.scenarios import with_preference, with_scenario
from slamorl_jax.episodes import with_init_strategy
from slamorl_jax.evaluation import baselines
from slamorl_jax.policy_checkpoint import load_policy
from slamorl_jax.shipped_policy import CHECKOUT_POLICY


def figures(
    time: list[float], cost: list[float], deadline: list[bool], slas: list[int]
) -> dict[str, np.ndarray]:
    """Per-job figures as ``run_methods`` gives them, for what the rows read."""
    met = np.zeros((len(slas), 6), bool)
    for job, count in enumerate(slas):
        met[job, :count] = True
    return {
        "episode_time_s": np.asarray(time, float),
        "episode_cost_usd": np.asarray(cost, float),
        "deadline_met": np.asarray(deadline),
        "budget_met": np.ones(len(time), bool),
        "job_sla_met": met,
        "finished": np.ones(len(time), bool),
    }


def test_ratios_are_per_job_then_averaged_and_the_split_follows_the_oracles_own_sla() -> None:
    oracle = figures([100, 200, 400], [10, 10, 10], [True, True, False], [6, 6, 4])
    by_method = {
        "policy": figures([110, 260, 440], [10, 20, 10], [True, True, False], [6, 5, 5]),
        FORECAST_START: figures([100, 220, 480], [10, 10, 10], [True, True, False], [6, 6, 5]),
        HELD: figures([100, 300, 400], [10, 10, 10], [True, True, False], [6, 5, 4]),
        INFORMED: figures([100, 200, 400], [10, 10, 10], [True, True, False], [6, 6, 4]),
        GRID: figures([100, 200, 400], [10, 10, 10], [True, True, False], [6, 6, 4]),
        ORACLE: oracle,
    }
    assert set(by_method) == set(METHODS)
    np.testing.assert_allclose(
        objective_ratios("deadline-critical", by_method["policy"], oracle), [1.1, 1.3, 1.1]
    )
    np.testing.assert_allclose(objective_ratios("budget-constrained", by_method["policy"], oracle), [1, 2, 1])
    np.testing.assert_allclose(objective_ratios("balanced", by_method["policy"], oracle), [1.05, 1.65, 1.05])

    # GPUs and CPUs of the forecast's first choice and of the informed one: the second job's forecast
    # takes fewer GPUs than the informed one, the third's more, the first's the same allocation.
    choices = np.array([[4, 16, 4, 16], [4, 16, 16, 64], [2, 8, 1, 8]])
    row = workload_row(
        "deadline-critical", by_method, np.array([True, False, True]), choices, np.ones(3, bool)
    )
    assert row["jobs"] == 3 and row["jobs_oracle_meets"] == 2 and row["jobs_oracle_misses"] == 1
    assert row["policy_over_oracle"] == pytest.approx(3.5 / 3)
    assert row[f"{FORECAST_START}_over_oracle_oracle_meets"] == pytest.approx(1.05)
    assert row[f"{FORECAST_START}_over_oracle_oracle_misses"] == pytest.approx(1.2)
    assert row[f"{GRID}_over_oracle"] == pytest.approx(1.0)
    assert row[f"{HELD}_over_oracle"] == pytest.approx(3.5 / 3) and row[f"{INFORMED}_over_oracle"] == 1.0
    assert row["informed_differs"] == pytest.approx(2 / 3)
    assert row[f"{HELD}_over_oracle_where_informed_differs"] == pytest.approx(1.25)  # 1.5 and 1.0
    sides = row["where_informed_differs"]
    assert sides["fewer"] == {
        "jobs": 1,
        f"{HELD}_over_oracle": 1.5,
        f"{HELD}_slas_met": 5.0,
        f"{INFORMED}_slas_met": 6.0,
    }
    assert sides["more"] == {
        "jobs": 1,
        f"{HELD}_over_oracle": 1.0,
        f"{HELD}_slas_met": 4.0,
        f"{INFORMED}_slas_met": 4.0,
    }
    assert sides["as_many"]["jobs"] == 0 and sides["as_many"][f"{HELD}_over_oracle"] is None
    assert "| 67% (1.250) | 1: 1.000 (4.00 / 4.00) | 1: 1.500 (5.00 / 6.00) | 0 |" in to_markdown(
        {
            "checkpoint": "c",
            "scenario": "deadline-critical",
            "episodes": 3,
            "seed": 0,
            "num_slas": 6,
            "rows": {"w": row},
        }
    )
    assert row["policy_slas_met"] == pytest.approx(16 / 3) and row[f"{ORACLE}_slas_met"] == pytest.approx(
        16 / 3
    )
    assert row[f"{FORECAST_START}_slas_met"] == pytest.approx(17 / 3)
    assert row["follows_forecast"] == pytest.approx(2 / 3)
    assert row["largest_sla_gain"] == ("gpu_util", pytest.approx(1 / 3))  # the fifth SLA, one job of three

    # A job some method did not finish leaves every method's figures; a workload with no job where
    # the oracle misses its SLA has no ratio there.
    by_method[GRID]["finished"] = np.array([True, True, False])
    row = workload_row("deadline-critical", by_method, None, choices, np.ones(3, bool))
    assert row["jobs"] == 2 and row[f"{FORECAST_START}_over_oracle_oracle_misses"] is None
    assert row["follows_forecast"] is None and row["informed_differs"] == 0.5
    row = workload_row("deadline-critical", by_method, None, choices, np.array([True, False, True]))
    assert row["informed_differs"] == 0.0 and row[f"{HELD}_over_oracle_where_informed_differs"] is None
    assert all(
        cell["jobs"] == 0 and cell[f"{INFORMED}_slas_met"] is None
        for cell in row["where_informed_differs"].values()
    )


def test_the_grid_rule_chooses_among_the_targets_only() -> None:
    params = JobAllocationEnv().default_params
    rule = grid_oracle(params)
    targets = {(int(g), int(c)) for g, c in np.asarray(params.target_allocation)}
    assert set(zip(rule.gpus, rule.cpus, strict=True)) == targets and len(rule.gpus) == len(targets)


@pytest.fixture(scope="module")
def shipped() -> tuple:
    policy = load_policy(str(CHECKOUT_POLICY))
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET)
    params = with_scenario(
        with_preference(env_params_from_config(policy.config, env.catalog), None), "balanced"
    )
    return policy, env, params


@pytest.mark.slow  # a benchmark's logic (9 s and 7 s): in the slow run (pytest -m slow)
def test_following_the_forecast_matches_the_observations_suggested_flags(shipped: tuple) -> None:
    policy, env, params = shipped
    key, episodes = jax.random.key(3), 48
    follows = follows_forecast(policy, env, params, key, episodes)

    # The policy method's jobs: the run's reset keys, each job at its request (the trained config's
    # start is "mixed": cold, random and requested allocations).
    assert policy.config.init_strategy == "mixed"
    requested = with_init_strategy(params, "requested")
    reset_key, _ = jax.random.split(key)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, episodes), requested)
    at_request = jax.vmap(baselines.requested, in_axes=(0, None))(state, requested)
    np.testing.assert_array_equal(np.asarray(state.gpus), np.asarray(at_request[0]))
    np.testing.assert_array_equal(np.asarray(state.cpus), np.asarray(at_request[1]))
    obs = jax.vmap(observe, in_axes=(0, None))(state, requested)
    keep = obs[:, FEATURE_NAMES.index("keep_suggested")] > 0.5
    flags = obs[:, np.asarray([FEATURE_NAMES.index(f"target{k}_suggested") for k in range(NUM_TARGETS)])]
    suggested = jnp.where(keep, NO_OP_ACTION, NUM_MOVES + jnp.argmax(flags, axis=-1))
    actions = greedy_actions(policy.network.apply(policy.params, obs, state.weights)[0], policy.hold_below)
    np.testing.assert_array_equal(follows, np.asarray(actions == suggested))
    assert follows.any() and not follows.all()  # both kinds in this batch: the check can fail either way


@pytest.mark.slow  # a benchmark's logic (9 s and 7 s): in the slow run (pytest -m slow)
def test_the_informed_choice_is_the_forecasts_own_for_a_job_at_its_profile(shipped: tuple) -> None:
    """Told a deviation of zero (the job's truth is its profile), the informed forecast chooses what
    the forecast does from its prior; told the job's true deviations, it chooses otherwise on some
    jobs of a batch and not on all."""
    _, env, params = shipped
    key, episodes = jax.random.key(5), 256
    state = jobs_at_request(env, params, key, episodes)
    own = jax.vmap(first_placement, in_axes=(0, None))(state, params)
    at_profile = state.replace(job=state.job.replace(deviation=jnp.zeros_like(state.job.deviation)))
    told_zero = jax.vmap(informed_placement, in_axes=(0, None))(at_profile, params)
    for ours, theirs in zip(own, told_zero, strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    choices = first_choice_allocations(env, params, key, episodes)
    told_truth = jax.vmap(informed_placement, in_axes=(0, None))(state, params)
    np.testing.assert_array_equal(choices, np.stack([*own, *told_truth], axis=-1))
    differs = informed_differs(choices)
    np.testing.assert_array_equal(differs, np.asarray((own[0] != told_truth[0]) | (own[1] != told_truth[1])))
    assert differs.any() and not differs.all()


@pytest.mark.slow
def test_the_report_has_a_row_per_workload_and_one_over_all_jobs() -> None:
    payload = run(
        argparse.Namespace(checkpoint=str(CHECKOUT_POLICY), scenario="deadline-critical", episodes=64, seed=2)
    )
    rows = payload["rows"]
    assert sum(r["jobs"] for name, r in rows.items() if name != "all jobs") == rows["all jobs"]["jobs"]
    for r in rows.values():
        assert r["jobs_oracle_meets"] + r["jobs_oracle_misses"] == r["jobs"]
        assert 0 <= r["follows_forecast"] <= 1 and 0 < r["policy_over_oracle"] < 3
    assert "| all jobs | 64 |" in to_markdown(payload)
