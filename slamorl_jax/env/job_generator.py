"""The job generator: draws one training job, its user's request and SLAs (see ``scenarios.py``).

Everything is a pure function of the reset uniforms (``draws.py``) and ``EnvParams``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env import draws as d
from slamorl_jax.env.actions import clip_allocation, cpu_cap, floor_div
from slamorl_jax.env.job_model import epoch_metrics, job_constants_table
from slamorl_jax.env.lookup import gather_row, take_small
from slamorl_jax.env.params import INIT_STRATEGIES, EnvParams, max_gpus
from slamorl_jax.env.scenarios import kind_preferences
from slamorl_jax.env.state import JobSpec, SlaTargets

_KIND_PREFERENCES = kind_preferences()


def requested_allocation(
    u_gpus: jax.Array,
    u_cpus: jax.Array,
    gpu_cdf: jax.Array,
    data_parallel: jax.Array,
    params: EnvParams,
) -> tuple[jax.Array, jax.Array]:
    """The user's static request: GPUs from the workload's distribution (given as its CDF), CPUs per
    GPU from Alibaba's."""
    bin_index = d.categorical_from_cdf(u_gpus, gpu_cdf)
    gpus = take_small(params.requested_gpu_bins, bin_index)
    gpus = jnp.where(data_parallel, gpus, 1)
    ratio_index = d.categorical(u_cpus, params.requested_cpus_per_gpu_probs)
    ratio = take_small(params.requested_cpus_per_gpu_values, ratio_index)
    cpus_wanted = ratio * gpus.astype(jnp.float32)
    step = params.cpu_step.astype(jnp.float32)
    cpus = (jnp.round(cpus_wanted / step) * step).astype(jnp.int32)
    return clip_allocation(
        gpus, cpus, max_gpus(params), params.gpus_per_node, params.cpus_per_node, params.cpu_step
    )


def sample_preference(u: tuple[jax.Array, ...], kind: jax.Array, params: EnvParams) -> jax.Array:
    """The job's preference: fixed, uniform on the simplex, or the scenario kind's preset."""
    random_pref = d.uniform_simplex(*(u[i] for i in d.PREFERENCE))
    preset = take_small(jnp.asarray(_KIND_PREFERENCES), kind)
    use_random = u[d.RANDOM_PREFERENCE] < params.random_preference_prob
    fixed = params.fixed_preference / jnp.sum(params.fixed_preference)
    return jnp.stack(
        [
            jnp.where(params.use_fixed_preference, fixed[i], jnp.where(use_random, r, p))
            for i, (r, p) in enumerate(zip(random_pref, preset, strict=True))
        ]
    )


def sample_job(u: jax.Array | tuple[jax.Array, ...], params: EnvParams) -> JobSpec:
    """Draw a job from the ``RESET_DRAWS`` uniforms ``u`` (see ``scenarios.py`` for the distribution)."""
    u = d.as_tuple(u)
    workload = d.categorical(u[d.WORKLOAD], params.workload_probs)
    gpu_type = d.categorical(u[d.GPU_TYPE], params.gpu_type_probs)
    kind = d.categorical(u[d.SCENARIO], params.scenario_probs)
    w = params.workloads
    table_shape = params.fastest_epoch_s.shape
    gpu_probs = w.requested_gpu_probs
    gpu_cdf = jnp.cumsum(gpu_probs / jnp.sum(gpu_probs, axis=1, keepdims=True), axis=1)
    row = gather_row(
        {
            "constants": job_constants_table(params),
            "epochs_min": jnp.broadcast_to(w.epochs_min[:, None], table_shape),
            "epochs_max": jnp.broadcast_to(w.epochs_max[:, None], table_shape),
            "gpu_cdf": jnp.broadcast_to(gpu_cdf[:, None, :], (*table_shape, gpu_cdf.shape[1])),
            "fastest_epoch": params.fastest_epoch_s,
            "cheapest_epoch": params.cheapest_epoch_usd,
        },
        workload * table_shape[1] + gpu_type,
    )
    constants = row["constants"]
    epochs = d.uniform_int(u[d.EPOCHS], row["epochs_min"], row["epochs_max"])
    req_gpus, req_cpus = requested_allocation(
        u[d.REQUESTED_GPUS], u[d.REQUESTED_CPUS], row["gpu_cdf"], constants.data_parallel, params
    )
    ref = epoch_metrics(constants, req_gpus, req_cpus, params)
    epochs_f = epochs.astype(jnp.float32)
    time_ref = epochs_f * ref.epoch_time_s
    cost_ref = time_ref * ref.price_per_hour / 3600.0

    low = take_small(params.sla_factor_low, kind)
    high = take_small(params.sla_factor_high, kind)
    f = [lo + (hi - lo) * u[i] for lo, hi, i in zip(low, high, d.SLA_FACTORS, strict=True)]
    margin = params.feasibility_margin
    fastest_throughput = constants.samples_per_epoch / row["fastest_epoch"]
    targets = SlaTargets(
        deadline_s=jnp.maximum(f[0] * time_ref, margin * epochs_f * row["fastest_epoch"]),
        budget_usd=jnp.maximum(f[1] * cost_ref, margin * epochs_f * row["cheapest_epoch"]),
        min_throughput=jnp.minimum(f[2] * ref.throughput, fastest_throughput / margin),
        max_memory_gib=f[3] * ref.memory_used_gib,
        min_gpu_util=f[4],
        min_cpu_util=f[5],
    )
    return JobSpec(
        workload=workload,
        gpu_type=gpu_type,
        scenario=kind,
        epochs=epochs,
        constants=constants,
        requested_gpus=req_gpus,
        requested_cpus=req_cpus,
        preference=sample_preference(u, kind, params),
        sla_targets=targets,
        time_ref_s=time_ref,
        cost_ref_usd=cost_ref,
        throughput_ref=ref.throughput,
    )


def initial_allocation(
    u: jax.Array | tuple[jax.Array, ...], job: JobSpec, params: EnvParams
) -> tuple[jax.Array, jax.Array]:
    """Allocation at the first epoch by ``params.init_strategy`` (``params.INIT_STRATEGIES``).

    ``cold`` = the minimum (1 GPU, ``cpu_step`` CPUs), the cold start; ``requested`` = the user's
    request; ``random`` = uniform over GPUs and CPU steps; ``max`` = the largest allocation.
    """
    u = d.as_tuple(u)
    g_max = max_gpus(params)
    one = jnp.ones((), jnp.int32)
    random_gpus = d.uniform_int(u[d.INIT_GPUS], one, g_max)
    random_levels = cpu_cap(random_gpus, params.gpus_per_node, params.cpus_per_node, params.cpu_step)
    random_cpus = params.cpu_step * d.uniform_int(
        u[d.INIT_CPUS], one, floor_div(random_levels, params.cpu_step)
    )
    big = jnp.int32(1 << 20)
    strategy = params.init_strategy
    assert len(INIT_STRATEGIES) == 4
    gpus = jnp.select(
        [strategy == 0, strategy == 1, strategy == 2], [one, job.requested_gpus, random_gpus], g_max
    )
    cpus = jnp.select(
        [strategy == 0, strategy == 1, strategy == 2],
        [params.cpu_step, job.requested_cpus, random_cpus],
        big,
    )
    return clip_allocation(gpus, cpus, g_max, params.gpus_per_node, params.cpus_per_node, params.cpu_step)
