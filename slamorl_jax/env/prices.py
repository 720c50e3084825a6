"""Price presets: ``aws`` (default, from the vendored AWS on-demand list) and ``reference-code``.

``aws``: $/GPU-h by GPU type implied by AWS instance prices, $0.0357 per vCPU-h and $0.00342 per
GiB-h (c5/r5.24xlarge), fitted by ``python -m slamorl_jax.calibration``. ``reference-code``: the SLA-MORL
authors' constants, $10 per GPU-h (any type), $3 per CPU-h and $2 per GB-h.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.catalog import Catalog, gpu_type_index, load_catalog
from slamorl_jax.env.derived import with_derived_tables
from slamorl_jax.env.params import EnvParams

PRICE_PRESETS = ("aws", "reference-code")


def with_prices(params: EnvParams, preset: str, catalog: Catalog | None = None) -> EnvParams:
    """``params`` billed with the named price preset of ``catalog`` (default: the shipped one; derived
    tables refreshed). ``ValueError`` for params of another catalogue's GPU types (pass theirs)."""
    c = catalog or load_catalog()
    gpu, vcpu, gib = preset_prices(preset, c)  # ValueError for an unknown preset
    types = np.shape(params.gpu_price_per_hour)[-1:]
    if types != (c.num_gpu_types,):
        raise ValueError(
            f"params price {types[0] if types else 0} GPU types, the catalogue {c.num_gpu_types}: pass the "
            "catalogue the params were built from (with_prices(params, preset, catalog))"
        )
    return with_derived_tables(
        params.replace(
            gpu_price_per_hour=jnp.asarray(np.asarray(gpu, dtype=np.float32)),
            vcpu_price_per_hour=jnp.asarray(np.float32(vcpu)),
            gib_price_per_hour=jnp.asarray(np.float32(gib)),
        )
    )


def preset_prices(preset: str, catalog: Catalog | None = None) -> tuple[np.ndarray, float, float]:
    """The named preset's $/GPU-h per GPU type, $/vCPU-h and $/GiB-h in ``catalog`` (default: the
    shipped one); ``ValueError`` for an unknown preset."""
    if preset not in PRICE_PRESETS:
        raise ValueError(f"unknown price preset {preset!r}; choose one of: {', '.join(PRICE_PRESETS)}")
    c = catalog or load_catalog()
    if preset == "aws":
        return np.asarray(c.gpu_price_per_hour), c.vcpu_price_per_hour, c.gib_price_per_hour
    per_gpu, vcpu, gib = c.reference_code_prices
    return np.full(c.num_gpu_types, per_gpu), vcpu, gib


def price_figures(preset: str, catalog: Catalog, gpu_type: str) -> dict[str, float]:
    """What a job on ``gpu_type`` GPUs pays per hour under ``preset`` in ``catalog``: per GPU, vCPU
    and GiB (``ValueError`` for an unknown preset or GPU type)."""
    gpu, vcpu, gib = preset_prices(preset, catalog)
    return {
        "gpu_price_per_hour": float(gpu[gpu_type_index(gpu_type, catalog)]),
        "vcpu_price_per_hour": float(vcpu),
        "gib_price_per_hour": float(gib),
    }
