"""A batch of envs stepped at once, with the auto-reset computed only for the jobs that finished.

``vmap(env.step)`` draws and builds a whole new job for every env at every step and keeps it only
where the job finished (``jnp.where`` under ``vmap``): at 4,096 envs on a CPU that reset is about a
third of a step (``benchmarks/step_breakdown.py``), while a step finishes a few percent of the jobs.
:func:`step_batch` advances every env as ``step`` does, then builds fresh jobs only in
``reset_slots`` slots, for the first envs that finished (``jnp.nonzero`` with a static size), and
scatters them in, in a ``lax.while_loop`` that takes the next ``reset_slots`` finished envs until
none is left: one round on almost every step, none on a step that finished no job, more when many
jobs end at once (for example just after a synchronised reset of jobs of equal length). Either way
each env's next job comes from its own key's reset uniforms (hashed for the envs being reset only:
``draws.uniforms`` computes any range of a key's slots), so the result is ``vmap(env.step)``'s:
the same jobs, actions' effects and episode ends (``tests/test_batched_step.py`` checks this, to
float32 rounding: XLA may round a fused expression differently in the two programs).

The fresh jobs enter the batch one of two ways (``RESET_BY``): by a scatter per state field
("scatter", the CPU's default: it touches only the rows it writes) or by every env taking its own
from the round's jobs with a gather and a ``where`` ("select", the default elsewhere: XLA:GPU fuses
those across the fields, where each scatter is a kernel of its own). On one H200 at 4,096 envs the
select reset runs the step in 76 kernels instead of 144 and 1.4x as fast; on a 2-core CPU it is
0.8x the scatter's speed (`docs/speed.md`).

The trainer steps its envs with it through :func:`step_envs` (``agent/trainer.py``), on each
device's share of the batch when the batch is split over devices; ``benchmarks/env_throughput.py``
times it beside ``vmap(env.step)``.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec

from slamorl_jax.env import draws as d
from slamorl_jax.env.action_sets import clip_action
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState, check_state
from slamorl_jax.env.validation import check_one_configuration
from slamorl_jax.sharding import ENV_AXIS

if TYPE_CHECKING:
    from slamorl_jax.env.job_env import JobAllocationEnv

# Fresh jobs built per round, as a fraction of the batch. Under random actions at 4,096 envs a step
# ends 1.7 % of the jobs on average once the batch has desynchronised (3.1 % at most over 300 steps),
# and up to 8.2 % in the first 20 steps, whose jobs started together (``benchmarks.step_breakdown``
# reports these; jobs' lengths do not depend on the scenario): 1/16 covers the steady state twice
# over, and a burst takes a second round.
RESET_SLOT_FRACTION = 1 / 16


def default_reset_slots(num_envs: int) -> int:
    """Reset slots for a batch of ``num_envs``: ``RESET_SLOT_FRACTION`` of it, at least one."""
    return max(1, math.ceil(num_envs * RESET_SLOT_FRACTION))


def has_step_batch(env: Any) -> bool:
    """Whether ``env``'s own class defines ``step_batch``. A wrapper that forwards unknown attributes
    to the env it wraps (gymnax's ``GymnaxWrapper``) would otherwise hand out the inner env's, which
    skips the wrapper's own ``step``."""
    return callable(getattr(type(env), "step_batch", None))


def step_envs(
    env: Any,
    keys: jax.Array,
    state: Any,
    action: jax.Array,
    params: Any,
    reset_slots: int | None = None,
    mesh: Mesh | None = None,
    reset_by: str | None = None,
) -> tuple:
    """One step of a batch of ``env``: its ``step_batch`` where its class has one
    (:func:`has_step_batch`), else ``vmap(env.step)`` (``reset_slots`` and ``reset_by`` are then
    unused; ``reset_by`` reaches ``step_batch`` only when given, so a ``step_batch`` without it runs).

    With a ``mesh`` of more than one device (the env batch split over its one axis,
    ``slamorl_jax.sharding``), each device runs ``step_batch`` on its own share under
    ``jax.shard_map``: the finished jobs are found and rebuilt where they live, with nothing
    gathered across devices, and ``reset_slots`` (default: :func:`default_reset_slots` of the share)
    counts per device. Every env's result is the one of a single device's step, to float32 rounding.
    """
    if not has_step_batch(env):
        return jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, action, params)
    how = {} if reset_by is None else {"reset_by": reset_by}
    if mesh is None or mesh.size == 1:
        return env.step_batch(keys, state, action, params, reset_slots, **how)
    batch = PartitionSpec(ENV_AXIS)
    per_device = jax.shard_map(
        lambda k, s, a, p: env.step_batch(k, s, a, p, reset_slots, **how),
        mesh=mesh,
        in_specs=(batch, batch, batch, PartitionSpec()),
        out_specs=batch,
    )
    return per_device(keys, state, action, params)


