"""Run whole, fresh jobs with any policy, vectorised, and collect each job's episode figures.

A policy is ``policy(policy_params, obs [N, 21], weights [N, 3], key) -> actions [N]``; its
parameters are an argument (not captured), so one compiled runner serves every set of them. An
optional start rule ``start(state, params) -> (gpus, cpus)`` (one job, traced) moves each fresh job
to another first allocation before its first epoch (``JobAllocationEnv.place``); baselines and
oracles use it. An optional :class:`Controller` replaces the policy by a per-job controller with
hindsight: its ``plan(state, params)`` runs once per job after the start rule (it may read the
job's true constants), and its ``act(plan, state, params)`` picks each step's action from that plan
and the env state before the step (the current allocation); the evaluation's reachable anchor is one.
Every job in the batch runs until its first episode ends; its figures (``JobAllocationEnv``'s
``info``) are recorded at that step. Two policies evaluated with the same key see the same jobs
and the same noise, so their figures compare job by job (common random numbers).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.job_env import JobAllocationEnv, episode_figures
from slamorl_jax.env.observation import observe
from slamorl_jax.env.params import INIT_STRATEGIES, EnvParams, with_values
from slamorl_jax.env.state import EnvState

Policy = Callable[[Any, jax.Array, jax.Array, jax.Array], jax.Array]
StartRule = Callable[[EnvState, EnvParams], tuple[jax.Array, jax.Array]]


class Controller(Protocol):
    """A per-job controller that plans once, with hindsight, and then acts on the env state.

    Both methods see one job (``run_episodes`` vmaps them) and are traced; an implementation must be
    hashable (e.g. a frozen dataclass), as the compiled runner is cached on it.
    """

    def plan(self, state: EnvState, params: EnvParams) -> Any:
        """The job's plan (a pytree of arrays), from its state after the start rule."""
        ...

    def act(self, plan: Any, state: EnvState, params: EnvParams) -> jax.Array:
        """The action (int32 scalar) to take in ``state``, the state before the step."""
        ...


# Figures recorded per episode (all scalars per job, plus the preference vector).
FIGURES = (
    "episode_time_s",
    "episode_cost_usd",
    "time_ref_s",
    "cost_ref_usd",
    "deadline_met",
    "budget_met",
    "all_slas_met",
    "sla_compliance",
    "mean_severity",
    "mean_gpu_util",
    "mean_cpu_util",
    "reallocations",
    "epochs",
    "workload",
    "gpu_type",
    "scenario",
    "preference",
)


def keep_allocation(policy_params: Any, obs: jax.Array, weights: jax.Array, key: jax.Array) -> jax.Array:
    """The static policy: never change the allocation."""
    return jnp.full(obs.shape[:-1], NO_OP_ACTION, dtype=jnp.int32)


def run_episodes(
    env: JobAllocationEnv,
    params: EnvParams,
    policy: Policy,
    key: jax.Array,
    num_episodes: int,
    policy_params: Any = None,
    start: StartRule | None = None,
    controller: Controller | None = None,
) -> dict[str, np.ndarray]:
    """Figures of ``num_episodes`` fresh jobs run to completion (or truncation) under ``policy``,
    each started where ``start`` puts it (default: where ``params.init_strategy`` does). With a
    ``controller``, it chooses the actions instead of ``policy`` (which is then not called); the
    keys are split the same way, so the jobs and the noise stay those of any other run.

    Compiled once per (env, policy, start, controller, num_episodes, step limit); ``params``,
    ``policy_params`` and ``key`` are traced.
    """
    max_steps = int(np.minimum(np.max(np.asarray(params.workloads.epochs_max)), params.max_steps_in_episode))
    runner = _episode_runner(env, policy, start, controller, num_episodes, max_steps)
    return {name: np.asarray(value) for name, value in runner(params, policy_params, key).items()}


@functools.lru_cache(maxsize=32)
def _episode_runner(
    env: JobAllocationEnv,
    policy: Policy,
    start: StartRule | None,
    controller: Controller | None,
    num_episodes: int,
    max_steps: int,
) -> Callable[[EnvParams, Any, jax.Array], dict[str, jax.Array]]:
    """The jitted batch-of-jobs runner behind :func:`run_episodes`."""

    @jax.jit
    def run(params: EnvParams, policy_params: Any, key: jax.Array) -> dict[str, jax.Array]:
        reset_key, run_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_episodes), params)
        if start is not None:
            gpus, cpus = jax.vmap(start, in_axes=(0, None))(state, params)
            state = jax.vmap(env.place, in_axes=(0, 0, 0, None))(state, gpus, cpus, params)
            obs = jax.vmap(observe, in_axes=(0, None))(state, params)
        if controller is not None:
            plans = jax.vmap(controller.plan, in_axes=(0, None))(state, params)
        initial = jax.vmap(episode_figures)(state)
        figures = {name: jnp.zeros_like(initial[name]) for name in FIGURES}

        def step(carry: tuple, step_key: jax.Array) -> tuple:
            obs, weights, state, finished, figures = carry
            act_key, env_key = jax.random.split(step_key)
            if controller is None:
                actions = policy(policy_params, obs, weights, act_key)
            else:
                actions = jax.vmap(controller.act, in_axes=(0, 0, None))(plans, state, params)
            obs, state, _, terminated, truncated, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(env_key, num_episodes), state, actions, params
            )
            ends_now = jnp.logical_and(jnp.logical_or(terminated, truncated), jnp.logical_not(finished))
            figures = {
                name: jnp.where(_expand(ends_now, value), info[name], value)
                for name, value in figures.items()
            }
            return (obs, info["weights"], state, finished | ends_now, figures), None

        carry = (obs, state.weights, state, jnp.zeros(num_episodes, bool), figures)
        (_, _, _, finished, figures), _ = jax.lax.scan(step, carry, jax.random.split(run_key, max_steps))
        return {**figures, "finished": finished}

    return run


def _expand(mask: jax.Array, like: jax.Array) -> jax.Array:
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


def with_init_strategy(params: EnvParams, strategy: str) -> EnvParams:
    """``params`` starting every job with the named initial allocation strategy."""
    if strategy not in INIT_STRATEGIES:
        raise ValueError(f"unknown init strategy {strategy!r}; choose one of: {', '.join(INIT_STRATEGIES)}")
    return with_values(params, init_strategy=INIT_STRATEGIES.index(strategy))


def summarise_episodes(figures: dict[str, np.ndarray]) -> dict[str, float]:
    """Means over finished jobs: time and cost relative to the request, SLA rates, utilisation,
    re-allocations."""
    done = figures["finished"].astype(bool)
    if not done.any():
        raise ValueError("no episode finished; raise max_steps_in_episode or the number of steps")

    def mean(x: np.ndarray) -> float:
        return float(np.mean(np.asarray(x, dtype=np.float64)[done]))

    return {
        "episodes": float(done.sum()),
        "time_vs_request": mean(figures["episode_time_s"] / figures["time_ref_s"]),
        "cost_vs_request": mean(figures["episode_cost_usd"] / figures["cost_ref_usd"]),
        "deadline_met": mean(figures["deadline_met"]),
        "budget_met": mean(figures["budget_met"]),
        "all_slas_met": mean(figures["all_slas_met"]),
        "sla_compliance": mean(figures["sla_compliance"]),
        "mean_gpu_util": mean(figures["mean_gpu_util"]),
        "mean_cpu_util": mean(figures["mean_cpu_util"]),
        "reallocations": mean(figures["reallocations"]),
    }
