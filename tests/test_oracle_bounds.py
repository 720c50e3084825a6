"""The controllers of ``benchmarks/oracle_bounds.py``: they take the candidate the observation's own
forecast ranks first (or, with hindsight, the one it would rank first knowing the job's true
deviations), and move once or at every decision as named."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.oracle_bounds import CONTROLLER_RULES, RankingController, ranked_action
from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.action_sets import NUM_MOVES, NUM_TARGETS
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.observation import TARGET_BLOCK
from slamorl_jax.env.online_model import posterior_deviation
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState

NUM_JOBS = 48
STEPS = 4

# A benchmark's controllers (10 s for the three tests): in the slow run (pytest -m slow).
pytestmark = pytest.mark.slow


@functools.cache
def states_and_observations() -> tuple[EnvParams, EnvState, jax.Array]:
    """``NUM_JOBS`` jobs after ``STEPS`` random steps (some measured epochs, some fresh jobs):
    the env's params, the states and their observations."""
    env = JobAllocationEnv()
    params = env.default_params
    key = jax.random.key(5)
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(key, NUM_JOBS), params)
    step = jax.jit(env.step_batch)
    for step_key in jax.random.split(key, STEPS):
        actions = jax.random.randint(step_key, (NUM_JOBS,), 0, env.num_actions)
        obs, state, *_ = step(jax.random.split(step_key, NUM_JOBS), state, actions, params)
    return params, state, obs


ranked_actions = jax.jit(jax.vmap(ranked_action, in_axes=(0, None, None)), static_argnums=2)


def suggested_action(obs: jax.Array) -> np.ndarray:
    """The action of the candidate the observation flags as suggested (keep or a target)."""
    offset, targets, per_target = TARGET_BLOCK
    target_flags = np.asarray(obs[:, offset + (per_target - 1) * targets : offset + per_target * targets])
    keep_flag = np.asarray(obs[:, offset + per_target * targets + per_target - 1])
    assert np.all(keep_flag + target_flags.sum(axis=1) == 1)  # exactly one candidate flagged
    return np.where(keep_flag > 0, NO_OP_ACTION, NUM_MOVES + target_flags.argmax(axis=1))


def test_the_forecast_ranking_without_hindsight_takes_the_observations_suggestion() -> None:
    params, state, obs = states_and_observations()
    assert TARGET_BLOCK[1] == NUM_TARGETS
    actions = ranked_actions(state, params, False)
    np.testing.assert_array_equal(np.asarray(actions), suggested_action(obs))
    assert np.all((np.asarray(actions) == NO_OP_ACTION) | (np.asarray(actions) >= NUM_MOVES))


def test_hindsight_ranks_on_the_true_deviations() -> None:
    """With the true deviations set to the online model's current estimate, hindsight and the
    observation agree; with a job's true compute far slower, its hindsight choice moves for some
    jobs (the ranking reads the deviations it is given)."""
    params, state, obs = states_and_observations()
    mu_compute, mu_sync = jax.vmap(posterior_deviation, in_axes=(0, None))(state.model_stats, params)
    believed = state.replace(job=state.job.replace(deviation=jnp.stack([mu_compute, mu_sync], axis=1)))
    hindsight = ranked_actions(believed, params, True)
    np.testing.assert_array_equal(np.asarray(hindsight), suggested_action(obs))
    slower = believed.job.deviation.at[:, 0].add(1.0)
    moved = ranked_actions(believed.replace(job=believed.job.replace(deviation=slower)), params, True)
    assert np.any(np.asarray(moved) != np.asarray(hindsight))


def test_one_jump_controllers_keep_after_the_first_decision_and_followers_re_rank() -> None:
    params, state, _ = states_and_observations()
    plan = jnp.full((NUM_JOBS,), NUM_MOVES + 3, jnp.int32)  # any planned target
    started = state.replace(epoch=jnp.zeros_like(state.epoch))
    later = state.replace(epoch=jnp.maximum(state.epoch, 1))
    for name, rule in CONTROLLER_RULES.items():
        act = jax.vmap(rule.act, in_axes=(0, 0, None))
        np.testing.assert_array_equal(np.asarray(act(plan, started, params)), np.asarray(plan), err_msg=name)
        expected = (
            np.full(NUM_JOBS, NO_OP_ACTION)
            if rule.first_step_only
            else np.asarray(ranked_actions(later, params, rule.hindsight))
        )
        np.testing.assert_array_equal(np.asarray(act(plan, later, params)), expected, err_msg=name)
    assert CONTROLLER_RULES["one_jump_forecast"] == RankingController(hindsight=False, first_step_only=True)
