"""The 21 observation features, every one in [0, 1].

====  =====================  ===========================================================
idx   name                   definition
====  =====================  ===========================================================
0     gpu_alloc              GPUs / max GPUs per job
1     cpu_alloc              CPUs / most CPUs a job may hold (max nodes x CPUs per node)
2     gpu_util               GPU utilisation of the last epoch
3     cpu_util               CPU utilisation of the last epoch
4     memory_util            host memory used / allocated in the last epoch
5     progress               epochs done / epochs of the job
6     throughput             x / (1 + x), x = last epoch throughput / requested allocation's
                             (0.5 = as fast as the user's request; per-workload scale free)
7     time_used              min(1, elapsed time / deadline)
8     cost_used              min(1, cost so far / budget)
9-14  *_met                  1 if the SLA is met (time, cost, throughput, memory, gpu_util,
                             cpu_util; time and cost judged on the projected completion)
15-20 *_severity             severity of each SLA in the same order (0 when met, capped at 1)
====  =====================  ===========================================================

At reset the "last epoch" readings are the noise-free expectation for the initial allocation (what
a short probe would show), so the first decision is an informed one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env.objectives import SLA_NAMES
from slamorl_jax.env.params import EnvParams, max_gpus
from slamorl_jax.env.state import EnvState

FEATURE_NAMES = (
    "gpu_alloc",
    "cpu_alloc",
    "gpu_util",
    "cpu_util",
    "memory_util",
    "progress",
    "throughput",
    "time_used",
    "cost_used",
    *(f"{name}_met" for name in SLA_NAMES),
    *(f"{name}_severity" for name in SLA_NAMES),
)
NUM_FEATURES = len(FEATURE_NAMES)
assert NUM_FEATURES == 21


def observe(state: EnvState, params: EnvParams) -> jax.Array:
    """The 21-feature float32 observation of ``state``."""
    job = state.job
    cpu_limit = (params.max_nodes * params.cpus_per_node).astype(jnp.float32)
    relative_throughput = state.throughput / jnp.maximum(job.throughput_ref, 1e-9)
    targets = job.sla_targets
    scalars = jnp.stack(
        [
            state.gpus.astype(jnp.float32) / max_gpus(params).astype(jnp.float32),
            state.cpus.astype(jnp.float32) / cpu_limit,
            state.gpu_util,
            state.cpu_util,
            state.memory_util,
            state.epoch.astype(jnp.float32) / job.epochs.astype(jnp.float32),
            relative_throughput / (1.0 + relative_throughput),
            state.elapsed_s / targets.deadline_s,
            state.cost_usd / targets.budget_usd,
        ]
    )
    met = (state.severities <= 0.0).astype(jnp.float32)
    features = jnp.concatenate([scalars, met, state.severities])
    return jnp.clip(features, 0.0, 1.0).astype(jnp.float32)
