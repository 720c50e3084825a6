"""Tables derived from ``EnvParams`` and cached in it (see ``EnvParams.fastest_epoch_s``)."""

from __future__ import annotations

import jax
import numpy as np

from slamorl_jax.env.job_model import job_constants_table
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.static_allocations import fastest_and_cheapest_epoch

DERIVED_FIELDS = ("fastest_epoch_s", "cheapest_epoch_usd")


@jax.jit
def with_derived_tables(params: EnvParams) -> EnvParams:
    """``params`` with the fastest/cheapest static epoch tables recomputed (jittable, vmappable).

    Call it after changing any workload, cluster or price field with ``params.replace``. Jitted, so a
    host call compiles once instead of dispatching every small operation on its own.
    """
    fastest, cheapest = fastest_and_cheapest_epoch(job_constants_table(params), params)
    return params.replace(fastest_epoch_s=fastest, cheapest_epoch_usd=cheapest)


def stale_derived_fields(params: EnvParams, rtol: float = 1e-3) -> list[str]:
    """Names of the derived tables in concrete ``params`` that disagree with a recomputation."""
    fresh = with_derived_tables(params)
    return [
        name
        for name in DERIVED_FIELDS
        if not np.allclose(np.asarray(getattr(params, name)), np.asarray(getattr(fresh, name)), rtol=rtol)
    ]
