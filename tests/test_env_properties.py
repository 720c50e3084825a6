"""Property-based tests: the environment's invariants hold for any valid ``EnvParams``.

Hypothesis draws cluster shapes, links, prices, noise, contention, pauses, adaptation strength,
initialisation (``mixed`` and its rates included), scenario, the generator's probability vectors, the
hidden-truth spreads, the online model's noise, the absolute-target grid and the end-of-job SLA
bonuses; every drawn params passes ``validate_params``. One jitted rollout (a batch of envs under
``vmap``, steps under ``lax.scan``, actions of the default ``targets_relocate`` set) serves every example:
params are traced leaves, so only their values change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest
from conftest import ROLLOUT_ENVS, ROLLOUT_STEPS
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from slamorl_jax.env import (
    DEFAULT_ACTION_SET,
    FEATURE_NAMES,
    INIT_STRATEGIES,
    MAX_GPUS,
    NUM_FEATURES,
    SCENARIOS,
    EnvParams,
    JobAllocationEnv,
    load_catalog,
    num_actions,
    validate_params,
    with_derived_tables,
    with_scenario,
)
from slamorl_jax.env.action_sets import NUM_TARGET_CPUS_PER_GPU, NUM_TARGET_GPUS
from slamorl_jax.env.params import with_values
from slamorl_jax.env.shifts import NUM_SHIFT_KINDS

NUM_ENVS, NUM_STEPS = ROLLOUT_ENVS, ROLLOUT_STEPS  # the shared rollout's
NUM_ACTIONS = num_actions(DEFAULT_ACTION_SET)  # the env fixture's (default) ``targets_relocate`` set


# --- strategies ---------------------------------------------------------------------------------


def floats(low: float, high: float) -> st.SearchStrategy[float]:
    """Finite float32 values in ``[low, high]`` (bounds rounded to float32)."""
    return st.floats(float(np.float32(low)), float(np.float32(high)), allow_infinity=False, width=32)


def log_floats(low_exp: float, high_exp: float) -> st.SearchStrategy[float]:
    """Floats spread evenly in log scale over ``[10**low_exp, 10**high_exp]``."""
    return floats(low_exp, high_exp).map(lambda e: float(np.float32(10.0**e)))


def prices() -> st.SearchStrategy[float]:
    """Zero or a log-spread price per hour up to $10k."""
    return st.one_of(st.just(0.0), log_floats(-3, 4))


def probabilities(size: int) -> st.SearchStrategy[np.ndarray]:
    """Probability vectors of ``size`` entries, zeros included, summing to 1 in float32."""
    raw = st.lists(floats(0.0, 1.0), min_size=size, max_size=size).filter(lambda v: sum(v) > 1e-3)
    return raw.map(lambda v: (np.asarray(v, np.float64) / np.sum(v)).astype(np.float32))


@st.composite
def env_settings(draw: st.DrawFn, num_workloads: int, num_gpu_types: int) -> dict[str, Any]:
    """A dict of field values for ``EnvParams`` (plus scenario, epochs and action bias) that validate.

    Ranges span what ``validate_params`` accepts.
    """
    gpus_per_node = draw(st.integers(1, 8))
    cpu_step = draw(st.integers(1, 64))
    fields: dict[str, Any] = {
        "gpus_per_node": gpus_per_node,
        "max_nodes": draw(st.integers(1, MAX_GPUS // gpus_per_node)),
        "max_gpus_per_job": draw(st.integers(1, MAX_GPUS)),
        "cpu_step": cpu_step,
        "cpus_per_node": draw(st.integers(cpu_step, 1024)),
        "intra_node_gbps": draw(log_floats(-2.9, 6)),
        "inter_node_gbps": draw(log_floats(-2.9, 6)),
        "host_memory_gib_per_gpu": draw(floats(0.0, 4096.0)),
        "memory_gib_per_vcpu": draw(floats(0.25, 16.0)),
        "worker_memory_gib_per_busy_cpu": draw(floats(0.0, 8.0)),
        "gpu_price_per_hour": draw(st.lists(prices(), min_size=num_gpu_types, max_size=num_gpu_types)),
        "vcpu_price_per_hour": draw(log_floats(-2.9, 4)),
        "gib_price_per_hour": draw(prices()),
        "workload_probs": draw(probabilities(num_workloads)),
        "gpu_type_probs": draw(probabilities(num_gpu_types)),
        "feasibility_margin": draw(floats(1.0, 10.0)),
        "init_strategy": draw(st.integers(0, len(INIT_STRATEGIES) - 1)),
        "init_mix_probs": draw(probabilities(3)),
        # The whole valid range (spreads near 2 with a forecast_noise near 1e-3 used to overflow the
        # forecast to NaN: test_env_truth::test_forecast_stays_finite_when_the_model_is_badly_wrong).
        "compute_spread": draw(st.one_of(st.just(2.0), floats(0.0, 2.0))),
        "sync_spread": draw(st.one_of(st.just(2.0), floats(0.0, 2.0))),
        "forecast_noise": draw(st.one_of(st.just(1e-3), log_floats(-3, 1))),
        "target_gpus": draw(
            st.lists(st.integers(1, MAX_GPUS), min_size=NUM_TARGET_GPUS, max_size=NUM_TARGET_GPUS)
        ),
        "target_cpus_per_gpu": draw(
            st.lists(floats(0.0, 1024.0), min_size=NUM_TARGET_CPUS_PER_GPU, max_size=NUM_TARGET_CPUS_PER_GPU)
        ),
        "reallocation_pause_s": draw(floats(0.0, 86400.0)),
        "cpu_reallocation_pause_s": draw(floats(0.0, 86400.0)),
        "epoch_time_noise": draw(floats(0.0, 1.0)),
        "util_noise": draw(floats(0.0, 0.5)),
        "contention_start_prob": draw(floats(0.0, 1.0)),
        "contention_end_prob": draw(floats(0.0, 1.0)),
        "contention_compute_slowdown": draw(floats(0.0, 100.0)),
        "contention_network_slowdown": draw(floats(0.0, 100.0)),
        "adapt_strength": draw(floats(0.0, 100.0)),
        "reward_clip": draw(log_floats(-2.9, 6)),
        "sla_met_bonus": draw(floats(0.0, 100.0)),
        "all_slas_bonus": draw(floats(0.0, 100.0)),
        "max_episode_steps": draw(st.integers(1, NUM_STEPS + 8)),
    }
    if draw(st.booleans()):
        fields["use_fixed_preference"] = True
        fields["fixed_preference"] = draw(probabilities(3))
    scenario = draw(st.sampled_from((*SCENARIOS, None)))
    if scenario is None:  # a custom generator instead of a named scenario
        fields["scenario_probs"] = draw(probabilities(3))
        fields["random_preference_prob"] = draw(floats(0.0, 1.0))  # the two shares sum to at most 1
        fields["opposed_preference_prob"] = draw(floats(0.0, 1.0 - fields["random_preference_prob"]))
        fields["shift_probs"] = draw(probabilities(NUM_SHIFT_KINDS))
    epochs = None
    if draw(st.booleans()):  # short jobs, so that many episodes end inside the rollout
        low = draw(st.integers(1, 12))
        epochs = (low, draw(st.integers(low, 16)))
    return {
        "fields": fields,
        "scenario": scenario,
        "epochs": epochs,
        "sla_scale": draw(log_floats(-1, 0.5)),
        "action_logits": draw(st.lists(floats(-4.0, 4.0), min_size=NUM_ACTIONS, max_size=NUM_ACTIONS)),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


SETTINGS = env_settings(load_catalog().num_workloads, load_catalog().num_gpu_types)


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def build_params(env: JobAllocationEnv) -> Callable[[dict[str, Any]], EnvParams]:
    """Drawn settings -> validated params (derived tables recomputed by one jitted function)."""
    base = env.default_params
    derive = jax.jit(with_derived_tables)

    def build(settings: dict[str, Any]) -> EnvParams:
        params = with_scenario(base, settings["scenario"]) if settings["scenario"] else base
        params = with_values(params, **settings["fields"])
        # Tighter or looser deadline, budget, throughput and memory targets for every scenario kind.
        scale = np.ones(params.sla_factor_low.shape[-1], np.float32)
        scale[:4] = settings["sla_scale"]
        params = with_values(
            params,
            sla_factor_low=np.asarray(params.sla_factor_low) * scale,
            sla_factor_high=np.asarray(params.sla_factor_high) * scale,
        )
        if settings["epochs"] is not None:
            low, high = settings["epochs"]
            shape = params.workloads.epochs_min.shape
            workloads = with_values(
                params.workloads, epochs_min=np.full(shape, low), epochs_max=np.full(shape, high)
            )
            params = params.replace(workloads=workloads)
        return validate_params(derive(params))

    return build


@pytest.fixture(scope="module")
def rollout(
    batched_rollout: Callable[..., dict[str, np.ndarray]],
) -> Callable[[dict[str, Any], EnvParams], dict[str, np.ndarray]]:
    """Run ``NUM_ENVS`` envs for ``NUM_STEPS`` steps with actions drawn from the settings' logits:
    the session's shared rollout (``conftest.batched_rollout``, compiled once for every example of
    every test here and in the other modules that use it)."""

    def call(settings: dict[str, Any], params: EnvParams) -> dict[str, np.ndarray]:
        return batched_rollout(settings["seed"], params, settings["action_logits"])

    return call


# --- invariants ---------------------------------------------------------------------------------
# Each check takes one example's params and rollout; one property test runs them all on every
# drawn example (one rollout an example, not one a check).


def check_allocations_stay_in_bounds(params: EnvParams, traj: dict[str, np.ndarray]) -> None:
    """Allocations stay in 1..max GPUs and cpu_step..nodes x CPUs per node, on the step lattice."""
    gpus_per_node, cpus_per_node = int(params.gpus_per_node), int(params.cpus_per_node)
    step = int(params.cpu_step)
    max_gpus = min(int(params.max_gpus_per_job), gpus_per_node * int(params.max_nodes))
    gpus = np.concatenate([traj["gpus0"][None], traj["gpus"]])
    cpus = np.concatenate([traj["cpus0"][None], traj["cpus"]])
    assert np.all((gpus >= 1) & (gpus <= max_gpus))
    nodes = -(-gpus // gpus_per_node)
    assert np.all(cpus >= step)
    assert np.all(cpus <= nodes * cpus_per_node)
    assert np.all(cpus % step == 0)


def check_observations_finite_and_in_unit_interval(params: EnvParams, traj: dict[str, np.ndarray]) -> None:
    """Observations are finite float32 in [0, 1]."""
    for name in ("obs0", "obs", "final_observation"):
        obs = traj[name]
        assert obs.dtype == np.float32 and obs.shape[-1] == NUM_FEATURES
        bad = ~(np.isfinite(obs) & (obs >= 0.0) & (obs <= 1.0))
        features = sorted({FEATURE_NAMES[i] for i in np.argwhere(bad)[:, -1]})
        assert not features, f"{name}: features not finite in [0, 1]: {features}"


def check_exactly_one_candidate_is_suggested(params: EnvParams, traj: dict[str, np.ndarray]) -> None:
    """Every observation flags exactly one candidate (keep or one target) as the forecast's first
    choice, however XLA fuses and rounds the ranking (``forecast.suggestion``)."""
    flags = [i for i, name in enumerate(FEATURE_NAMES) if name.endswith("_suggested")]
    for name in ("obs0", "obs", "final_observation"):
        per_observation = traj[name][..., flags].sum(axis=-1)
        assert np.all(per_observation == 1.0), f"{name}: {np.unique(per_observation)} candidates flagged"


def check_time_and_cost_never_decrease_within_an_episode(
    params: EnvParams, traj: dict[str, np.ndarray]
) -> None:
    """Elapsed time and cost never decrease within an episode and restart at 0."""
    done = traj["terminated"] | traj["truncated"]
    # The step's own figures (before any reset) never fall below what the episode had accrued.
    assert np.all(traj["episode_time_s"] >= traj["elapsed_before"])
    assert np.all(traj["episode_cost_usd"] >= traj["cost_before"])
    assert np.all(np.isfinite(traj["episode_time_s"])) and np.all(np.isfinite(traj["episode_cost_usd"]))
    # Carried on unchanged when the episode continues, back to zero on a new job. The carried state
    # and the step's figures are one value in the program, but XLA may compute it in two fusions
    # rounded differently (a fused multiply-add in one), so they agree to float32 rounding.
    np.testing.assert_allclose(traj["elapsed_after"][~done], traj["episode_time_s"][~done], rtol=1e-6)
    np.testing.assert_allclose(traj["cost_after"][~done], traj["episode_cost_usd"][~done], rtol=1e-6)
    assert np.all(traj["elapsed_after"][done] == 0.0) and np.all(traj["cost_after"][done] == 0.0)
    np.testing.assert_array_equal(traj["elapsed_before"][1:], traj["elapsed_after"][:-1])


def check_episode_ends_after_exactly_its_epochs(params: EnvParams, traj: dict[str, np.ndarray]) -> None:
    """Episodes end after exactly min(epochs, max_episode_steps) steps."""
    max_steps = int(params.max_episode_steps)
    terminated, truncated = traj["terminated"], traj["truncated"]
    assert not np.any(terminated & truncated)
    for env_index in range(NUM_ENVS):
        length, epochs = 0, int(traj["epochs0"][env_index])
        for t in range(NUM_STEPS):
            length += 1
            assert int(traj["epochs"][t, env_index]) == epochs  # the job the step advanced
            limit = min(epochs, max_steps)
            if terminated[t, env_index] or truncated[t, env_index]:
                assert length == limit
                assert bool(terminated[t, env_index]) == (length == epochs)
                length, epochs = 0, int(traj["epochs_running"][t, env_index])
            else:
                assert length < limit


def check_rewards_inside_reward_space(
    params: EnvParams, traj: dict[str, np.ndarray], env: JobAllocationEnv
) -> None:
    """Rewards lie inside reward_space(params)."""
    space = env.reward_space(params)
    reward = traj["reward"]
    assert reward.dtype == np.float32 and reward.shape == (NUM_STEPS, NUM_ENVS, 3)
    assert np.all(np.isfinite(reward))
    assert np.all(reward >= space.low) and np.all(reward <= space.high)


def check_adaptive_weights_on_the_simplex(params: EnvParams, traj: dict[str, np.ndarray]) -> None:
    """Adaptive weights in info lie on the simplex."""
    for name in ("weights", "step_weights", "final_weights"):
        weights = traj[name]
        assert np.all(np.isfinite(weights)) and np.all(weights >= 0.0), name
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5, err_msg=name)


# Twice the profile's examples: one test now draws what seven drew (175 params a run before, 50 now).
@hypothesis_settings(max_examples=2 * hypothesis_settings.default.max_examples)
@given(settings=SETTINGS)
def test_rollout_invariants(
    env: JobAllocationEnv, build_params: Callable, rollout: Callable, settings: dict
) -> None:
    """Every check above holds on every step of a rollout of the drawn params."""
    params = build_params(settings)
    traj = rollout(settings, params)
    check_allocations_stay_in_bounds(params, traj)
    check_observations_finite_and_in_unit_interval(params, traj)
    check_exactly_one_candidate_is_suggested(params, traj)
    check_time_and_cost_never_decrease_within_an_episode(params, traj)
    check_episode_ends_after_exactly_its_epochs(params, traj)
    check_rewards_inside_reward_space(params, traj, env)
    check_adaptive_weights_on_the_simplex(params, traj)


# --- edge values: rejected by validation, or finite at the smallest valid value ---------------


def first_steps_of(
    batched_rollout: Callable[..., dict[str, np.ndarray]], params: EnvParams
) -> list[np.ndarray]:
    """Observations at reset, then observations and rewards after one no-op step (the shared
    rollout, which compiles once, where eager calls would compile every op)."""
    keep_only = np.full(NUM_ACTIONS, -1e9, np.float32)
    keep_only[4] = 0.0
    out = batched_rollout(0, params, keep_only)
    return [out["obs0"], out["obs"][0], out["reward"][0]]


def test_free_hardware_is_rejected(env: JobAllocationEnv) -> None:
    """Validation refuses all-zero prices (budgets and cost rewards are relative to the job's cost)."""
    params = with_values(
        env.default_params,
        gpu_price_per_hour=0.0 * np.asarray(env.default_params.gpu_price_per_hour),
        vcpu_price_per_hour=0.0,
        gib_price_per_hour=0.0,
    )
    with pytest.raises(ValueError, match="prices must not all be zero"):
        validate_params(with_derived_tables(params))
    # A float32 denormal passed "> 0"; XLA:CPU reads it as 0, so budgets came out 0 and observations NaN.
    tiny = with_values(params, gpu_price_per_hour=np.full_like(params.gpu_price_per_hour, 1e-39))
    with pytest.raises(ValueError, match="prices must not all be zero"):
        validate_params(with_derived_tables(tiny))


def test_zero_memory_is_rejected(
    env: JobAllocationEnv, batched_rollout: Callable[..., dict[str, np.ndarray]]
) -> None:
    """Validation refuses a cluster that allocates no memory with its vCPUs."""
    params = with_values(
        env.default_params,
        host_memory_gib_per_gpu=0.0,
        memory_gib_per_vcpu=0.0,
        worker_memory_gib_per_busy_cpu=0.0,
    )
    with pytest.raises(ValueError, match="memory_gib_per_vcpu"):
        validate_params(with_derived_tables(params))
    # The smallest valid memory keeps the observation finite.
    params = validate_params(with_derived_tables(with_values(params, memory_gib_per_vcpu=1e-3)))
    for array in first_steps_of(batched_rollout, params):
        assert np.all(np.isfinite(array))
