"""The state fields an epoch's readings set, and a job's state before its first epoch.

Shared by ``JobAllocationEnv``'s reset, step and ``place`` (and read by ``slamorl_jax.live``, which
builds the same readings from a running job's report).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env.dual_weights import mode_weights, update_multipliers
from slamorl_jax.env.job_model import EpochMetrics, billed_usd
from slamorl_jax.env.objectives import NUM_OBJECTIVES
from slamorl_jax.env.online_model import empty_stats
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.sla import sla_severities
from slamorl_jax.env.state import EnvState, JobSpec


def epoch_readings(
    job: JobSpec,
    m: EpochMetrics,
    epoch_time_s: jax.Array,
    throughput: jax.Array,
    gpu_util: jax.Array,
    cpu_util: jax.Array,
    elapsed_s: jax.Array,
    cost_usd: jax.Array,
    epoch: jax.Array,
    params: EnvParams,
    multipliers: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """The ``EnvState`` fields that describe the latest epoch: its readings, the forward-looking
    severities (the job projected at this epoch's rate), the per-SLA dual multipliers updated from
    ``multipliers`` (those before this reading; ``None``: a job's start, all 0) and the objective
    weights of ``params.weights_mode`` (``dual_weights.py``)."""
    remaining_time = (job.epochs - epoch).astype(jnp.float32) * epoch_time_s
    remaining_cost = billed_usd(remaining_time, m.price_per_hour)
    severities = sla_severities(
        elapsed_s + remaining_time,
        cost_usd + remaining_cost,
        throughput,
        m.memory_used_gib,
        gpu_util,
        cpu_util,
        job.sla_targets,
    )
    preference = tuple(job.preference[i] for i in range(NUM_OBJECTIVES))
    before = (
        tuple(jnp.zeros((), jnp.float32) for _ in severities)
        if multipliers is None
        else tuple(multipliers[i] for i in range(len(severities)))
    )
    after = update_multipliers(before, severities, params.dual_step, params.dual_decay, params.dual_max)
    weights = mode_weights(params.weights_mode, preference, severities, after, params.adapt_strength)
    return {
        "epoch_time_s": epoch_time_s,
        "throughput": throughput,
        "gpu_util": gpu_util,
        "cpu_util": cpu_util,
        "memory_util": m.memory_used_gib / m.memory_alloc_gib,
        "memory_used_gib": m.memory_used_gib,
        "price_per_hour": m.price_per_hour,
        "severities": jnp.stack(severities),
        "weights": jnp.stack(weights),
        "multipliers": jnp.stack(after),
        "projected_remaining_time_s": remaining_time,
        "projected_remaining_cost_usd": remaining_cost,
    }


def unstarted_state(
    job: JobSpec,
    gpus: jax.Array,
    cpus: jax.Array,
    m: EpochMetrics,
    contended: jax.Array,
    params: EnvParams,
) -> EnvState:
    """The state of ``job`` before its first epoch at ``(gpus, cpus)``, for which its profile forecasts
    ``m`` (nothing of the job measured yet)."""
    zero = jnp.zeros((), jnp.float32)
    readings = epoch_readings(
        job, m, m.epoch_time_s, m.throughput, m.gpu_util, m.cpu_util, zero, zero,
        jnp.zeros((), jnp.int32), params,
    )  # fmt: skip
    return EnvState(
        job=job,
        steps=jnp.zeros((), jnp.int32),
        epoch=jnp.zeros((), jnp.int32),
        gpus=gpus,
        cpus=cpus,
        contended=contended,
        event_left=jnp.zeros((), bool),
        elapsed_s=zero,
        cost_usd=zero,
        **readings,
        gpu_busy_s=zero,
        cpu_busy_s=zero,
        peak_memory_gib=zero,
        reallocations=jnp.zeros((), jnp.int32),
        severity_sum=zero,
        profile_now=m,
        model_stats=empty_stats(),
        surprise=zero,
    )
