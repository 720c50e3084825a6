"""Generalised advantage estimation for vector rewards, with truncation handled correctly."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def vector_gae(
    rewards: jax.Array,
    values: jax.Array,
    bootstrap_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float | jax.Array,
    gae_lambda: float | jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Per-objective GAE over a rollout; returns ``(advantages, value_targets)``, both like ``rewards``.

    Shapes: ``rewards``, ``values``, ``bootstrap_values``: ``[T, ..., K]`` (K objectives);
    ``terminated``, ``truncated``: ``[T, ...]``.

    ``values[t]`` is V(s_t). ``bootstrap_values[t]`` is the value of the state reached after step
    ``t`` *within the same episode*: V(s_{t+1}) when the episode goes on, V(final observation) when
    it was truncated (the episode did not end; the env auto-reset only for bookkeeping). A
    terminated step bootstraps from 0. The recursion stops at every episode end (terminated or
    truncated), since the next state belongs to a new episode:

        delta_t = r_t + gamma * (1 - terminated_t) * bootstrap_t - V(s_t)
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    """
    keep = (1.0 - terminated.astype(rewards.dtype))[..., None]
    cont = (1.0 - jnp.logical_or(terminated, truncated).astype(rewards.dtype))[..., None]
    deltas = rewards + gamma * keep * bootstrap_values - values

    def backwards(next_advantage: jax.Array, inputs: tuple[jax.Array, jax.Array]) -> tuple:
        delta, continues = inputs
        advantage = delta + gamma * gae_lambda * continues * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(backwards, jnp.zeros_like(deltas[0]), (deltas, cont), reverse=True)
    return advantages, advantages + values


def bootstrap_values(
    values: jax.Array,
    last_value: jax.Array,
    final_values: jax.Array,
    truncated: jax.Array,
) -> jax.Array:
    """``bootstrap_values`` for :func:`vector_gae` from a rollout's values.

    ``values``: V(s_t) for t < T, ``last_value``: V(s_T) of the observation after the rollout,
    ``final_values``: V of each step's pre-reset observation (only read where ``truncated``).
    """
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    return jnp.where(truncated[..., None], final_values, next_values)
