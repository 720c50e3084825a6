"""The env is a gymnax ``Environment``: its classes, params, hooks and registry entries behave as
gymnax documents (one small compiled probe; the consumers themselves: test_gymnax_consumers.py)."""

from __future__ import annotations

import subprocess
import sys

import chex
import gymnax
import jax
import numpy as np
import pytest
from gymnax.environments import spaces
from gymnax.environments.environment import Environment

from slamorl_jax.env import (
    GYMNAX_ID,
    GYMNAX_SCALAR_ID,
    EnvParams,
    EnvState,
    JobAllocationEnv,
    ScalarRewardWrapper,
    make,
    preference_vector,
    validate_params,
    with_derived_tables,
)
from slamorl_jax.env.params import with_values


def short_jobs(params: EnvParams) -> EnvParams:
    """``params`` with 2-3 epoch jobs, so a few steps see terminations."""
    count = params.workloads.epochs_min.shape
    workloads = with_values(params.workloads, epochs_min=np.full(count, 2), epochs_max=np.full(count, 3))
    return validate_params(with_derived_tables(params.replace(workloads=workloads)))


@pytest.fixture(scope="module")
def small_job() -> tuple[JobAllocationEnv, EnvParams]:
    """The balanced scenario with 2-3 epoch jobs."""
    env, params = make("balanced")
    return env, short_jobs(params)


PROBE_STEPS = 4


@pytest.fixture(scope="module")
def probe(small_job: tuple) -> dict:
    """One compiled scan: reset, then per step ``step`` and ``step_env`` with the same key and the
    hooks on the result."""
    env, params = small_job

    def run(key: jax.Array) -> dict:
        obs, state = env.reset(key, params)

        def one(state: EnvState, k: jax.Array) -> tuple[EnvState, dict]:
            action = jax.random.randint(k, (), 0, env.num_actions)
            hook = env.step_env(k, state, action, params)
            # The real step, through the adaptive scalar wrapper.
            wrapped = ScalarRewardWrapper(env)
            _, next_state, scalar, terminated, _, info = wrapped.step(k, state, action, params)
            reward = info["vector_reward"]
            row = {
                "state": state,
                "step": (reward, terminated),
                "scalar": (scalar, info["reward_weights"], info["step_weights"]),
                "hook": (hook[0], hook[2], hook[3]),
                "final_obs": (info["final_observation"], env.get_obs(info["final_state"], params)),
                "flags": (env.is_terminal(hook[1], params), env.discount(hook[1], params)),
            }
            return next_state, row

        _, rows = jax.lax.scan(one, state, jax.random.split(key, PROBE_STEPS))
        return {"reset_obs": obs, "reset_env_obs": env.reset_env(key, params)[0], "rows": rows}

    return jax.device_get(jax.jit(run)(jax.random.key(3)))


def test_is_a_gymnax_environment_with_gymnax_spaces(small_job: tuple) -> None:
    """isinstance checks that gymnax wrappers make pass; the spaces are gymnax's classes."""
    env, params = small_job
    assert isinstance(env, Environment)
    assert isinstance(env.action_space(params), spaces.Discrete)
    assert env.action_space(params).n == env.num_actions
    assert isinstance(env.observation_space(params), spaces.Box)
    assert isinstance(env.reward_space(params), spaces.Box)
    assert env.reward_space(params).shape == (env.reward_dim,)
    assert isinstance(env.state_space(params), spaces.Dict)
    assert env.name == GYMNAX_ID


def test_params_have_max_steps_in_episode_and_the_former_name() -> None:
    """gymnax's field name; the old one reads it, and replace/with_values accept it."""
    _, params = make()
    assert int(params.max_steps_in_episode) == int(params.max_episode_steps) == 200
    assert int(params.replace(max_episode_steps=7).max_steps_in_episode) == 7
    assert int(with_values(params, max_episode_steps=9).max_steps_in_episode) == 9
    with pytest.raises(ValueError, match="not both"):
        params.replace(max_episode_steps=7, max_steps_in_episode=8)
    with pytest.raises(ValueError, match="max_steps_in_episode"):
        validate_params(with_values(params, max_steps_in_episode=0))


def test_reset_env_and_step_env_agree_with_reset_and_step(probe: dict) -> None:
    """reset_env is reset; step_env with the same key advances the job as step does, without the
    auto-reset: the same reward and termination, and step's final observation is step_env's."""
    np.testing.assert_array_equal(probe["reset_obs"], probe["reset_env_obs"])
    rows = probe["rows"]
    np.testing.assert_array_equal(rows["step"][0], rows["hook"][1])
    np.testing.assert_array_equal(rows["step"][1], rows["hook"][2])
    final_obs, observed = rows["final_obs"]
    np.testing.assert_array_equal(final_obs, rows["hook"][0])
    np.testing.assert_array_equal(final_obs, observed)  # get_obs(final_state) == final_observation


