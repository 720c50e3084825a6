"""The observation's second block: what a platform honestly knows about where the job could go.

For each absolute target of the action grid (``action_sets.py``; the same features in every action
set) and for keeping the current allocation, the job's **projected outcome** if it moved there now and
stayed: the workload profile's forecast at that allocation, corrected by this job's measured epochs
(``online_model.py``), plus the re-allocation pause it would pay. Never the job's true constants.

Per target ``k`` (and ``keep``), three features in [0, 1]:

=============  ===========================================================================
``time``       projected completion time / deadline, clipped to [0, 2] and halved (0.5 = on time)
``cost``       projected total cost / budget, the same way
``other_slas`` fraction of the four other job-level SLAs (throughput, memory, GPU and CPU
               utilisation) the projected job would meet
=============  ===========================================================================

Projected completion = elapsed + pause + epochs left x corrected epoch time; cost adds that
interval at the allocation's price; the other SLAs are the job-level checks of ``episode_figures``
on the projected whole job (past epochs included: samples / total time, peak memory, time-weighted
utilisation). Then five job features:

=================== ======================================================================
``pause_share``     GPU re-allocation pause / (pause + corrected epoch time): what a move costs
``epochs_left``     epochs left / (epochs left + 10): resolution where few decisions remain
``data_parallel``   1 if extra GPUs can speed the job up
``compute_dev``     0.5 + 0.5 tanh(2 mu_compute): the online model's compute deviation
``sync_dev``        0.5 + 0.5 tanh(2 mu_sync)
=================== ======================================================================
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env.action_sets import NUM_TARGETS
from slamorl_jax.env.derived import TARGET_PROFILE_FIELDS, TARGET_PROFILE_ROWS
from slamorl_jax.env.job_model import EpochMetrics
from slamorl_jax.env.online_model import corrected_epoch_time, posterior_deviation
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState

OUTCOME_FEATURES = ("time", "cost", "other_slas")
JOB_FEATURES = ("pause_share", "epochs_left", "data_parallel", "compute_dev", "sync_dev")
FORECAST_FEATURE_NAMES = (
    *(f"target{k}_{name}" for name in OUTCOME_FEATURES for k in range(NUM_TARGETS)),
    *(f"keep_{name}" for name in OUTCOME_FEATURES),
    *JOB_FEATURES,
)
NUM_FORECAST_FEATURES = len(FORECAST_FEATURE_NAMES)
EPOCHS_LEFT_SCALE = 10.0
RATIO_CAP = 2.0


def projected_outcome(
    state: EnvState,
    epoch_s: jax.Array,
    price_per_hour: jax.Array,
    memory_used_gib: jax.Array,
    gpu_util: jax.Array,
    cpu_util: jax.Array,
    pause_s: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(time, cost, other_slas) features of moving now to an allocation and staying (broadcasts).

    Written without divisions by per-target values (the job's limits are inverted once), as it
    runs for every target of every job at every step."""
    job = state.job
    targets = job.sla_targets
    left = (job.epochs - state.epoch).astype(jnp.float32)
    work = left * epoch_s
    spend = pause_s + work
    total_time = state.elapsed_s + spend
    total_cost = state.cost_usd + spend * price_per_hour * (1.0 / 3600.0)
    samples = job.epochs.astype(jnp.float32) * job.profile.samples_per_epoch
    memory_ok = jnp.logical_and(
        memory_used_gib <= targets.max_memory_gib, state.peak_memory_gib <= targets.max_memory_gib
    )
    others = (
        (samples >= targets.min_throughput * total_time).astype(jnp.float32)
        + memory_ok.astype(jnp.float32)
        + (state.gpu_busy_s + work * gpu_util >= targets.min_gpu_util * total_time).astype(jnp.float32)
        + (state.cpu_busy_s + work * cpu_util >= targets.min_cpu_util * total_time).astype(jnp.float32)
    )
    return (
        0.5 * jnp.clip(total_time * (1.0 / targets.deadline_s), 0.0, RATIO_CAP),
        0.5 * jnp.clip(total_cost * (1.0 / targets.budget_usd), 0.0, RATIO_CAP),
        0.25 * others,
    )


def forecast_features(state: EnvState, params: EnvParams) -> jax.Array:
    """The ``NUM_FORECAST_FEATURES`` float32 features of one job (module docstring): every target's
    time, then every target's cost, then every target's other SLAs, then keep's three, then the job's."""
    job = state.job
    num_types = params.gpu_type_probs.shape[0]
    row = params.target_profile[job.workload * num_types + job.gpu_type]
    profile = dict(zip(TARGET_PROFILE_ROWS, row.reshape(TARGET_PROFILE_FIELDS, NUM_TARGETS), strict=True))
    mu_compute, mu_sync = posterior_deviation(state.model_stats, params)

    target_gpus = params.target_allocation[:, 0]
    target_cpus = params.target_allocation[:, 1]
    pause = jnp.where(
        target_gpus != state.gpus,
        params.reallocation_pause_s,
        jnp.where(target_cpus != state.cpus, params.cpu_reallocation_pause_s, 0.0),
    )
    targets = projected_outcome(
        state,
        corrected_epoch_time(
            profile["epoch_time_s"], profile["compute_share"], profile["sync_share"], mu_compute, mu_sync
        ),
        profile["price_per_hour"],
        profile["memory_used_gib"],
        profile["gpu_util"],
        profile["cpu_util"],
        pause,
    )
    now: EpochMetrics = state.profile_now
    now_epoch_s = corrected_epoch_time(
        now.epoch_time_s, now.compute_share, now.sync_share, mu_compute, mu_sync
    )
    keep = projected_outcome(
        state, now_epoch_s, now.price_per_hour, now.memory_used_gib, now.gpu_util, now.cpu_util, 0.0
    )
    left = (job.epochs - state.epoch).astype(jnp.float32)
    job_features = jnp.stack(
        [
            params.reallocation_pause_s / jnp.maximum(params.reallocation_pause_s + now_epoch_s, 1e-9),
            left / (left + EPOCHS_LEFT_SCALE),
            job.profile.data_parallel.astype(jnp.float32),
            0.5 + 0.5 * jnp.tanh(2.0 * mu_compute),
            0.5 + 0.5 * jnp.tanh(2.0 * mu_sync),
        ]
    )
    return jnp.concatenate([*targets, jnp.stack(keep), job_features]).astype(jnp.float32)
