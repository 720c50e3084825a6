"""The trainer's rollout values a truncated job at its last observation, not at the next job's first.

``tests/test_gae_and_loss.py`` checks the arithmetic (``bootstrap_values``, ``vector_gae``) on given
arrays; here the whole rollout runs on an env whose episodes are cut after a known number of steps
and whose last observation is known, so the recorded ``final_values`` (what GAE bootstraps a
truncated step from) can be compared with the critic's value of that observation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from learner_fixtures import TINY

from slamorl_jax.agent.gae import bootstrap_values
from slamorl_jax.agent.plain_info import plain_info
from slamorl_jax.agent.trainer import make_train

STEP_LIMIT = 3  # every episode is truncated after this many steps
OBJECTIVES = 3
WIDTH = 4


def counting_obs(steps: jax.Array) -> jax.Array:
    """The observation after ``steps`` steps (distinct for every count, so are its values)."""
    s = steps.astype(jnp.float32)
    return jnp.stack([s / STEP_LIMIT, 1.0 - s / STEP_LIMIT, jnp.ones_like(s), jnp.zeros_like(s)], axis=-1)


@struct.dataclass
class _Refs:
    time_ref_s: jax.Array
    cost_ref_usd: jax.Array


@struct.dataclass
class CountingState:
    """Steps taken, plus the fields the trainer reads of an env state."""

    steps: jax.Array

    @property
    def weights(self) -> jax.Array:
        return jnp.full((*self.steps.shape, OBJECTIVES), 1.0 / OBJECTIVES, jnp.float32)

    @property
    def projected_remaining_time_s(self) -> jax.Array:
        return jnp.zeros(self.steps.shape, jnp.float32)

    projected_remaining_cost_usd = projected_remaining_time_s

    @property
    def job(self) -> _Refs:
        ones = jnp.ones(self.steps.shape, jnp.float32)
        return _Refs(ones, ones)


class CountingEnv:
    """Never terminates; truncated after :data:`STEP_LIMIT` steps, then reset to 0 steps."""

    num_actions = 2
    reward_dim = OBJECTIVES

    def observation_space(self, params: object = None) -> jax.ShapeDtypeStruct:
        """A box of :data:`WIDTH` features (only its shape is read)."""
        return jax.ShapeDtypeStruct((WIDTH,), jnp.float32)

    def reset(self, key: jax.Array, params: object = None) -> tuple[jax.Array, CountingState]:
        """A fresh episode."""
        steps = jnp.zeros((), jnp.int32)
        return counting_obs(steps), CountingState(steps)

    def step(self, key: jax.Array, state: CountingState, action: jax.Array, params: object = None) -> tuple:
        """One step with auto-reset and the trainer's ``info`` keys."""
        steps = state.steps + 1
        truncated = steps >= STEP_LIMIT
        after = jnp.where(truncated, 0, steps)
        info = plain_info(counting_obs(steps), state.weights)
        reward = jnp.ones((OBJECTIVES,), jnp.float32)
        return counting_obs(after), CountingState(after), reward, jnp.zeros((), bool), truncated, info


@pytest.mark.parametrize("branch", [True, False])
def test_a_truncated_step_records_the_value_of_the_jobs_last_observation(branch: bool) -> None:
    config = dataclasses.replace(TINY, num_envs=4, rollout_length=7, num_minibatches=1)
    trainer = dataclasses.replace(make_train(config, CountingEnv()), branch_on_truncation=branch)
    state = jax.jit(trainer.init)(jax.random.key(0), None)
    _, traj, _ = jax.jit(trainer._rollout)(state, None)
    truncated = np.asarray(traj["truncated"])
    # Steps 2 and 5 of every env end an episode (3 steps each), the others do not.
    np.testing.assert_array_equal(truncated[:, 0], [False, False, True, False, False, True, False])
    assert truncated.all(axis=1).tolist() == truncated[:, 0].tolist()

    weights = CountingState(jnp.zeros((config.num_envs,), jnp.int32)).weights
    last = trainer.apply(state.params, counting_obs(jnp.full((config.num_envs,), STEP_LIMIT)), weights)[1]
    first = trainer.apply(state.params, counting_obs(jnp.zeros((config.num_envs,), jnp.int32)), weights)[1]
    final_values = np.asarray(traj["final_values"])
    for t in np.flatnonzero(truncated[:, 0]):
        np.testing.assert_allclose(final_values[t], np.asarray(last), rtol=1e-5, atol=1e-6)
        # A step bootstrapped from the next observation would take the fresh episode's value.
        np.testing.assert_allclose(np.asarray(traj["values"])[t + 1], np.asarray(first), rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(last), np.asarray(first))

    # GAE's bootstrap of each truncated step is that value (not V of the fresh episode's obs).
    _, last_values = trainer.apply(
        state.params, counting_obs(jnp.ones((config.num_envs,), jnp.int32)), weights
    )
    bootstrap = np.asarray(
        bootstrap_values(traj["values"], last_values, traj["final_values"], traj["truncated"])
    )
    for t in np.flatnonzero(truncated[:, 0]):
        np.testing.assert_allclose(bootstrap[t], np.asarray(last), rtol=1e-5, atol=1e-6)
