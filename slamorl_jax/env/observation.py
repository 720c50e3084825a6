"""The observation: the paper's 21 features, then the forecast block (``forecast.py``); all in [0, 1].

====  =====================  ===========================================================
idx   name                   definition
====  =====================  ===========================================================
0     gpu_alloc              GPUs / max GPUs per job
1     cpu_alloc              CPUs / the cluster's most CPUs (max nodes x CPUs per node)
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

At reset the "last epoch" readings are the workload profile's forecast for the initial allocation
(nothing of this job has been measured yet). The reference throughput is the profile's forecast
at the user's request. Then come ``forecast.NUM_FORECAST_FEATURES`` features: the projected time,
cost and other SLAs of every absolute target and of keeping the allocation, from the profile
corrected by the job's measured epochs, which of them the forecast ranks first, and six job
features (``forecast.py``). No feature reads the job's hidden true constants (``job_truth.py``).
"""

from __future__ import annotations

import hashlib

import jax
import jax.numpy as jnp

from slamorl_jax.env.action_sets import NUM_TARGETS, action_names
from slamorl_jax.env.forecast import FORECAST_FEATURE_NAMES, OUTCOME_FEATURES, forecast_parts
from slamorl_jax.env.objectives import SLA_NAMES
from slamorl_jax.env.params import EnvParams, max_gpus
from slamorl_jax.env.state import EnvState, check_state

PAPER_FEATURE_NAMES = (
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
NUM_PAPER_FEATURES = len(PAPER_FEATURE_NAMES)
assert NUM_PAPER_FEATURES == 21
FEATURE_NAMES = (*PAPER_FEATURE_NAMES, *FORECAST_FEATURE_NAMES)
NUM_FEATURES = len(FEATURE_NAMES)


# A fingerprint of the feature order and of the target grid the features describe, stored with
# checkpoints: a policy only runs on the layout it was trained on (the paper's first 21 features
# never move). The grid is named by the ``targets`` set's actions on purpose: relocate is an action
# with no features of its own, so every action set shares this layout and the checkpoints saved
# before relocate existed still match it.
def observation_layout(cpus_per_gpu: tuple[float, ...] | None = None) -> str:
    """The fingerprint of the observation over the grid of the default GPU counts x ``cpus_per_gpu``
    CPUs per GPU (default: the default grid's; ``TrainConfig.target_cpus_per_gpu``)."""
    names = (*FEATURE_NAMES, *action_names("targets", cpus_per_gpu=cpus_per_gpu))
    return hashlib.sha256(",".join(names).encode()).hexdigest()[:16]


OBSERVATION_LAYOUT = observation_layout()
# Where the per-target forecasts sit: (offset, targets, features per target), field-major.
TARGET_BLOCK = (NUM_PAPER_FEATURES, NUM_TARGETS, len(OUTCOME_FEATURES))


def observe(state: EnvState, params: EnvParams) -> jax.Array:
    """The float32 observation of one env's ``state``: :func:`paper_features` then the forecast block."""
    check_state(state, batched_use="observe a batch with jax.vmap(observe, (0, None))")
    return jnp.concatenate([paper_features(state, params), *forecast_parts(state, params)])


def allocation_scales(params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """What the first two features divide the allocated GPUs and CPUs by: the most GPUs a job may
    hold, and the cluster's most CPUs (max nodes x CPUs per node; a job capped at fewer GPUs than the
    cluster's may hold fewer CPUs than that), as float32."""
    return max_gpus(params).astype(jnp.float32), (params.max_nodes * params.cpus_per_node).astype(jnp.float32)


def paper_features(state: EnvState, params: EnvParams) -> jax.Array:
    """The paper's 21 features of ``state`` (the first block of the observation)."""
    job = state.job
    gpu_scale, cpu_scale = allocation_scales(params)
    relative_throughput = state.throughput / jnp.maximum(job.throughput_ref, 1e-9)
    targets = job.sla_targets
    scalars = jnp.stack(
        [
            state.gpus.astype(jnp.float32) / gpu_scale,
            state.cpus.astype(jnp.float32) / cpu_scale,
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
