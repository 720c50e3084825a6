"""The batched step behind ``jax.vmap(env.step)``: resets computed only for the jobs that ended.

A gymnax-style step auto-resets, and under ``vmap`` that means building a new job for every
environment on every step and throwing nearly all of them away; here that was most of the cost of a
step. ``JobAllocationEnv.step`` is a ``jax.custom_batching.custom_vmap`` function whose batching rule
runs the epoch for the whole batch, then draws new jobs only for the environments whose episode
ended: the first ``pool_size(n)`` of them (by index) are gathered, reset from their own draws and
scattered back. If more jobs ended than the pool holds, a batch-level ``lax.cond`` resets the whole
batch instead. Either way every environment gets exactly the state ``step`` would give it alone, from
its own key; the rule only saves work. When params are batched too (a sweep), or a key, state or
action is not batched, the rule falls back to plain ``vmap`` of the single-job step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax import custom_batching

from slamorl_jax.env import draws as d
from slamorl_jax.env.lookup import gather_row

if TYPE_CHECKING:
    from slamorl_jax.env.job_env import JobAllocationEnv

# Below this batch size a pool saves little: reset everyone.
MIN_POOLED_BATCH = 256
POOL_FRACTION = 8


def pool_size(num_envs: int) -> int:
    """How many resets one batched step computes: an eighth of the batch (all of a small batch)."""
    if num_envs < MIN_POOLED_BATCH:
        return num_envs
    return max(MIN_POOLED_BATCH // POOL_FRACTION, num_envs // POOL_FRACTION)


def _all(tree: Any) -> bool:
    return all(jax.tree.leaves(tree))


def _any(tree: Any) -> bool:
    return any(jax.tree.leaves(tree))


def vmappable_step(env: JobAllocationEnv) -> Callable:
    """``step(key, state, action, params)`` for one job, with the pooled-reset batching rule."""

    @custom_batching.custom_vmap
    def step(key: jax.Array, state: Any, action: jax.Array, params: Any) -> tuple:
        return env.step_single(key, state, action, params)

    @step.def_vmap
    def step_batched(
        axis_size: int, in_batched: list, key: jax.Array, state: Any, action: jax.Array, params: Any
    ) -> tuple[tuple, Any]:
        key_b, state_b, action_b, params_b = in_batched
        if _any(params_b) or not (_all(key_b) and _all(state_b) and _all(action_b)):
            in_axes = tuple(jax.tree.map(lambda b: 0 if b else None, b) for b in in_batched)
            out = jax.vmap(env.step_single, in_axes=in_axes)(key, state, action, params)
        else:
            out = pooled_step(env, key, state, action, params)
        return out, jax.tree.map(lambda _: True, out)

    return step


def pooled_step(env: JobAllocationEnv, keys: jax.Array, state: Any, actions: jax.Array, params: Any) -> tuple:
    """The batched step for ``n`` jobs sharing ``params`` (leading axis = job)."""
    num_envs = actions.shape[0]
    draws = jax.vmap(lambda k: d.uniforms(k, d.STEP_DRAWS + d.RESET_DRAWS))(keys)
    u_step, u_reset = draws[: d.STEP_DRAWS], draws[d.STEP_DRAWS :]
    advanced = jax.vmap(env.advance, in_axes=(0, 0, 0, None))(u_step, state, actions, params)
    _, _, terminated, truncated, _ = advanced
    done = jnp.logical_or(terminated, truncated)
    reset_all = jax.vmap(env.reset_from_draws, in_axes=(0, None))
    pool = pool_size(num_envs)
    if pool >= num_envs:
        reset_state = reset_all(u_reset, params)
    else:

        def pooled(_: None) -> Any:
            (index,) = jnp.nonzero(done, size=pool, fill_value=0)
            pool_draws = gather_row(u_reset, index)
            pool_state = reset_all(pool_draws, params)
            rank = jnp.clip(jnp.cumsum(done.astype(jnp.int32)) - 1, 0, pool - 1)
            return gather_row(pool_state, rank)

        def everyone(_: None) -> Any:
            return reset_all(u_reset, params)

        reset_state = jax.lax.cond(jnp.sum(done) <= pool, pooled, everyone, None)
    return jax.vmap(env.finish_step, in_axes=(0, 0, None))(advanced, reset_state, params)
