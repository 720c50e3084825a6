"""Calibrated throughput model of a data-parallel training job: the one source of these formulas.

Every function here is a pure function of arrays (NumPy or JAX inputs both work, via ``jnp``), so the
same code serves the jitted environment and the calibration fits in :mod:`slamorl_jax.calibration`.

Model (Pollux, Qiao et al. OSDI'21, §3.2, fitted on their measured T4 step times):

* compute time of one optimiser step on one GPU with local batch ``m``:
  ``T_comp = alpha_c + beta_c * m``;
* gradient synchronisation with ``k`` replicas on ``n`` nodes: 0 for ``k = 1``;
  ``alpha_l + beta_l * (k - 2)`` inside one node; ``alpha_n + beta_n * (k - 2)`` when the replicas
  span several nodes (the node-boundary cliff), times ``f_2`` on exactly two nodes (our addition to
  Pollux's form: the measured two-node all-reduce is about twice as slow as on three or four nodes);
* overlap of the two: ``T_step = (T_comp**gamma + T_sync**gamma) ** (1 / gamma)`` with ``gamma >= 1``.

Hardware enters as scale factors: a GPU type divides ``T_comp`` by its speed relative to the workload's
calibration GPU, and the intra-node (PCIe / NVLink) and inter-node (network) bandwidths divide the
matching sync terms by their ratio to the calibration cluster's bandwidths (all-reduce time is
bandwidth bound).

CPU effect (Synergy, Mohan et al. OSDI'22): with ``x`` CPUs per GPU, the data pipeline delivers the
fraction ``phi(x) = (1 + (c_sat / x) ** p) ** (-1 / p)`` of the GPU-bound rate (``phi -> 1`` when CPUs
are plentiful, ``c_sat = 0`` means CPU-insensitive). Synergy's published profile, normalised to 1 at
3 CPUs per GPU, is ``phi(x) / phi(3)`` (:func:`synergy_normalized_throughput`).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.typing import ArrayLike

# Synergy normalises its profiles to the GPU-proportional share of its servers: 3 CPUs per GPU.
SYNERGY_REFERENCE_CPUS_PER_GPU = 3.0


def positive_power(base: ArrayLike, exponent: ArrayLike) -> jnp.ndarray:
    """``base ** exponent`` for ``base >= 0`` and ``exponent > 0`` as ``exp(exponent * log(base))``.

    Same value as ``**`` (0 for a zero base), but XLA on CPU vectorises exp and log and not pow,
    which makes this several times faster inside the vectorised environment.
    """
    return jnp.exp(jnp.asarray(exponent) * jnp.log(jnp.asarray(base)))


def compute_time(alpha_c: ArrayLike, beta_c: ArrayLike, local_batch: ArrayLike) -> jnp.ndarray:
    """Seconds of forward + backward for one step of ``local_batch`` samples on one GPU."""
    return jnp.asarray(alpha_c) + jnp.asarray(beta_c) * jnp.asarray(local_batch)


def sync_time(
    num_gpus: ArrayLike,
    num_nodes: ArrayLike,
    alpha_local: ArrayLike,
    beta_local: ArrayLike,
    alpha_node: ArrayLike,
    beta_node: ArrayLike,
    local_scale: ArrayLike = 1.0,
    node_scale: ArrayLike = 1.0,
    two_node_factor: ArrayLike = 1.0,
) -> jnp.ndarray:
    """Seconds of gradient all-reduce per step for ``num_gpus`` replicas on ``num_nodes`` nodes.

    ``local_scale`` and ``node_scale`` multiply the intra-node and inter-node terms (bandwidth ratios,
    network congestion). ``two_node_factor`` multiplies the inter-node term of jobs on exactly two
    nodes: Pollux's measurements show every two-node placement syncing far slower than three- or
    four-node ones (bert, 8 GPUs: 1.66 s on 4+4, 0.79 s on 2+2+2+2, 0.87 s on 12 GPUs as 4+4+4).
    """
    k = jnp.asarray(num_gpus)
    n = jnp.asarray(num_nodes)
    extra = jnp.maximum(k - 2.0, 0.0)
    local = (jnp.asarray(alpha_local) + jnp.asarray(beta_local) * extra) * local_scale
    two_nodes = jnp.where(n == 2, jnp.asarray(two_node_factor), 1.0)
    node = (jnp.asarray(alpha_node) + jnp.asarray(beta_node) * extra) * two_nodes * node_scale
    multi_node = n > 1
    sync = jnp.where(multi_node, node, local)
    return jnp.where(k > 1, jnp.maximum(sync, 0.0), 0.0)


def step_time(t_comp: ArrayLike, t_sync: ArrayLike, gamma: ArrayLike) -> jnp.ndarray:
    """Seconds per optimiser step when compute and sync overlap with exponent ``gamma >= 1``."""
    t_comp = jnp.asarray(t_comp)
    t_sync = jnp.asarray(t_sync)
    gamma = jnp.asarray(gamma)
    # Factor out the larger term so the powers never overflow and t_sync == 0 stays exact.
    big = jnp.maximum(t_comp, t_sync)
    small = jnp.minimum(t_comp, t_sync)
    ratio = small / jnp.maximum(big, 1e-30)
    return big * positive_power(1.0 + positive_power(ratio, gamma), 1.0 / gamma)


def cpu_supply_fraction(cpus_per_gpu: ArrayLike, c_sat: ArrayLike, p: ArrayLike) -> jnp.ndarray:
    """Fraction ``phi`` of the GPU-bound rate that ``cpus_per_gpu`` data-loading CPUs sustain:
    ``(1 + (c_sat / x) ** p) ** (-1 / p)``, computed as ``exp(-softplus(p log(c_sat / x)) / p)`` so that
    no power overflows float32 (``(c_sat / x) ** p`` does for large ``p`` or ``c_sat``, and ``phi``
    then came out 0 where it is about ``x / c_sat``)."""
    x = jnp.maximum(jnp.asarray(cpus_per_gpu), 1e-6)
    p = jnp.asarray(p)
    return jnp.exp(-jnp.logaddexp(0.0, p * jnp.log(jnp.asarray(c_sat) / x)) / p)


def synergy_normalized_throughput(cpus_per_gpu: ArrayLike, c_sat: ArrayLike, p: ArrayLike) -> jnp.ndarray:
    """Synergy's profile form: throughput relative to 3 CPUs per GPU, ``phi(x) / phi(3)``."""
    return cpu_supply_fraction(cpus_per_gpu, c_sat, p) / cpu_supply_fraction(
        SYNERGY_REFERENCE_CPUS_PER_GPU, c_sat, p
    )


def samples_per_second(num_gpus: ArrayLike, local_batch: ArrayLike, t_step: ArrayLike) -> jnp.ndarray:
    """Training throughput of ``num_gpus`` data-parallel replicas taking ``t_step`` seconds a step."""
    return jnp.asarray(num_gpus) * jnp.asarray(local_batch) / jnp.asarray(t_step)


def nodes_spanned(num_gpus: ArrayLike, gpus_per_node: ArrayLike) -> jnp.ndarray:
    """Nodes a job of ``num_gpus`` GPUs occupies when packed onto nodes of ``gpus_per_node`` GPUs."""
    g = jnp.asarray(num_gpus)
    n = jnp.asarray(gpus_per_node)
    # ceil of the quotient (not floor_divide, which XLA on CPU runs as a slow scalar loop); the
    # small offset keeps exact multiples from rounding up.
    return jnp.ceil(g / n - 1e-4)
