"""Expected outcome of a two-phase plan for one job, knowing its mid-run event (``env/shifts.py``).

A plan holds allocation ``a`` from the job's start until its event, then ``b`` for the rest of the
job (``move`` False: it keeps what it holds, which after a preemption is where the preemption put
it). Without an event nothing moves: it is a static allocation, and the figures are exactly those
the best-static oracle has always used (epochs x epoch time, the epoch's throughput and
utilisation), so the anchors of scenarios without events are unchanged.

The model is the simulator's, noise-free and without the random contention, on the job's true
constants (the oracles' hindsight): ``e`` epochs at ``a`` on the constants before the event, then
the event (``shifts.shifted_job``: the targets and prices it changes; a slower node and a contention
spell slow every later epoch unless ``b`` has other GPUs than the job holds, or the job relocates,
which leaves its nodes, ``shifts.node_slowdown``; a preemption moves the job to
``shifts.preempted_allocation(a)`` with the restart pause), then ``E - e`` epochs at ``b`` with the
pause of the move from where the job is (the env's pauses, billed with the first of those epochs at
``b``'s price, as the env bills them). The six job-level checks are ``episode_figures``': total time
and cost against the targets in force at the end, samples / total time, peak memory, and
time-weighted utilisation (a paused job does no work). The objective is the oracle's: ``(w_time T /
T_ref + w_cost C / C_ref) / (w_time + w_cost)``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from slamorl_jax.env import shifts
from slamorl_jax.env.job_model import billed_usd
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.pauses import move_pause_s
from slamorl_jax.env.sla import slas_met
from slamorl_jax.env.state import JobSpec
from slamorl_jax.env.static_allocations import lattice_metrics


def plan_outcomes(
    job: JobSpec,
    gpus: jax.Array,
    cpus: jax.Array,
    then_gpus: jax.Array,
    then_cpus: jax.Array,
    move: jax.Array | bool,
    params: EnvParams,
    relocate: jax.Array | bool = False,
) -> tuple[jax.Array, jax.Array]:
    """The six job-level SLA checks (``[6, ...]``) and the objective (``[...]``) of holding
    ``(gpus, cpus)`` until the job's event and then ``(then_gpus, then_cpus)`` where ``move`` (else
    keeping what the job holds), for one job and allocations that broadcast together. Where
    ``relocate`` (and ``move``), the job instead relocates right after its event (``targets_relocate``,
    ``action_sets.py``): it keeps what it holds, on fresh nodes, paying the GPU pause."""
    event = shifts.happens(job)
    after = shifts.shifted_job(job, event)
    targets = after.sla_targets
    epochs = job.epochs.astype(jnp.float32)
    before_epochs = jnp.where(event, job.shift_epoch, job.epochs).astype(jnp.float32)
    after_epochs = epochs - before_epochs

    first = lattice_metrics(job.constants, gpus, cpus, params)
    preempted = jnp.logical_and(event, job.shift_kind == shifts.PREEMPTION)
    held_gpus, held_cpus, restart = shifts.preemption(gpus, cpus, job.shift_value, preempted, params)
    move = jnp.logical_and(move, event)  # without an event there is nothing to move after
    relocate = jnp.logical_and(relocate, move)
    goes = jnp.logical_and(move, jnp.logical_not(relocate))
    end_gpus = jnp.where(goes, then_gpus, held_gpus)
    end_cpus = jnp.where(goes, then_cpus, held_cpus)
    pause = move_pause_s(held_gpus, held_cpus, end_gpus, end_cpus, params, relocate)
    # A contention spell or a slow node holds until a GPU change leaves the job's nodes (shifts.py).
    spell, node_factor = shifts.node_slowdown(job, job.shift_epoch, jnp.asarray(False))
    slowed = after.constants.replace(compute_s=after.constants.compute_s * node_factor)
    stuck = lattice_metrics(slowed, end_gpus, end_cpus, params, spell)
    left = lattice_metrics(after.constants, end_gpus, end_cpus, params)
    restarts = jnp.logical_or(end_gpus != held_gpus, relocate)
    leaves = jnp.logical_and(restarts, params.moves_leave_contention)
    second = jax.tree.map(functools.partial(jnp.where, leaves), left, stuck)

    first_time = before_epochs * first.epoch_time_s
    work_after = after_epochs * second.epoch_time_s
    total_time = first_time + restart + pause + work_after
    total_cost = billed_usd(first_time, first.price_per_hour) + billed_usd(
        restart + pause + work_after, second.price_per_hour
    )
    # Static runs keep the single-epoch figures the oracle has always used (module docstring).
    static = jnp.logical_not(event)
    safe_time = jnp.maximum(total_time, 1e-9)
    throughput = jnp.where(static, first.throughput, epochs * job.constants.samples_per_epoch / safe_time)
    gpu_util = jnp.where(
        static, first.gpu_util, (first_time * first.gpu_util + work_after * second.gpu_util) / safe_time
    )
    cpu_util = jnp.where(
        static, first.cpu_util, (first_time * first.cpu_util + work_after * second.cpu_util) / safe_time
    )
    memory = jnp.where(
        after_epochs > 0, jnp.maximum(first.memory_used_gib, second.memory_used_gib), first.memory_used_gib
    )
    met = slas_met(total_time, total_cost, throughput, memory, gpu_util, cpu_util, targets)
    return met, plan_objective(job, total_time, total_cost)


def plan_objective(job: JobSpec, time_s: jax.Array, cost_usd: jax.Array) -> jax.Array:
    """The oracles' objective of a run of ``job`` that takes ``time_s`` and costs ``cost_usd`` in all
    (broadcasts): ``(w_time T / T_ref + w_cost C / C_ref) / (w_time + w_cost)``, the preference's
    weights on time and cost over the job's references (``time_ref_s``, ``cost_ref_usd``: its true run
    at the request); the SLA weight is left out, as the oracles rank by SLAs met first."""
    w_time, w_cost = job.preference[0], job.preference[1]
    return (w_time * time_s / job.time_ref_s + w_cost * cost_usd / job.cost_ref_usd) / jnp.maximum(
        w_time + w_cost, 1e-9
    )


def best_index(met: jax.Array, objective: jax.Array) -> jax.Array:
    """Index (into the flattened candidates) of the plan that meets the most SLAs, then has the lowest
    objective; ties to the first."""
    sla_count = jnp.sum(met.astype(jnp.int32), axis=0).reshape(-1)
    ranked = jnp.where(sla_count == jnp.max(sla_count), objective.reshape(-1), jnp.inf)
    return jnp.argmin(ranked)
