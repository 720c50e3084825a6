"""Probe runs: a job measures a few allocations briefly before its first epoch.

The paper's "baseline runs", as a start of a job: before the first epoch the job runs a short probe at
each of a few allocations, and every probe is billed like an epoch is (``job_env.transition``): its
wall time, plus the re-allocation pause of each switch (``reallocation_pause_s`` when the GPU count
changes, ``cpu_reallocation_pause_s`` when only the CPUs do), at the price of the allocation it runs
on. The first probe launches the job (no pause), as a reset's first allocation does. Each probe's
measured epoch time feeds the job's online model (``online_model.record_epoch``), the one the forecast
block of the observation uses, and the forecast's first choice after the probes
(``forecast.first_choice``: most SLAs projected to hold, then the
preference's time and cost, the pause of moving from the last probe included) becomes the job's
first allocation; the switch to it from the last probe is billed too. Probes are not epochs:
``epoch`` and ``steps`` stay 0.

Default probe set (:func:`probe_allocations`), in this order:

1. the user's request (where a user would start the job);
2. and 3. the profile's fastest and its cheapest (least epoch cost) absolute target
   (``action_sets.py``) whose forecast host memory respects the job's memory limit, the one the
   preference leans to (fastest when ``w_time >= w_cost``) last: the forecast often picks it, and
   then the job need not switch again after the probes.

A probe that repeats an earlier one is skipped (neither billed nor measured). Each probe runs
:data:`PROBE_FRACTION` of an epoch (a few dozen to hundreds of training steps: enough to time a step).
Probes pay off, if at all, over the epochs that follow, and a GPU switch costs a checkpoint-restart
pause whatever the job, so a job probes only when the probes' forecast time (their runs on the
profile and the pauses between them) is at most :data:`PROBE_BUDGET` of its forecast time at the
request (:func:`probes_worth_running`); otherwise it starts at the forecast's first choice on the
profile alone, unbilled and ranked with no pause for any candidate (:func:`first_placement`; budget
0: never probe; ``math.inf``: always). The simulated measurement uses
the job's hidden true constants at the contention of the job's start, with the env's log-normal epoch
noise, exactly as an epoch is simulated; the measured epoch time is the probe's time over the
fraction. The probes' busy GPU and CPU time and peak memory count in the job's utilisation and memory
figures, as an epoch's do; they do not count as re-allocations. The readings of the returned state
are the profile's forecast for the chosen allocation (as ``JobAllocationEnv.place`` sets them) with
the probes' elapsed time and cost, so its severities project the job from the time and money the
probes spent. ``benchmarks/exploration_overhead.py`` measures what they are worth.

Everything is a pure function of arrays: jit and vmap them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env import draws as d
from slamorl_jax.env.actions import clip_allocation
from slamorl_jax.env.epoch_readings import epoch_readings
from slamorl_jax.env.forecast import candidate_allocation, first_choice, target_profile
from slamorl_jax.env.job_model import EpochMetrics, billed_usd, epoch_metrics
from slamorl_jax.env.online_model import posterior_deviation, record_epoch
from slamorl_jax.env.params import EnvParams, cluster_bounds
from slamorl_jax.env.pauses import move_pause_s
from slamorl_jax.env.state import EnvState

PROBE_FRACTION = 0.05  # of an epoch, per probe
PROBE_BUDGET = 0.02  # probe only when the probes' forecast time is at most this share of the job's
NUM_PROBES = 3  # request, fastest, cheapest (module docstring)


def probe_allocations(state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """The default probe set of one job (module docstring): ``(gpus [3], cpus [3])``."""
    job = state.job
    profile = target_profile(state, params)
    fits = profile["memory_used_gib"] <= job.sla_targets.max_memory_gib
    epoch_cost = profile["epoch_time_s"] * profile["price_per_hour"]
    fastest = jnp.argmin(jnp.where(fits, profile["epoch_time_s"], jnp.inf))
    cheapest = jnp.argmin(jnp.where(fits, epoch_cost, jnp.inf))
    none_fit = jnp.logical_not(jnp.any(fits))
    # The extreme the preference leans to is probed last: the forecast often picks it, and then the
    # job need not switch again after the probes.
    leans_to_time = job.preference[0] >= job.preference[1]
    second = jnp.where(leans_to_time, cheapest, fastest)
    third = jnp.where(leans_to_time, fastest, cheapest)
    targets = params.target_allocation
    gpus = jnp.stack([job.requested_gpus, targets[second, 0], targets[third, 0]])
    cpus = jnp.stack([job.requested_cpus, targets[second, 1], targets[third, 1]])
    # With no target inside the memory limit, probe the request alone (the repeats are skipped).
    gpus = jnp.where(none_fit, job.requested_gpus, gpus).astype(jnp.int32)
    cpus = jnp.where(none_fit, job.requested_cpus, cpus).astype(jnp.int32)
    return gpus, cpus


def _distinct(gpus: jax.Array, cpus: jax.Array) -> list[jax.Array]:
    """Per probe, whether it differs from every earlier one (repeats are skipped)."""
    out = []
    for k in range(gpus.shape[0]):
        repeat = jnp.zeros((), bool)
        for j in range(k):
            repeat = jnp.logical_or(repeat, jnp.logical_and(gpus[j] == gpus[k], cpus[j] == cpus[k]))
        out.append(jnp.logical_not(repeat))
    return out


def probes_worth_running(
    state: EnvState,
    gpus: jax.Array,
    cpus: jax.Array,
    params: EnvParams,
    fraction: float | jax.Array = PROBE_FRACTION,
    budget: float | jax.Array = PROBE_BUDGET,
) -> jax.Array:
    """Whether the probes' forecast time (their runs on the profile, and the pauses between them) is
    at most ``budget`` of the job's forecast time at its request: probes pay off over a job's
    remaining epochs, so a short job, or one whose epochs are short against the pause, skips them."""
    job = state.job
    distinct = _distinct(gpus, cpus)
    spend = jnp.zeros((), jnp.float32)
    last = (gpus[0], cpus[0])
    for k in range(gpus.shape[0]):
        epoch_s = epoch_metrics(job.profile, gpus[k], cpus[k], params).epoch_time_s
        pause = move_pause_s(*last, gpus[k], cpus[k], params) if k > 0 else 0.0
        spend = spend + jnp.where(distinct[k], pause + fraction * epoch_s, 0.0)
        last = (jnp.where(distinct[k], gpus[k], last[0]), jnp.where(distinct[k], cpus[k], last[1]))
    request = epoch_metrics(job.profile, job.requested_gpus, job.requested_cpus, params).epoch_time_s
    return spend <= budget * job.epochs.astype(jnp.float32) * request


def probe_busy_s(
    metrics: EpochMetrics, epoch_time_s: jax.Array, fraction: float | jax.Array = PROBE_FRACTION
) -> tuple[jax.Array, jax.Array]:
    """Busy GPU and CPU seconds of one probe: ``metrics``' utilisation over ``fraction`` of an epoch
    of ``epoch_time_s`` (the env counts the job's true utilisation, ``live`` the profile's)."""
    probe_s = fraction * epoch_time_s
    return metrics.gpu_util * probe_s, metrics.cpu_util * probe_s


def run_probes(
    u: jax.Array | tuple[jax.Array, ...],
    state: EnvState,
    gpus: jax.Array,
    cpus: jax.Array,
    params: EnvParams,
    fraction: float | jax.Array = PROBE_FRACTION,
    enabled: jax.Array | bool = True,
) -> EnvState:
    """``state`` (a job before its first epoch) after probing ``(gpus[k], cpus[k])`` in turn, each for
    ``fraction`` of an epoch; ``u`` holds one uniform per probe (its epoch-time noise). With
    ``enabled`` false nothing runs and ``state`` comes back unchanged.

    The returned state sits at the last probe's allocation (``profile_now`` is its forecast) with the
    probes' time, cost, busy time, peak memory and measurements added; its readings are left as they
    were (:func:`probe_start` sets them for the allocation it chooses)."""
    u = d.as_tuple(u)
    job = state.job
    gpus, cpus = clip_allocation(gpus.astype(jnp.int32), cpus.astype(jnp.int32), *cluster_bounds(params))
    elapsed, cost = state.elapsed_s, state.cost_usd
    gpu_busy, cpu_busy, peak, stats = (
        state.gpu_busy_s,
        state.cpu_busy_s,
        state.peak_memory_gib,
        state.model_stats,
    )
    last = (state.gpus, state.cpus)
    distinct = _distinct(gpus, cpus)
    for k in range(gpus.shape[0]):
        g, c = gpus[k], cpus[k]
        repeat = jnp.logical_not(jnp.logical_and(distinct[k], enabled))
        run = jnp.logical_not(repeat).astype(jnp.float32)
        m = epoch_metrics(job.constants, g, c, params, state.contended)
        forecast = epoch_metrics(job.profile, g, c, params)
        noise = jnp.exp(params.epoch_time_noise * d.standard_normal_approx(u[k]))
        measured_epoch_s = m.epoch_time_s * noise
        probe_s = fraction * measured_epoch_s
        pause = move_pause_s(*last, g, c, params) if k > 0 else jnp.zeros((), jnp.float32)
        interval = run * (pause + probe_s)
        elapsed = elapsed + interval
        cost = cost + billed_usd(interval, m.price_per_hour)
        busy_gpu_s, busy_cpu_s = probe_busy_s(m, measured_epoch_s, fraction)
        gpu_busy = gpu_busy + run * busy_gpu_s
        cpu_busy = cpu_busy + run * busy_cpu_s
        peak = jnp.where(repeat, peak, jnp.maximum(peak, m.memory_used_gib))
        measured = record_epoch(
            stats, measured_epoch_s, forecast.epoch_time_s, forecast.compute_share, forecast.sync_share
        )
        stats = jnp.where(repeat, stats, measured)
        last = (jnp.where(repeat, last[0], g), jnp.where(repeat, last[1], c))
    return state.replace(
        gpus=last[0],
        cpus=last[1],
        elapsed_s=elapsed,
        cost_usd=cost,
        gpu_busy_s=gpu_busy,
        cpu_busy_s=cpu_busy,
        peak_memory_gib=peak,
        model_stats=stats,
        profile_now=epoch_metrics(job.profile, last[0], last[1], params),
    )


def suggested_allocation(
    state: EnvState, params: EnvParams, launched: jax.Array | bool = True
) -> tuple[jax.Array, jax.Array]:
    """The allocation the forecast ranks first for ``state`` (keep or an absolute target), with the
    job's online model as it stands; a move pays its pause only when the job has ``launched`` (run
    an epoch or a probe where it is), as the env bills it."""
    mu_compute, mu_sync = posterior_deviation(state.model_stats, params)
    return candidate_allocation(state, params, first_choice(state, params, mu_compute, mu_sync, launched))


def first_placement(state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """The forecast start of a job that has run nothing yet (a fresh reset, no probes): the
    allocation the forecast ranks first when every candidate starts for free (the reset allocation
    stays a candidate, keep, and wins ties; a start rule: ``episodes.run_episodes(start=...)``)."""
    return suggested_allocation(state, params, launched=False)


def start_at(
    probed: EnvState, placed: EnvState, params: EnvParams, launched: jax.Array | bool = True
) -> EnvState:
    """``placed`` (``JobAllocationEnv.place`` of the unprobed job at its first allocation) carrying the
    probes of ``probed``: their time and cost plus the switch from the last probe (when the probes
    ``launched`` the job), their measurements, busy time and peak memory, and readings that project
    the job from there."""
    pause = jnp.where(launched, move_pause_s(probed.gpus, probed.cpus, placed.gpus, placed.cpus, params), 0.0)
    m = placed.profile_now
    elapsed = probed.elapsed_s + pause
    cost = probed.cost_usd + billed_usd(pause, m.price_per_hour)
    readings = epoch_readings(
        placed.job, m, m.epoch_time_s, m.throughput, m.gpu_util, m.cpu_util, elapsed, cost,
        placed.epoch, params,
    )  # fmt: skip
    return placed.replace(
        elapsed_s=elapsed,
        cost_usd=cost,
        **readings,
        gpu_busy_s=probed.gpu_busy_s,
        cpu_busy_s=probed.cpu_busy_s,
        peak_memory_gib=probed.peak_memory_gib,
        model_stats=probed.model_stats,
    )
