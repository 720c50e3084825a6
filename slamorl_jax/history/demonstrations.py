"""Decisions turned into what a policy learns from: observation, weights and action of its set.

From a decision log (``decisions.py``): each job's report becomes the env state the policy would see
for it (``live_encoding.live_states``, the same formulas as ``recommend``), observed on the policy's cluster,
and its next allocation the action of the policy's set that lands nearest to it
(``action_sets.nearest_action``: exact when the set reaches it; the coarse target grid may not).

From simulated jobs (:func:`oracle_demonstrations`): fresh jobs of the policy's training scenario,
each moved at every one of its first ``decisions_per_job`` epochs towards its best static allocation
in hindsight (``evaluation.baselines.BestStatic``, the allocation a history store records as having
served the job best): a jump there first, then keep. The jobs start as the config's
``init_strategy`` says (requests, random allocations and cold starts by default).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.imitation import Demonstrations
from slamorl_jax.agent.trainer import config_catalog, env_params_from_config
from slamorl_jax.env import action_sets
from slamorl_jax.env.best_static import BestStatic
from slamorl_jax.env.catalog import Catalog
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.observation import observe
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState
from slamorl_jax.episodes import step_once
from slamorl_jax.history.decisions import NEXT_FIELDS, Decision
from slamorl_jax.live import check_recommendable
from slamorl_jax.live_checks import ClusterLimits, check_in_cluster
from slamorl_jax.live_encoding import live_states, padded_size

# Decisions labelled per compiled call (a chunk's observations: 351 floats each).
DECISION_CHUNK = 4096


@functools.lru_cache(maxsize=4)
def _labeller(action_set: str):
    """Jitted over a batch of jobs: each one's observation, weights and the action nearest to its
    next allocation, and whether that action reaches it."""

    def label(state: EnvState, next_gpus: jax.Array, next_cpus: jax.Array, params: EnvParams) -> tuple:
        action = action_sets.nearest_action(action_set, state.gpus, state.cpus, next_gpus, next_cpus, params)
        reached = action_sets.apply(action, state.gpus, state.cpus, params)
        exact = jnp.logical_and(reached[0] == next_gpus, reached[1] == next_cpus)
        return observe(state, params), state.weights, action, exact

    return jax.jit(jax.vmap(label, in_axes=(0, 0, 0, None)))


def decision_demonstrations(
    decisions: Sequence[Decision], config: TrainConfig, catalog: Catalog | None = None
) -> tuple[Demonstrations, dict[str, int]]:
    """The demonstrations of logged ``decisions`` for a policy of ``config`` (its cluster and action
    set), and counts: ``decisions``, ``moves`` (next allocation elsewhere) and ``inexact`` (next
    allocation the set cannot reach in one action; labelled with the nearest). ``ValueError`` naming
    the decision for a finished job or an allocation outside the cluster (:func:`check_decisions`).
    ``catalog``: the one the policy is for (default: the one ``config.catalog`` names, else the
    shipped one), in which the jobs' names are read."""
    if not decisions:
        raise ValueError("no decisions to learn from")
    catalog = catalog if catalog is not None else config_catalog(config)
    params = env_params_from_config(config, catalog)
    check_decisions(decisions, params, catalog)
    label = _labeller(config.actions)
    chunks: list[tuple] = []
    for start in range(0, len(decisions), DECISION_CHUNK):
        chunk = decisions[start : start + DECISION_CHUNK]
        size = padded_size(len(chunk))  # rows padded with the first decision: few sizes compile
        states = live_states([decision.job for decision in chunk], params, catalog, size=size)
        padded = [*chunk, *chunk[:1] * (size - len(chunk))]
        next_gpus, next_cpus = (
            np.array([getattr(d, name) for d in padded], np.int32) for name in NEXT_FIELDS
        )
        labelled = jax.device_get(label(states, next_gpus, next_cpus, params))
        chunks.append(tuple(part[: len(chunk)] for part in labelled))
    obs, weights, actions, exact = (np.concatenate([chunk[k] for chunk in chunks]) for k in range(4))
    moves = sum((d.next_gpus, d.next_cpus) != (d.job.gpus, d.job.cpus) for d in decisions)
    counts = {"decisions": len(decisions), "moves": moves, "inexact": int(np.sum(~exact))}
    return Demonstrations(obs, weights, actions.astype(np.int32)), counts


def check_decisions(decisions: Sequence[Decision], params: EnvParams, catalog: Catalog | None = None) -> None:
    """``ValueError`` naming the first decision (its ``where``, else its index) of a finished job or
    with an allocation, current, requested, measured or next, outside the cluster of ``params``
    (``live_checks.check_in_cluster``: what ``recommend`` refuses of a job)."""
    limits = ClusterLimits.of(params)
    for i, decision in enumerate(decisions):
        try:
            check_recommendable(decision.job, limits, catalog)
            check_in_cluster(NEXT_FIELDS, decision.next_gpus, decision.next_cpus, limits)
        except ValueError as err:
            raise ValueError(f"{decision.where or f'decision {i}'}: {err}") from None


@functools.lru_cache(maxsize=4)
def _oracle_rollout(env: JobAllocationEnv, oracle: BestStatic, num_jobs: int, steps: int):
    """Jitted: ``num_jobs`` fresh jobs run ``steps`` epochs towards their oracle allocations,
    with each step's observation, weights, action and whether the job was still running."""
    action_set = env.action_set

    @jax.jit
    def run(params: EnvParams, key: jax.Array) -> tuple:
        reset_key, step_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_jobs), params)
        goal_gpus, goal_cpus = jax.vmap(oracle, in_axes=(0, None))(state, params)
        to_goal = functools.partial(action_sets.nearest_action, action_set)
        nearest = jax.vmap(to_goal, in_axes=(0, 0, 0, 0, None))
        env_step = jax.vmap(functools.partial(step_once, env), in_axes=(0, 0, 0, None))

        def step(carry: tuple, key: jax.Array) -> tuple:
            obs, state, running = carry
            actions = nearest(state.gpus, state.cpus, goal_gpus, goal_cpus, params)
            row = (obs, state.weights, actions, running)
            obs, state, terminated, truncated, _ = env_step(
                jax.random.split(key, num_jobs), state, actions, params
            )
            running = jnp.logical_and(running, jnp.logical_not(jnp.logical_or(terminated, truncated)))
            return (obs, state, running), row

        carry = (obs, state, jnp.ones(num_jobs, bool))
        _, rows = jax.lax.scan(step, carry, jax.random.split(step_key, steps))
        return rows

    return run


def oracle_demonstrations(
    config: TrainConfig,
    num_jobs: int,
    decisions_per_job: int,
    key: jax.Array,
    env: JobAllocationEnv | None = None,
) -> Demonstrations:
    """Demonstrations of ``num_jobs`` simulated jobs of ``config``'s scenario moved towards their
    hindsight-best static allocations, the first ``decisions_per_job`` decisions of each (fewer for
    shorter jobs; module docstring)."""
    env = env or JobAllocationEnv(action_set=config.actions, catalog=config_catalog(config))
    params = env_params_from_config(config, env.catalog)
    run = _oracle_rollout(env, BestStatic.for_params(params), num_jobs, decisions_per_job)
    obs, weights, actions, running = (np.asarray(x) for x in run(params, key))
    keep = running.reshape(-1)
    return Demonstrations(
        obs.reshape(-1, obs.shape[-1])[keep],
        weights.reshape(-1, weights.shape[-1])[keep],
        actions.reshape(-1)[keep].astype(np.int32),
    )
