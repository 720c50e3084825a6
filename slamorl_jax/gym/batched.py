"""``BatchedJobEnv``: ``num_envs`` jobs stepped by one jitted call, with Gymnasium's next-step reset.

The JAX env resets a finished job inside the same ``step`` (its first observation comes back at
once, the last one in ``info["final_observation"]``). Gymnasium's default vector convention, and the
one MO-Gymnasium's episode statistics assume, is ``AutoresetMode.NEXT_STEP``: the step that ends a
job returns its *last* observation, and the next step of that env ignores its action and returns
the new job's first observation with a zero reward and no flags. This module turns one into the
other on the device (the new job is the one the JAX env already drew) and hands NumPy arrays back.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.episode_figures import FIGURE_NAMES
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState

# ``info`` entries handed to Gymnasium code: every one ``job_env``'s module docstring defines but the
# pre-reset ones (``final_*``) and the flags step returns anyway; ``weights`` are those of the
# observation returned (the finished job's on the step that ends it).
INFO_KEYS = (
    "weights",
    "step_weights",
    "severities",
    "sla_met",
    "reallocated",
    "projected_remaining_time_s",
    "projected_remaining_cost_usd",
    *FIGURE_NAMES,
)


# What ``reset``'s ``info`` holds for each new job: its first objective weights and its identity. The
# step that only shows a new job holds these, of the new job, and zeros for the other keys (no
# decision was made), as Gymnasium's own vector envs give reset's info on that step.
RESET_INFO_KEYS = ("weights", "workload", "gpu_type", "scenario", "preference")


def new_job_info(state: EnvState) -> dict[str, jax.Array]:
    """``RESET_INFO_KEYS`` of the jobs in (batched) ``state``."""
    return {"weights": state.weights, **{name: getattr(state.job, name) for name in RESET_INFO_KEYS[1:]}}


class Carry(NamedTuple):
    """Device-side state between steps."""

    key: jax.Array
    state: EnvState  # batched; a finished job's state is already its successor's
    pending: jax.Array  # (n,) bool: this env's next step only shows the new job
    reset_obs: jax.Array  # (n, F) the new job's first observation, for pending envs


class StepResult(NamedTuple):
    """One batched step as host arrays."""

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, np.ndarray]
    stepped: np.ndarray  # (n,) bool: False where the step only showed a new job's first observation


def advance_keys(key: jax.Array, num_envs: int) -> tuple[jax.Array, jax.Array]:
    """``(next carry key, one key per env)`` for a reset or a step. One key (``reset(seed=int)``)
    is split for the whole batch; one key per env (``reset(seed=[...])``) advances each env's own
    stream the way a batch of one advances its key, so env ``i`` draws what a single env seeded as
    it was draws."""
    if key.ndim == 0:
        key, sub = jax.random.split(key)
        return key, jax.random.split(sub, num_envs)
    pairs = jax.vmap(jax.random.split)(key)
    return pairs[:, 0], jax.vmap(lambda sub: jax.random.split(sub, 1)[0])(pairs[:, 1])


def _reset(env: JobAllocationEnv, key: jax.Array, params: EnvParams, num_envs: int) -> tuple[Any, Carry]:
    key, env_keys = advance_keys(key, num_envs)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(env_keys, params)
    return obs, Carry(key, state, jnp.zeros(num_envs, bool), obs)


def _step(env: JobAllocationEnv, carry: Carry, actions: jax.Array, params: EnvParams) -> tuple[Any, Carry]:
    key, env_keys = advance_keys(carry.key, actions.shape[0])
    obs, state, reward, terminated, truncated, info = env.step_batch(env_keys, carry.state, actions, params)
    pending = carry.pending

    def keep_pending(old: jax.Array, new: jax.Array) -> jax.Array:
        return jnp.where(pending.reshape(pending.shape + (1,) * (new.ndim - 1)), old, new)

    done = jnp.logical_or(terminated, truncated)
    shown = keep_pending(carry.reset_obs, jnp.where(done[:, None], info["final_observation"], obs))
    stepped_info = {**info, "weights": jnp.where(done[:, None], info["final_weights"], info["weights"])}
    new_job = new_job_info(carry.state)  # a pending env's state is already the new job's
    out_info = {
        name: keep_pending(new_job.get(name, jnp.zeros_like(stepped_info[name])), stepped_info[name])
        for name in INFO_KEYS
    }
    stepped = jnp.logical_not(pending)
    result = (
        shown,
        jnp.where(pending[:, None], 0.0, reward),
        jnp.logical_and(terminated, stepped),
        jnp.logical_and(truncated, stepped),
        out_info,
        stepped,
    )
    next_state = jax.tree.map(keep_pending, carry.state, state)
    return result, Carry(key, next_state, jnp.logical_and(done, stepped), obs)


@functools.cache
def _compiled(action_set: str) -> tuple[Any, Any]:
    """Jitted reset and step for an action set, shared by every instance (Gymnasium code often
    builds many envs): with explicit params the JAX env's step depends on its action set alone."""
    env = JobAllocationEnv(action_set=action_set)
    return jax.jit(functools.partial(_reset, env), static_argnums=2), jax.jit(functools.partial(_step, env))