def _select_rows(take: jax.Array, new: Any, old: Any) -> Any:
    """``new``'s rows where ``take`` (one flag per env), else ``old``'s, leaf by leaf."""
    return jax.tree.map(
        lambda n, o: jnp.where(take.reshape(take.shape + (1,) * (o.ndim - 1)), n, o), new, old
    )


def reset_draws(keys: jax.Array) -> jax.Array:
    """The reset uniforms ``[envs, RESET_DRAWS]`` of a step's keys: the slots after the step draws,
    the same values ``env.step`` draws for its auto-reset."""
    return jax.vmap(lambda key: jnp.stack(d.uniforms(key, d.RESET_DRAWS, first=d.STEP_DRAWS)))(keys)


# How the fresh jobs enter the batch (``reset_finished``): "scatter" writes each built job into its
# env's row, one scatter per state field; "select" has every env take its fresh job by a gather and
# a ``where`` that XLA can fuse across the state's fields (fewer kernels: what counts on a GPU).
RESET_BY = ("scatter", "select")


def default_reset_by() -> str:
    """The reset for the backend in use: "scatter" on a CPU (it touches only the rows it writes),
    "select" elsewhere (``benchmarks/results/env_throughput_gpu.md`` times both)."""
    return "scatter" if jax.default_backend() == "cpu" else "select"


def reset_finished(
    env: JobAllocationEnv,
    keys: jax.Array,
    done: jax.Array,
    next_state: EnvState,
    params: EnvParams,
    reset_slots: int,
    reset_by: str,
) -> EnvState:
    """``next_state`` with every env flagged ``done`` replaced by ``env.reset_from_draws`` of the
    reset uniforms of its key (:func:`reset_draws`), fresh jobs built ``reset_slots`` at a time
    (module docstring) and put in place as ``reset_by`` says (:data:`RESET_BY`). The uniforms are
    drawn for the envs being reset only."""
    num_envs = done.shape[0]
    reset_batch = jax.vmap(env.reset_from_draws, in_axes=(0, None))
    if reset_slots >= num_envs:
        return _select_rows(done, reset_batch(reset_draws(keys), params), next_state)
    if reset_by == "select":
        return _reset_by_select(reset_batch, keys, done, next_state, params, reset_slots)

    def some_envs(carry: tuple[EnvState, jax.Array]) -> tuple[EnvState, jax.Array]:
        state, waiting = carry
        # The first reset_slots envs still waiting; past them the index num_envs, out of bounds, so
        # their scatter is dropped.
        (rows,) = jnp.nonzero(waiting, size=reset_slots, fill_value=num_envs)
        fresh = reset_batch(reset_draws(keys[jnp.minimum(rows, num_envs - 1)]), params)
        state = jax.tree.map(lambda old, new: old.at[rows].set(new, mode="drop"), state, fresh)
        return state, waiting.at[rows].set(False, mode="drop")

    return jax.lax.while_loop(lambda carry: jnp.any(carry[1]), some_envs, (next_state, done))[0]


