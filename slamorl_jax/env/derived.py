"""Tables derived from ``EnvParams`` and cached in it, so a vectorised step need not compute them.

* ``fastest_epoch_s``, ``cheapest_epoch_usd``: the profile's fastest and cheapest static epoch per
  (workload, GPU type), over the search lattice (the job generator's deadline and budget floors);
* ``target_allocation``: the clipped allocation of every absolute target (``action_sets.py``);
* ``target_profile``: the profile's metrics at every target per (workload, GPU type), field-major
  (``TARGET_PROFILE_ROWS`` x targets), read by the forecast block of the observation;
* ``job_rows``: ``job_generator.job_table`` packed into one matrix, one row per combination of a
  job's discrete draws, read by every reset.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.action_sets import target_allocations
from slamorl_jax.env.job_generator import job_table
from slamorl_jax.env.job_model import job_constants_table
from slamorl_jax.env.lookup import pack_table
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.static_allocations import fastest_and_cheapest_epoch, lattice_metrics

DERIVED_FIELDS = (
    "fastest_epoch_s",
    "cheapest_epoch_usd",
    "target_allocation",
    "target_profile",
    "job_rows",
)
TARGET_PROFILE_ROWS = (
    "epoch_time_s",
    "compute_share",
    "sync_share",
    "price_per_hour",
    "memory_used_gib",
    "gpu_util",
    "cpu_util",
)
TARGET_PROFILE_FIELDS = len(TARGET_PROFILE_ROWS)


def target_profile_table(params: EnvParams) -> jax.Array:
    """The profile's metrics of every (workload, GPU type) at every target, ``[W * T, 6 * K]``."""
    gpus, cpus = target_allocations(params)
    m = lattice_metrics(job_constants_table(params), gpus, cpus, params)
    packed = jnp.stack([getattr(m, name) for name in TARGET_PROFILE_ROWS], axis=-2)
    return packed.reshape(packed.shape[0] * packed.shape[1], -1)


@jax.jit
def with_derived_tables(params: EnvParams) -> EnvParams:
    """``params`` with every derived table recomputed (jittable, vmappable).

    Call it after changing any workload, cluster, price or target field with ``params.replace``.
    Jitted, so a host call compiles once instead of dispatching every small operation on its own.
    """
    fastest, cheapest = fastest_and_cheapest_epoch(job_constants_table(params), params)
    target_gpus, target_cpus = target_allocations(params)
    params = params.replace(
        fastest_epoch_s=fastest,
        cheapest_epoch_usd=cheapest,
        target_allocation=jnp.stack([target_gpus, target_cpus], axis=-1),
        target_profile=target_profile_table(params),
    )
    return params.replace(job_rows=pack_table(job_table(params)))  # reads the tables above


def non_finite_derived_fields(fresh: EnvParams) -> list[str]:
    """Names of the derived tables of ``fresh`` (computed by :func:`with_derived_tables`) that are not
    finite: its workload fields admit no job (one without compute time, a CPU supply that vanishes)."""
    return [name for name in DERIVED_FIELDS if not np.isfinite(np.asarray(getattr(fresh, name))).all()]


def stale_derived_fields(params: EnvParams, rtol: float = 1e-3, fresh: EnvParams | None = None) -> list[str]:
    """Names of the derived tables in concrete ``params`` that disagree with a recomputation (in shape
    or in value; ``fresh``: that recomputation, where the caller has it)."""
    fresh = with_derived_tables(params) if fresh is None else fresh

    def stale(name: str) -> bool:
        given, wanted = np.asarray(getattr(params, name)), np.asarray(getattr(fresh, name))
        return given.shape != wanted.shape or not np.allclose(given, wanted, rtol=rtol)

    return [name for name in DERIVED_FIELDS if stale(name)]