def check_in_action_space(name: str, actions: np.ndarray, num_actions: int) -> None:
    """``ValueError`` naming ``name`` unless every integer action lies in ``[0, num_actions)``.

    Gymnasium code gets the action space's contract (``Discrete(num_actions).contains``) rather than
    the JAX env's clipping, which would take 90 or -1 as the nearest valid action without a word."""
    outside = actions[(actions < 0) | (actions >= num_actions)]
    if outside.size:
        raise ValueError(
            f"{name} must lie in the action space [0, {num_actions}), got {outside.reshape(-1)[:4].tolist()}"
        )


class BatchedJobEnv:
    """``num_envs`` jobs of ``env`` under ``params`` on the device; ``reset``/``step`` return NumPy."""

    def __init__(self, env: JobAllocationEnv, params: EnvParams, num_envs: int) -> None:
        self.env = env
        self.params = params
        self.num_envs = num_envs
        self._reset, self._step = _compiled(env.action_set)
        self._carry: Carry | None = None

    def __getstate__(self) -> dict[str, Any]:
        """What a pickle holds: all but the jitted functions (shared per action set, not picklable)."""
        return {name: value for name, value in self.__dict__.items() if name not in ("_reset", "_step")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled batch: its jobs as they were, the jitted functions fetched again."""
        self.__dict__.update(state)
        self._reset, self._step = _compiled(self.env.action_set)

    def reset(
        self, seed: int | Sequence[int], params: EnvParams | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Draw ``num_envs`` new jobs from ``seed`` (and switch to ``params`` if given): their
        observations and ``info``, each ``[num_envs, ...]``: the objective weights of the first
        observation (what a policy takes with it, ``load_policy``'s ``policy(obs, weights)``) and the
        job's identity. ``seed`` is one JAX seed for the batch, or ``num_envs`` of them, one per env
        (:func:`advance_keys`; each in ``[0, 2**32)``)."""
        if params is not None:
            self.params = params
        if isinstance(seed, int | np.integer):
            key = jax.random.key(seed)
        else:
            key = jax.vmap(jax.random.key)(np.asarray(seed, np.uint32))
            if key.shape != (self.num_envs,):
                raise ValueError(f"seed must hold {self.num_envs} seeds, one per env, got {key.shape[0]}")
        obs, self._carry = self._reset(key, self.params, self.num_envs)
        info = new_job_info(self._carry.state)
        return np.array(obs), {name: np.array(value) for name, value in info.items()}

    def step(self, actions: np.ndarray) -> StepResult:
        """One decision per env (``actions``: ``num_envs`` action indices in the action space)."""
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,) or not np.issubdtype(actions.dtype, np.integer):
            raise ValueError(
                f"actions must be {self.num_envs} integer action indices, got {actions.dtype} {actions.shape}"
            )
        check_in_action_space("actions", actions, self.env.num_actions)
        if self._carry is None:
            raise RuntimeError("call reset() before step()")
        result, self._carry = self._step(self._carry, jnp.asarray(actions, jnp.int32), self.params)
        # Copies, so wrappers that edit rewards or observations in place (MONormalizeReward) may.
        return StepResult(*jax.tree.map(np.array, jax.device_get(result)))
