"""Run whole, fresh jobs with any policy, vectorised, and collect each job's episode figures.

A policy is ``policy(policy_params, obs [N, F], weights [N, 3], key) -> actions [N]`` (``F`` the
env's observation width); its parameters are an argument (not captured), so one compiled runner
serves every set of them. An optional start rule ``start(state, params) -> (gpus, cpus)`` (one job,
traced) moves each fresh job to another first allocation before its first epoch
(``JobAllocationEnv.place``); baselines and oracles use it. An optional :class:`Controller` replaces
the policy by a per-job controller with hindsight: its ``plan(state, params)`` runs once per job
after the start rule (it may read the job's true constants), and its ``act(plan, state, params)``
picks each step's action from that plan and the env state before the step (the current allocation);
the evaluation's reachable anchor is one. Every job in the batch runs until its first episode ends;
its figures (``JobAllocationEnv``'s ``info``) are recorded at that step, ``finished`` when it ran to
completion and ``truncated`` when ``max_steps_in_episode`` cut it short. Jobs step without the env's
auto-reset (:func:`step_once`: the same draws, transition, truncation and observation as
``JobAllocationEnv.step`` up to the end of the first episode, without drawing a next job nobody
reads), which saves most of a step's and of the compiled program's reset work. Two policies
evaluated with the same key see the same jobs and the same noise, so their figures compare job by
job (common random numbers).
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.action_sets import emitted_relocation
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.draws import check_key
from slamorl_jax.env.job_env import JobAllocationEnv, episode_figures, truncated_after
from slamorl_jax.env.observation import observe
from slamorl_jax.env.params import INIT_STRATEGIES, EnvParams, with_values
from slamorl_jax.env.state import EnvState
from slamorl_jax.env.validation import validate_params_once

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


# Figures recorded per episode: every one of ``episode_figures`` (all scalars per job, plus the
# preference vector and the six job-level SLA checks, ``job_sla_met``, in ``objectives.SLA_NAMES``'
# order), and whether the job had left the nodes its mid-run event slowed by its end (``EnvState.event_left``,
# ``env/shifts.py``: a contention spell or a slower node left by a GPU change or a relocation).
LEFT_EVENT_NODES = "left_event_nodes"
# And how many of its re-allocations were relocations (``action_sets``: the same allocation on fresh
# nodes; each is also one of ``reallocations``), counted from the actions the job took.
RELOCATIONS = "relocations"
# And what a history store records of a finished job (``history.build.records_from_episodes``): the
# allocation it ran its last epoch on, and its deadline and budget as submitted (a mid-run event,
# ``env/shifts.py``, may cut them later; the SLA checks use the targets in force at the end).
FINAL_GPUS = "final_gpus"
FINAL_CPUS = "final_cpus"
# And the allocation it ran its longest stretch of consecutive epochs on (the later on a tie), and
# that stretch's epochs: where the job settled, however it ended.
LONGEST_GPUS = "longest_stretch_gpus"
LONGEST_CPUS = "longest_stretch_cpus"
LONGEST_EPOCHS = "longest_stretch_epochs"
STRETCH_EPOCHS = "_stretch_epochs"  # carried while stepping: the current stretch (not a figure)
DEADLINE_S = "deadline_s"
BUDGET_USD = "budget_usd"


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
    runs = run_episode_batches(env, (params,), policy, key, num_episodes, policy_params, (start,), controller)
    return runs[0]


def run_episode_batches(
    env: JobAllocationEnv,
    params: Sequence[EnvParams],
    policy: Policy,
    key: jax.Array,
    num_episodes: int,
    policy_params: Any = None,
    starts: Sequence[StartRule | None] | None = None,
    controller: Controller | None = None,
) -> list[dict[str, np.ndarray]]:
    """:func:`run_episodes` for several runs of one ``policy`` (or ``controller``) at once, each with
    its own ``params`` and start rule (``starts``, one per run; default: none), on the same jobs
    and noise (the same ``key``): one compiled program steps every run's jobs side by side, and
    run ``i``'s figures are those :func:`run_episodes` gives for ``params[i]`` and ``starts[i]`` (up
    to float rounding). Only the params leaves that differ between runs are batched, so the
    program compiles once per (policy, start rules, controller, jobs, step limit, which leaves
    differ); it is how ``evaluation`` runs its methods and preference points."""
    params = tuple(params)
    if not params:
        raise ValueError("no runs: give at least one params")
    for p in params:
        if not isinstance(p, EnvParams):
            raise TypeError(f"params must be EnvParams (env.default_params), got {type(p).__name__}")
        # Stale derived tables (a field changed by with_values and no with_derived_tables), a NaN
        # noise or a step limit of 0 ran silently: wrong costs, NaN times, jobs of no epoch.
        validate_params_once(p)
    check_key(key)
    if isinstance(num_episodes, bool) or not isinstance(num_episodes, numbers.Integral) or num_episodes < 1:
        raise ValueError(f"num_episodes must be a positive integer, got {num_episodes!r}")
    starts = tuple(starts) if starts is not None else (None,) * len(params)
    if len(starts) != len(params):
        raise ValueError(f"{len(starts)} start rules for {len(params)} params")
    if _starts_its_own_jobs(env) and any(rule is not None for rule in starts):
        # env.place starts the job anew: the probes' time, cost and measurements were dropped unsaid.
        raise ValueError(
            f"a start rule places a {type(env).__name__}'s jobs anew, dropping what its reset did (probes): "
            "give the rule a JobAllocationEnv, or run this env without one (it picks the start)"
        )
    max_steps = max(
        int(np.minimum(np.max(np.asarray(p.workloads.epochs_max)), p.max_steps_in_episode)) for p in params
    )
    leaves, treedef = jax.tree.flatten(params[0])
    others = [jax.tree.flatten(p)[0] for p in params[1:]]
    on_host = [np.asarray(leaf) for leaf in leaves]
    differs = tuple(
        any(not np.array_equal(host, np.asarray(other[i])) for other in others)
        for i, host in enumerate(on_host)
    )
    runner = _episode_runner(env, policy, starts, controller, num_episodes, max_steps, treedef, differs)
    stacked = treedef.unflatten(
        [
            jnp.stack([leaf, *(other[i] for other in others)]) if batched else leaf
            for i, (leaf, batched) in enumerate(zip(leaves, differs, strict=True))
        ]
    )
    figures = jax.device_get(runner(stacked, policy_params, key))
    return [{name: np.asarray(value[run]) for name, value in figures.items()} for run in range(len(params))]


@functools.lru_cache(maxsize=32)
def _episode_runner(
    env: JobAllocationEnv,
    policy: Policy,
    starts: tuple[StartRule | None, ...],
    controller: Controller | None,
    num_episodes: int,
    max_steps: int,
    treedef: Any,
    differs: tuple[bool, ...],
) -> Callable[[EnvParams, Any, jax.Array], dict[str, jax.Array]]:
    """The jitted runner behind :func:`run_episode_batches`, figures with a leading run axis. Every
    run's jobs reset (``differs`` says which params leaves carry the run axis), each run's start
    rule moves its own jobs, and then all runs' jobs step as one flat batch (:func:`_run_jobs`), the
    differing params leaves repeated per job: one policy call and one env step per decision."""
    runs = len(starts)
    params_axes = treedef.unflatten([0 if batched else None for batched in differs])

    def on_batched(params: EnvParams, change: Callable[[jax.Array], jax.Array]) -> EnvParams:
        """``params`` with ``change`` applied to the leaves that carry the run axis."""
        leaves = jax.tree.leaves(params)
        return treedef.unflatten(
            [change(leaf) if batched else leaf for leaf, batched in zip(leaves, differs, strict=True)]
        )

    def reset(params: EnvParams, keys: jax.Array) -> tuple[jax.Array, EnvState]:
        return jax.vmap(env.reset, in_axes=(0, None))(keys, params)

    def run(params: EnvParams, policy_params: Any, key: jax.Array) -> dict[str, jax.Array]:
        reset_key, run_key = jax.random.split(key)
        reset_keys = jax.random.split(reset_key, num_episodes)
        fresh = jax.vmap(reset, in_axes=(params_axes, None), axis_size=runs)(params, reset_keys)
        placed = []
        for index, rule in enumerate(starts):  # each rule on its own run's jobs only
            obs, state = jax.tree.map(lambda x, i=index: x[i], fresh)
            if rule is not None:
                obs, state = _start(env, rule, state, on_batched(params, lambda x, i=index: x[i]))
            placed.append((obs, state))
        obs, state = jax.tree.map(lambda *xs: jnp.concatenate(xs), *placed)
        job_params = on_batched(params, lambda x: jnp.repeat(x, num_episodes, axis=0))
        figures = _run_jobs(
            env, policy, controller, num_episodes, runs, max_steps,
            job_params, params_axes, policy_params, obs, state, run_key,
        )  # fmt: skip
        return jax.tree.map(lambda x: x.reshape((runs, num_episodes, *x.shape[1:])), figures)

    return jax.jit(run)


def _start(env: JobAllocationEnv, rule: StartRule, state: EnvState, params: EnvParams) -> tuple:
    """Fresh jobs ``state`` moved where ``rule`` puts each (``env.place``), and their observations."""
    gpus, cpus = jax.vmap(rule, in_axes=(0, None))(state, params)
    state = jax.vmap(env.place, in_axes=(0, 0, 0, None))(state, gpus, cpus, params)
    return jax.vmap(observe, in_axes=(0, None))(state, params), state


def _run_jobs(
    env: JobAllocationEnv,
    policy: Policy,
    controller: Controller | None,
    num_episodes: int,
    runs: int,
    max_steps: int,
    params: EnvParams,
    params_axes: Any,
    policy_params: Any,
    obs: jax.Array,
    state: EnvState,
    key: jax.Array,
) -> dict[str, jax.Array]:
    """``runs`` x ``num_episodes`` started jobs as one batch (traced; ``params`` leaves with axis 0
    in ``params_axes`` hold one value per job): ``max_steps`` decisions, recording each job's
    figures when its first episode ends. Every run's jobs get the same step keys (common random
    numbers across runs)."""
    batch = runs * num_episodes
    if controller is not None:
        plans = jax.vmap(controller.plan, in_axes=(0, params_axes))(state, params)
    initial = {**jax.vmap(episode_figures)(state), **_state_figures(state)}
    figures = {name: jnp.zeros_like(value) for name, value in initial.items()}
    counts = {name: jnp.zeros(batch, jnp.int32) for name in (RELOCATIONS, STRETCH_EPOCHS, LONGEST_EPOCHS)}
    counts[LONGEST_GPUS], counts[LONGEST_CPUS] = state.gpus, state.cpus
    figures.update({name: jnp.zeros_like(value) for name, value in counts.items() if name != STRETCH_EPOCHS})
    env_step = jax.vmap(functools.partial(step_once, env), in_axes=(0, 0, 0, params_axes))

    def step(carry: tuple, step_key: jax.Array) -> tuple:
        obs, weights, before, ended, completed, counts, figures = carry
        act_key, env_key = jax.random.split(step_key)
        if controller is None:
            actions = policy(policy_params, obs, weights, act_key)
        else:
            actions = jax.vmap(controller.act, in_axes=(0, 0, params_axes))(plans, before, params)
        step_keys = jnp.concatenate([jax.random.split(env_key, num_episodes)] * runs)
        obs, state, terminated, truncated, info = env_step(step_keys, before, actions, params)
        counts = _counted(counts, before, state, emitted_relocation(actions, env.action_set))
        ends_now = jnp.logical_and(jnp.logical_or(terminated, truncated), jnp.logical_not(ended))
        at_end = {**info, **_state_figures(state), **counts}
        figures = {
            name: jnp.where(_expand(ends_now, value), at_end[name], value) for name, value in figures.items()
        }
        completed = completed | jnp.logical_and(ends_now, terminated)
        return (obs, state.weights, state, ended | ends_now, completed, counts, figures), None

    nothing = jnp.zeros(batch, bool)
    carry = (obs, state.weights, state, nothing, nothing, counts, figures)
    submitted = {DEADLINE_S: state.job.sla_targets.deadline_s, BUDGET_USD: state.job.sla_targets.budget_usd}
    (_, _, _, ended, completed, _, figures), _ = jax.lax.scan(step, carry, jax.random.split(key, max_steps))
    # A job cut short by max_steps_in_episode is not finished: its figures are those of part of a job
    # (the time so far against the whole job's reference, a deadline not yet reached).
    return {
        **figures,
        **submitted,
        "finished": completed,
        "truncated": jnp.logical_and(ended, jnp.logical_not(completed)),
    }


def _counted(
    counts: dict[str, jax.Array], before: EnvState, after: EnvState, relocated: jax.Array
) -> dict[str, jax.Array]:
    """``counts`` after one more epoch: the relocations, and the longest stretch of epochs run at one
    allocation (a relocation keeps the allocation; on a tie the later stretch wins)."""
    kept = jnp.logical_and(after.gpus == before.gpus, after.cpus == before.cpus)
    stretch = jnp.where(kept, counts[STRETCH_EPOCHS] + 1, 1)
    longer = stretch >= counts[LONGEST_EPOCHS]
    return {
        RELOCATIONS: counts[RELOCATIONS] + relocated.astype(jnp.int32),
        STRETCH_EPOCHS: stretch,
        LONGEST_EPOCHS: jnp.where(longer, stretch, counts[LONGEST_EPOCHS]),
        LONGEST_GPUS: jnp.where(longer, after.gpus, counts[LONGEST_GPUS]),
        LONGEST_CPUS: jnp.where(longer, after.cpus, counts[LONGEST_CPUS]),
    }


def _state_figures(state: EnvState) -> dict[str, jax.Array]:
    """The figures a batch of jobs records from its state beside ``episode_figures``' (module
    constants above)."""
    return {
        LEFT_EVENT_NODES: state.event_left,
        FINAL_GPUS: state.gpus,
        FINAL_CPUS: state.cpus,
    }


def step_once(
    env: JobAllocationEnv, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, dict[str, jax.Array]]:
    """``env.step`` for a job whose episode is not over, without the auto-reset: ``(obs, state,
    terminated, truncated, info)``, equal to ``step``'s until the episode ends (the same uniforms,
    the first ``STEP_DRAWS`` of which drive the epoch; ``step_env`` is that transition observed).
    After the end it keeps stepping the finished job, whose figures nobody reads any more."""
    obs, next_state, _, terminated, info = env.step_env(key, state, action, params)
    return obs, next_state, terminated, truncated_after(next_state, terminated, params), info


def _starts_its_own_jobs(env: JobAllocationEnv) -> bool:
    """Whether ``env``'s reset does more than draw a job (``ProbingEnv`` and the like override
    ``reset_from_draws`` to probe and place it), which a start rule's ``env.place`` would undo."""
    own_reset = getattr(type(env), "reset_from_draws", JobAllocationEnv.reset_from_draws)
    return own_reset is not JobAllocationEnv.reset_from_draws


