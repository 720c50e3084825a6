"""SLA severities: relative overshoot (upper limits) or shortfall (lower limits), capped at 1, and
the six job-level checks of a job's totals (:func:`slas_met`).

Time and cost are judged forward-looking: the projection of the whole job at the current epoch rate
(elapsed + remaining epochs x current epoch time, likewise for cost) against the deadline and budget,
so the agent sees a violation coming and can correct it before it happens.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.typing import ArrayLike

from slamorl_jax.env.state import SlaTargets


def over_limit_severity(value: ArrayLike, limit: ArrayLike) -> jnp.ndarray:
    """Severity of an upper limit: ``clip((value - limit) / limit, 0, 1)``."""
    limit = jnp.maximum(jnp.asarray(limit), 1e-9)
    return jnp.clip((jnp.asarray(value) - limit) / limit, 0.0, 1.0)


def under_limit_severity(value: ArrayLike, limit: ArrayLike) -> jnp.ndarray:
    """Severity of a lower limit: ``clip((limit - value) / limit, 0, 1)`` (0 when ``limit <= 0``)."""
    limit = jnp.asarray(limit)
    safe = jnp.maximum(limit, 1e-9)
    return jnp.where(limit > 0, jnp.clip((safe - jnp.asarray(value)) / safe, 0.0, 1.0), 0.0)


def sla_severities(
    projected_time_s: ArrayLike,
    projected_cost_usd: ArrayLike,
    throughput: ArrayLike,
    memory_used_gib: ArrayLike,
    gpu_util: ArrayLike,
    cpu_util: ArrayLike,
    targets: SlaTargets,
) -> tuple[jnp.ndarray, ...]:
    """The six severities in ``objectives.SLA_NAMES`` order."""
    return (
        over_limit_severity(projected_time_s, targets.deadline_s),
        over_limit_severity(projected_cost_usd, targets.budget_usd),
        under_limit_severity(throughput, targets.min_throughput),
        over_limit_severity(memory_used_gib, targets.max_memory_gib),
        under_limit_severity(gpu_util, targets.min_gpu_util),
        under_limit_severity(cpu_util, targets.min_cpu_util),
    )


def slas_met(
    time_s: ArrayLike,
    cost_usd: ArrayLike,
    throughput: ArrayLike,
    peak_memory_gib: ArrayLike,
    gpu_util: ArrayLike,
    cpu_util: ArrayLike,
    targets: SlaTargets,
) -> jnp.ndarray:
    """Whether a job's totals meet its six job-level SLAs (``[6, ...]``, ``objectives.SLA_NAMES``
    order): total time within the deadline, total cost within the budget, mean throughput (samples /
    total time), peak memory, and time-weighted GPU and CPU utilisation. The one set of checks behind
    a job's end (``episode_figures``) and the oracles' plans (``plans``, ``evaluation.reachable``)."""
    return jnp.stack(
        [
            time_s <= targets.deadline_s,
            cost_usd <= targets.budget_usd,
            throughput >= targets.min_throughput,
            peak_memory_gib <= targets.max_memory_gib,
            gpu_util >= targets.min_gpu_util,
            cpu_util >= targets.min_cpu_util,
        ]
    )
