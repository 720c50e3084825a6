"""Edges of the env's public API found by review: params of the wrong type, rewards wrapped twice,
gymnasium's scenario beside params, host actions beyond int32, a bound float32 rounds below."""

from __future__ import annotations

import functools

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slamorl_jax.env as envlib
from slamorl_jax.env.params import with_values


@pytest.fixture(scope="module")
def balanced() -> tuple[envlib.JobAllocationEnv, envlib.EnvParams]:
    env, params = envlib.make("balanced")
    return env, params


def test_an_integer_field_of_another_type_is_refused_by_name(balanced: tuple) -> None:
    """Both were accepted: a Python int broke ``step`` (no ``.astype``), a float made the job's GPU
    count float32 after one step (a scan's carry then changed type)."""
    _, params = balanced
    for changed in (
        params.replace(cpu_step=4),
        envlib.with_derived_tables(params.replace(cpu_step=jnp.float32(4))),
    ):
        with pytest.raises(TypeError, match=r"EnvParams\.cpu_step must be an integer array"):
            envlib.validate_params(changed)
    fractional = params.replace(target_gpus=jnp.asarray(params.target_gpus, jnp.float32).at[0].set(1.5))
    with pytest.raises(TypeError, match=r"EnvParams\.target_gpus must be an integer array"):
        envlib.validate_params(fractional)


def test_a_value_at_its_documented_bound_is_accepted(balanced: tuple) -> None:
    """1e-6 in float32 is 9.99999997e-07, which the float64 bound refused."""
    _, params = balanced
    speed = np.full(np.shape(params.workloads.compute_speed), 1e-6, np.float32)
    low = envlib.with_derived_tables(
        params.replace(workloads=with_values(params.workloads, compute_speed=speed))
    )
    envlib.validate_params(low)


def test_a_scalar_reward_env_rewrapped_pays_the_new_scalar() -> None:
    """``with_reward`` on ``JobAllocationScalar-v0`` multiplied its scalar by three weights."""
    scalar_env, params = gymnax.make("JobAllocationScalar-v0")
    cost_env = envlib.with_reward(scalar_env, "cost")
    _, state = cost_env.reset(jax.random.key(0), params)
    _, _, reward, *_, info = cost_env.step(jax.random.key(1), state, 4, params)
    assert reward.shape == () and info["vector_reward"].shape == (3,)
    np.testing.assert_allclose(reward, info["vector_reward"] @ envlib.preference_vector("cost"), rtol=1e-6)
    assert cost_env.reward_space(params).shape == ()
    vector_env = envlib.with_reward(scalar_env, "vector")
    assert vector_env.step(jax.random.key(1), state, 4, params)[2].shape == (3,)
    # gymnax's own hook, reached through the wrapper, paid the vector
    assert scalar_env.step_env(jax.random.key(1), state, 4, params)[2].shape == ()


def test_gymnasium_params_given_with_a_scenario_draw_that_scenario() -> None:
    gymnasium = pytest.importorskip("gymnasium")
    import slamorl_jax.gym  # noqa: F401  (registers the envs)

    _, mixed = envlib.make("mixed")
    env = gymnasium.make("slamorl_jax/JobAllocation-v0", scenario="deadline-critical", params=mixed)
    np.testing.assert_array_equal(
        env.unwrapped.params.scenario_probs, envlib.scenario_params("deadline-critical").scenario_probs
    )
    plain = gymnasium.make("slamorl_jax/JobAllocation-v0", params=mixed)
    np.testing.assert_array_equal(plain.unwrapped.params.scenario_probs, mixed.scenario_probs)


def test_host_actions_beyond_int32_are_clipped_not_wrapped_in_step_batch(balanced: tuple) -> None:
    """``vmap`` cast a NumPy int64 of 2**32 + 5 to action 5; a list raised vmap's rank error."""
    env, params = balanced
    keys = jax.random.split(jax.random.key(0), 2)
    _, states = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    step = functools.partial(env.step_batch, reset_slots=2)  # a reset slot for each env

    @jax.jit
    def both(keys: jax.Array, states: envlib.EnvState, params: envlib.EnvParams) -> tuple:
        # The host actions stay host values (constants of the program), as step_batch gets them.
        huge = step(keys, states, np.full(2, 2**32 + 5), params)[1]
        return huge, *step(keys, states, [env.num_actions - 1] * 2, params)[1:3]  # a list, too

    huge, last, reward = both(keys, states, params)
    assert np.array_equal(huge.gpus, last.gpus) and np.array_equal(huge.cpus, last.cpus)
    assert reward.shape == (2, 3)


@pytest.mark.parametrize("function", [envlib.with_scenario, envlib.with_preference])
def test_scenario_helpers_name_what_they_take(function: object) -> None:
    with pytest.raises(TypeError, match=f"{function.__name__} takes EnvParams first, got NoneType"):
        function(None, "time" if function is envlib.with_preference else "mixed")


def test_reward_space_of_traced_or_stacked_params_says_what_it_needs(balanced: tuple) -> None:
    """A 5-line ConcretizationTypeError under jit, "Only scalar arrays ..." for a stacked sweep."""
    env, params = balanced
    stacked = jax.tree.map(lambda x: jnp.stack([x, x]), params)
    with pytest.raises(TypeError, match="concrete params of one configuration"):
        env.reward_space(stacked)
    with pytest.raises(TypeError, match="concrete params of one configuration"):
        jax.jit(lambda p: env.reward_space(p).low)(params)