def _expand(mask: jax.Array, like: jax.Array) -> jax.Array:
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


def with_init_strategy(params: EnvParams, strategy: str) -> EnvParams:
    """``params`` starting every job with the named initial allocation strategy."""
    if strategy not in INIT_STRATEGIES:
        raise ValueError(f"unknown init strategy {strategy!r}; choose one of: {', '.join(INIT_STRATEGIES)}")
    return with_values(params, init_strategy=INIT_STRATEGIES.index(strategy))


def summarise_episodes(figures: dict[str, np.ndarray]) -> dict[str, float]:
    """Means over finished jobs (run to completion; ``truncated`` counts those cut short by
    ``max_steps_in_episode``, left out): time and cost relative to the request, SLA rates,
    utilisation, re-allocations and the relocations among them."""
    done = figures["finished"].astype(bool)
    if not done.any():
        raise ValueError(
            "no job ran to completion (a job cut short by max_steps_in_episode is not counted); raise "
            "max_steps_in_episode or the number of steps"
        )

    def mean(x: np.ndarray) -> float:
        return float(np.mean(np.asarray(x, dtype=np.float64)[done]))

    return {
        "episodes": float(done.sum()),
        "truncated": float(np.asarray(figures.get("truncated", False), dtype=bool).sum()),
        "time_vs_request": mean(figures["episode_time_s"] / figures["time_ref_s"]),
        "cost_vs_request": mean(figures["episode_cost_usd"] / figures["cost_ref_usd"]),
        "deadline_met": mean(figures["deadline_met"]),
        "budget_met": mean(figures["budget_met"]),
        "all_slas_met": mean(figures["all_slas_met"]),
        "sla_compliance": mean(figures["sla_compliance"]),
        "mean_gpu_util": mean(figures["mean_gpu_util"]),
        "mean_cpu_util": mean(figures["mean_cpu_util"]),
        "reallocations": mean(figures["reallocations"]),
        "relocations": mean(figures[RELOCATIONS]),
    }
