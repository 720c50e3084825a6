"""Price presets: ``aws`` (default, from the vendored AWS on-demand list) and ``reference-code``.

``aws``: $/GPU-h by GPU type implied by AWS instance prices, $0.0357 per vCPU-h and $0.00342 per
GiB-h (c5/r5.24xlarge), fitted by ``python -m slamorl_jax.calibration``. ``reference-code``: the SLA-MORL
authors' constants, $10 per GPU-h (any type), $3 per CPU-h and $2 per GB-h.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.catalog import Catalog, load_catalog
from slamorl_jax.env.derived import with_derived_tables
from slamorl_jax.env.params import EnvParams

PRICE_PRESETS = ("aws", "reference-code")


def with_prices(params: EnvParams, preset: str, catalog: Catalog | None = None) -> EnvParams:
    """``params`` billed with the named price preset of ``catalog`` (default: the shipped one; derived
    tables refreshed). ``ValueError`` for params of another catalogue's GPU types (pass theirs)."""
    if preset not in PRICE_PRESETS:
        raise ValueError(f"unknown price preset {preset!r}; choose one of: {', '.join(PRICE_PRESETS)}")
    c = catalog or load_catalog()
    types = np.shape(params.gpu_price_per_hour)[-1:]
    if types != (c.num_gpu_types,):
        raise ValueError(
            f"params price {types[0] if types else 0} GPU types, the catalogue {c.num_gpu_types}: pass the "
            "catalogue the params were built from (with_prices(params, preset, catalog))"
        )
    if preset == "aws":
        gpu, vcpu, gib = c.gpu_price_per_hour, c.vcpu_price_per_hour, c.gib_price_per_hour
    else:
        per_gpu, vcpu, gib = c.reference_code_prices
        gpu = np.full(c.num_gpu_types, per_gpu)
    return with_derived_tables(
        params.replace(
            gpu_price_per_hour=jnp.asarray(np.asarray(gpu, dtype=np.float32)),
            vcpu_price_per_hour=jnp.asarray(np.float32(vcpu)),
            gib_price_per_hour=jnp.asarray(np.float32(gib)),
        )
    )