def test_is_terminal_and_discount_follow_termination(probe: dict) -> None:
    """is_terminal is step's terminated; discount is 0 exactly then (truncation keeps 1)."""
    terminated = probe["rows"]["step"][1]
    is_terminal, discount = probe["rows"]["flags"]
    np.testing.assert_array_equal(is_terminal, terminated)
    np.testing.assert_array_equal(discount, np.where(terminated, 0.0, 1.0))
    assert terminated.any()  # 2-3 epoch jobs: the probe saw a termination


def test_adaptive_scalar_reward_is_step_weights_dot_vector(probe: dict) -> None:
    """ScalarRewardWrapper on the real env: reward = info["step_weights"] . info["vector_reward"]."""
    scalar, weights, step_weights = probe["rows"]["scalar"]
    vectors = probe["rows"]["step"][0]
    assert scalar.dtype == np.float32 and scalar.shape == (vectors.shape[0],)
    np.testing.assert_array_equal(weights, step_weights)
    np.testing.assert_allclose(scalar, np.einsum("to,to->t", step_weights, vectors), rtol=1e-6)


def test_state_space_contains_reset_and_stepped_states(small_job: tuple, probe: dict) -> None:
    """Every state of the probe lies in state_space, and the time alias counts decisions."""
    env, params = small_job
    space = env.state_space(params)
    for t in range(PROBE_STEPS):
        state = jax.tree.map(lambda x, t=t: x[t], probe["rows"]["state"])
        assert bool(space.contains(state))
        assert int(state.time) == int(state.steps)
    bad = state.replace(elapsed_s=np.float32(np.nan))
    assert not bool(space.contains(bad))


def test_gymnax_make_finds_both_ids_with_keyword_arguments() -> None:
    """gymnax.make returns the env and its scenario's params; the scalar id pays adaptive weights."""
    env, params = gymnax.make(GYMNAX_ID, scenario="deadline-critical", action_set="paper")
    assert isinstance(env, JobAllocationEnv) and env.action_set == "paper"
    chex.assert_trees_all_equal(params, make("deadline-critical")[1])
    scalar, _ = gymnax.make(GYMNAX_SCALAR_ID)
    assert isinstance(scalar, ScalarRewardWrapper) and scalar.adaptive
    assert (env.name, scalar.name) == (GYMNAX_ID, GYMNAX_SCALAR_ID)  # each env names its own id
    fixed, _ = gymnax.make(GYMNAX_SCALAR_ID, reward="cost")
    np.testing.assert_allclose(fixed.weights, preference_vector("cost"))
    assert GYMNAX_ID in gymnax.registered_envs and GYMNAX_SCALAR_ID in gymnax.registered_envs


def test_make_reward_option_and_bad_values() -> None:
    """make(reward=...) wraps unless "vector"; bad values are one-line ValueErrors."""
    assert isinstance(make(reward="vector")[0], JobAllocationEnv)
    wrapped, _ = make(reward=[1.0, 1.0, 2.0])
    np.testing.assert_allclose(wrapped.weights, [0.25, 0.25, 0.5])
    for bad, words in (
        ("speed", "unknown reward 'speed'"),
        ([1.0, 2.0], "3 finite"),
        ([-1, 1, 1], "non-neg"),
    ):
        with pytest.raises(ValueError, match=words) as err:
            make(reward=bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="unknown scenario"):
        JobAllocationEnv(scenario="nope")


def test_importing_the_env_defers_gymnax_renderers_plotting_libraries() -> None:
    """``import slamorl_jax.env`` imports gymnax (every bundled env registered) without seaborn or
    matplotlib.pyplot; a renderer's first use imports the real library, as does a later import."""
    code = """
import sys
import slamorl_jax.env
import gymnax
deferred = [name for name in ("seaborn", "matplotlib.pyplot", "pandas", "scipy.stats") if name in sys.modules]
assert not deferred, deferred
assert {"CartPole-v1", "Pong-misc", "Catch-bsuite", "JobAllocation-v0"} <= set(gymnax.registered_envs)
from gymnax.environments.misc import pong
assert len(pong.sns.color_palette("cubehelix", 3)) == 3
import seaborn
assert type(seaborn) is type(sys), type(seaborn)
assert seaborn.color_palette is pong.sns.color_palette
import matplotlib.pyplot as plt
assert type(plt) is type(sys) and callable(plt.subplots)
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
