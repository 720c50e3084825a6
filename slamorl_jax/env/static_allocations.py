"""Static allocations: the lattice of (GPUs, CPUs) a job could hold for its whole run.

Used by the job generator (deadlines and budgets are kept above what the fastest and cheapest
static allocation achieves, so tight SLAs stay feasible) and by feasibility reports and oracles.
All functions are pure and broadcast over a leading batch of jobs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.actions import clip_allocation, cpu_cap
from slamorl_jax.env.job_model import EpochMetrics, JobConstants, billed_usd, epoch_metrics
from slamorl_jax.env.params import MAX_GPUS, EnvParams, max_gpus

# CPUs per GPU tried when searching for the cheapest static allocation inside the environment
# (a coarse grid keeps the search cheap; the CPU cap of the job's nodes is always tried too).
SEARCH_CPUS_PER_GPU = np.array([1, 2, 3, 4, 6, 8, 12, 16], dtype=np.int32)


def search_lattice(params: EnvParams) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(gpus, cpus, valid) of shape (MAX_GPUS, len(SEARCH_CPUS_PER_GPU) + 1) for in-env searches."""
    g = jnp.arange(1, MAX_GPUS + 1, dtype=jnp.int32)[:, None]
    ratios = jnp.asarray(SEARCH_CPUS_PER_GPU)[None, :]
    cap = cpu_cap(g, params.gpus_per_node, params.cpus_per_node, params.cpu_step)
    cpus = jnp.concatenate([g * ratios, cap], axis=1)
    gpus = jnp.broadcast_to(g, cpus.shape)
    valid = gpus <= max_gpus(params)
    gpus, cpus = clip_allocation(
        gpus, cpus, max_gpus(params), params.gpus_per_node, params.cpus_per_node, params.cpu_step
    )
    return gpus, cpus, valid


def full_lattice(params: EnvParams) -> tuple[np.ndarray, np.ndarray]:
    """Every allocation reachable by actions under concrete ``params``: flat (gpus, cpus) arrays."""
    g_max = int(max_gpus(params))
    step = int(params.cpu_step)
    gpus, cpus = [], []
    for g in range(1, g_max + 1):
        cap = int(cpu_cap(g, int(params.gpus_per_node), int(params.cpus_per_node), step))
        for c in range(step, cap + 1, step):
            gpus.append(g)
            cpus.append(c)
    return np.asarray(gpus, dtype=np.int32), np.asarray(cpus, dtype=np.int32)


def lattice_metrics(
    job: JobConstants,
    gpus: jax.Array,
    cpus: jax.Array,
    params: EnvParams,
    contended: jax.Array | bool = False,
) -> EpochMetrics:
    """Noise-free metrics of every job in ``job`` (leading axes) on every lattice point (trailing),
    uncontended unless ``contended`` (per job)."""
    expand = jax.tree.map(lambda x: jnp.asarray(x)[(...,) + (None,) * gpus.ndim], job)
    contended = jnp.asarray(contended)[(...,) + (None,) * gpus.ndim]
    return epoch_metrics(expand, gpus, cpus, params, contended)


def fastest_and_cheapest_epoch(job: JobConstants, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """Shortest epoch time (s) and lowest epoch cost ($) over the search lattice, per job."""
    gpus, cpus, valid = search_lattice(params)
    m = lattice_metrics(job, gpus, cpus, params)
    lead = m.epoch_time_s.shape[: m.epoch_time_s.ndim - gpus.ndim]
    epoch_time = jnp.where(valid, m.epoch_time_s, jnp.inf).reshape((*lead, -1))
    epoch_cost = jnp.where(valid, billed_usd(m.epoch_time_s, m.price_per_hour), jnp.inf).reshape((*lead, -1))
    return jnp.min(epoch_time, axis=-1), jnp.min(epoch_cost, axis=-1)