def _reset_by_select(
    reset_batch: Any,
    keys: jax.Array,
    done: jax.Array,
    next_state: EnvState,
    params: EnvParams,
    reset_slots: int,
) -> EnvState:
    """:func:`reset_finished` by gathers: the finished envs are ranked in batch order, round ``r``
    builds the jobs of ranks ``r * reset_slots`` onwards and each of those envs takes its own by a
    gather and a ``where``, leaf by leaf."""
    num_envs = done.shape[0]
    rank = jnp.cumsum(done, dtype=jnp.int32) - 1  # finished envs in batch order: 0, 1, 2, ...
    finished = rank[-1] + 1
    env_index = jnp.arange(num_envs, dtype=jnp.int32)

    def one_round(carry: tuple[EnvState, jax.Array]) -> tuple[EnvState, jax.Array]:
        state, first = carry
        slot = rank - first
        in_round = done & (slot >= 0) & (slot < reset_slots)
        # Each slot's env; slots past the round's last finished env build env 0's job, never taken.
        rows = jnp.zeros((reset_slots,), jnp.int32).at[jnp.where(in_round, slot, reset_slots)]
        rows = rows.set(env_index, mode="drop")
        fresh = reset_batch(reset_draws(keys[rows]), params)
        pick = jnp.clip(slot, 0, reset_slots - 1)
        taken = jax.tree.map(lambda new: new[pick], fresh)
        return _select_rows(in_round, taken, state), first + reset_slots

    return jax.lax.while_loop(lambda carry: carry[1] < finished, one_round, (next_state, jnp.int32(0)))[0]


def step_batch(
    env: JobAllocationEnv,
    keys: jax.Array,
    state: EnvState,
    action: jax.Array,
    params: EnvParams,
    reset_slots: int | None = None,
    reset_by: str | None = None,
) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
    """``vmap(env.step)(keys, state, action, params)`` over the leading env axis, resetting only the
    finished jobs (module docstring); ``reset_slots`` defaults to :func:`default_reset_slots`,
    ``reset_by`` (:data:`RESET_BY`) to :func:`default_reset_by`."""
    if jnp.ndim(keys) != (1 if d.is_typed_key(keys) else 2):  # static: free in a compiled step
        raise ValueError(  # one typed key per env, or a row of raw uint32 key data per env
            "step_batch takes one key per env (jax.random.split(key, num_envs)), got keys of shape "
            f"{jnp.shape(keys)}"
        )
    if jnp.ndim(params.max_steps_in_episode) != 0:
        raise ValueError(
            "step_batch shares one params across the batch (a scalar field of shape "
            f"{jnp.shape(params.max_steps_in_episode)} here): for params per env use jax.vmap(env.step)"
        )
    check_one_configuration(params)  # a sweep's field left stacked: named, not failed on in jnp.stack
    num_envs = keys.shape[0]
    check_state(state, batch=num_envs)
    if not isinstance(action, jax.Array):  # host actions (a list, NumPy int64): clipped in their own
        # type here, as env.step does; vmap would cast them to int32 first, wrapping 2**32 + 5 to 5
        action = clip_action(action, env.action_set)
    if jnp.shape(action) != (num_envs,):  # static: checked when traced, free in a compiled step
        raise ValueError(
            f"step_batch takes one action per env: action must have shape ({num_envs},) like the "
            f"leading axis of keys, got {jnp.shape(action)}"
        )
    slots = default_reset_slots(num_envs) if reset_slots is None else reset_slots
    if isinstance(slots, bool) or not isinstance(slots, numbers.Integral) or slots < 1:
        raise ValueError(f"reset_slots must be >= 1 (an integer), got {slots!r}")
    how = default_reset_by() if reset_by is None else reset_by
    if how not in RESET_BY:
        raise ValueError(f"reset_by must be one of {', '.join(RESET_BY)}, got {how!r}")
    u_step = jax.vmap(lambda key: jnp.stack(d.uniforms(key, d.STEP_DRAWS)))(keys)
    advance = jax.vmap(env.advance_from_draws, in_axes=(0, 0, 0, None))
    next_state, reward, terminated, truncated, info = advance(u_step, state, action, params)
    done = jnp.logical_or(terminated, truncated)
    state_out = reset_finished(env, keys, done, next_state, params, slots, how)
    finish = jax.vmap(env.finish_step, in_axes=(0, 0, 0, 0, 0, None))
    obs, info = finish(state_out, next_state, terminated, truncated, info, params)
    return obs, state_out, reward, terminated, truncated, info
