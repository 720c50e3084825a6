"""One training job on one allocation: epoch time, throughput, utilisation, memory and price.

``job_constants_table`` turns the calibrated workload table and the cluster's hardware facts into the
constants of every (workload, GPU type) job (compute time on that GPU type, sync terms on this
cluster's links); ``epoch_metrics`` evaluates an allocation for such constants. Both are elementwise and
broadcast, so the same code evaluates one job, a batch of jobs, or a whole lattice of allocations.

* Replicas: a data-parallel job uses all its GPUs; a job that is not data-parallel (A3C, CycleGAN,
  Recommendation in Gavel's data) uses one, and pays for the others while they idle.
* GPU utilisation = busy compute time / wall time of a step (sync and CPU starvation idle the GPU),
  averaged over the allocated GPUs.
* CPU utilisation: each replica keeps one CPU busy plus ``c_sat`` data-loading CPUs at full GPU speed
  (Synergy's saturation point), scaled by how busy the GPU is.
* Memory: allocated = GPUs x host memory per GPU + vCPUs x memory per vCPU (billed); used = the GPU
  processes' host memory + busy data-loading workers' memory.
* Price per hour = GPUs x $/GPU-h + vCPUs x $/vCPU-h + allocated GiB x $/GiB-h.
* Compute share = ``(T_comp / T_step) ** gamma``: how much of a change in compute time reaches the
  step time (``d log T_step / d log T_comp``); sync share = ``(T_sync / T_step) ** gamma``, the rest
  (they sum to 1). The hidden truth and the online model use them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from slamorl_jax.env import throughput as tp
from slamorl_jax.env.params import EnvParams


@struct.dataclass
class JobConstants:
    """Physical constants of one job (or a broadcastable batch of jobs) on this cluster."""

    samples_per_epoch: jax.Array
    local_batch: jax.Array
    data_parallel: jax.Array
    compute_s: jax.Array  # seconds per step on the job's GPU type, uncontended
    sync_local_alpha_s: jax.Array  # sync terms scaled to this cluster's links
    sync_local_beta_s: jax.Array
    sync_node_alpha_s: jax.Array
    sync_node_beta_s: jax.Array
    sync_two_node_factor: jax.Array
    gamma: jax.Array
    cpu_c_sat: jax.Array
    cpu_p: jax.Array
    cpu_supply_at_calibration: jax.Array  # phi at the calibration run's CPUs per GPU
    gpu_price_per_hour: jax.Array


@struct.dataclass
class EpochMetrics:
    """What one epoch of a job on an allocation measures (noise-free unless noise was applied)."""

    epoch_time_s: jax.Array
    throughput: jax.Array  # samples per second
    gpu_util: jax.Array  # [0, 1]
    cpu_util: jax.Array  # [0, 1]
    memory_used_gib: jax.Array
    memory_alloc_gib: jax.Array
    price_per_hour: jax.Array
    compute_share: jax.Array  # d log(epoch time) / d log(compute time)
    sync_share: jax.Array  # d log(epoch time) / d log(sync time) = 1 - compute_share


def job_constants_table(params: EnvParams) -> JobConstants:
    """Constants of every (workload, GPU type) pair on the cluster in ``params``, fields (W, T)."""
    w = params.workloads
    num_types = w.compute_speed.shape[1]

    def per_workload(x: jax.Array) -> jax.Array:
        return jnp.broadcast_to(x[:, None], (x.shape[0], num_types))

    local_scale = w.calibration_intra_node_gbps / params.intra_node_gbps
    node_scale = w.calibration_inter_node_gbps / params.inter_node_gbps
    compute = tp.compute_time(w.compute_alpha_s, w.compute_beta_s, w.local_batch)
    supply_at_calibration = tp.cpu_supply_fraction(w.calibration_cpus_per_gpu, w.cpu_c_sat, w.cpu_p)
    return JobConstants(
        samples_per_epoch=per_workload(w.samples_per_epoch),
        local_batch=per_workload(w.local_batch),
        data_parallel=per_workload(w.data_parallel),
        compute_s=compute[:, None] / w.compute_speed,
        sync_local_alpha_s=per_workload(w.sync_local_alpha_s * local_scale),
        sync_local_beta_s=per_workload(w.sync_local_beta_s * local_scale),
        sync_node_alpha_s=per_workload(w.sync_node_alpha_s * node_scale),
        sync_node_beta_s=per_workload(w.sync_node_beta_s * node_scale),
        sync_two_node_factor=per_workload(w.sync_two_node_factor),
        gamma=per_workload(w.gamma),
        cpu_c_sat=per_workload(w.cpu_c_sat),
        cpu_p=per_workload(w.cpu_p),
        cpu_supply_at_calibration=per_workload(supply_at_calibration),
        gpu_price_per_hour=jnp.broadcast_to(params.gpu_price_per_hour[None, :], w.compute_speed.shape),
    )


def epoch_metrics(
    job: JobConstants,
    gpus: jax.Array,
    cpus: jax.Array,
    params: EnvParams,
    contended: jax.Array | bool = False,
) -> EpochMetrics:
    """Noise-free metrics of one epoch of ``job`` on ``gpus`` GPUs and ``cpus`` vCPUs."""
    gpus_f = jnp.asarray(gpus).astype(jnp.float32)
    cpus_f = jnp.asarray(cpus).astype(jnp.float32)
    contended_f = jnp.asarray(contended).astype(jnp.float32)
    replicas = jnp.where(job.data_parallel, gpus_f, 1.0)
    nodes = tp.nodes_spanned(replicas, params.gpus_per_node.astype(jnp.float32))
    t_comp = job.compute_s * (1.0 + contended_f * params.contention_compute_slowdown)
    t_sync = tp.sync_time(
        replicas,
        nodes,
        job.sync_local_alpha_s,
        job.sync_local_beta_s,
        job.sync_node_alpha_s,
        job.sync_node_beta_s,
        node_scale=1.0 + contended_f * params.contention_network_slowdown,
        two_node_factor=job.sync_two_node_factor,
    )
    t_step = tp.step_time(t_comp, t_sync, job.gamma)
    compute_share = tp.positive_power(t_comp / t_step, job.gamma)
    # Computed on its own, not as 1 - compute_share, which float32 rounds away when sync is small.
    sync_share = tp.positive_power(t_sync / t_step, job.gamma)
    cpu_scale = (
        tp.cpu_supply_fraction(cpus_f / replicas, job.cpu_c_sat, job.cpu_p) / job.cpu_supply_at_calibration
    )
    samples_per_s = tp.samples_per_second(replicas, job.local_batch, t_step) * cpu_scale
    busy = t_comp / t_step * jnp.minimum(cpu_scale, 1.0)
    gpu_util = jnp.clip(busy * replicas / gpus_f, 0.0, 1.0)
    cpu_demand = replicas * (1.0 + job.cpu_c_sat * busy)
    cpu_util = jnp.clip(cpu_demand / cpus_f, 0.0, 1.0)
    process_memory = gpus_f * params.host_memory_gib_per_gpu
    memory_alloc = allocated_memory_gib(gpus_f, cpus_f, params)
    memory_used = process_memory + cpu_util * cpus_f * params.worker_memory_gib_per_busy_cpu
    price = allocation_price_per_hour(job.gpu_price_per_hour, gpus_f, cpus_f, params)
    return EpochMetrics(
        epoch_time_s=job.samples_per_epoch / samples_per_s,
        throughput=samples_per_s,
        gpu_util=gpu_util,
        cpu_util=cpu_util,
        memory_used_gib=memory_used,
        memory_alloc_gib=memory_alloc,
        price_per_hour=price,
        compute_share=compute_share,
        sync_share=sync_share,
    )


#: Seconds in the hour that prices are quoted per.
SECONDS_PER_HOUR = 3600.0


def billed_usd(seconds: jax.Array | float, price_per_hour: jax.Array | float) -> jax.Array | float:
    """Dollars billed for ``seconds`` at ``price_per_hour`` (numbers or arrays that broadcast): the
    one formula for every cost the env, its forecasts, the oracles and the live checks count."""
    return seconds * price_per_hour / SECONDS_PER_HOUR


def allocated_memory_gib(gpus: jax.Array, cpus: jax.Array, params: EnvParams) -> jax.Array:
    """Host memory an allocation holds: per GPU process plus per vCPU (float counts)."""
    return gpus * params.host_memory_gib_per_gpu + cpus * params.memory_gib_per_vcpu


def allocation_price_per_hour(
    gpu_price_per_hour: jax.Array, gpus: jax.Array, cpus: jax.Array, params: EnvParams
) -> jax.Array:
    """Dollars per hour of an allocation (float counts): its GPUs, vCPUs and their host memory.
    It depends on the allocation and the GPU type only, never on the job's speed."""
    return (
        gpus * gpu_price_per_hour
        + cpus * params.vcpu_price_per_hour
        + allocated_memory_gib(gpus, cpus, params) * params.gib_price_per_hour
    )


def gpu_price_of(price_per_hour: jax.Array, gpus: jax.Array, cpus: jax.Array, params: EnvParams) -> jax.Array:
    """The GPU price per hour under which an allocation of ``gpus`` and ``cpus`` costs
    ``price_per_hour`` (:func:`allocation_price_per_hour` solved for it; 0 where the vCPUs and host
    memory alone cost more). A job's measured price carries a price rise (``shifts.py`` raises the GPU
    price) into the forecasts of every other allocation."""
    rest = allocation_price_per_hour(jnp.zeros_like(price_per_hour), gpus, cpus, params)
    return jnp.maximum(price_per_hour - rest, 0.0) / jnp.maximum(gpus, 1).astype(jnp.float32)
