"""Dynamic weight adaptation: objective weights that move with SLA-violation severity.

``adapt(w_pref, severities, eta)`` tilts the preference weights multiplicatively towards the objectives
whose SLAs are under pressure:

    pressure = (max(s_time, s_throughput), s_cost, max(s_memory, s_gpu_util, s_cpu_util))
    w_t      = w_pref * exp(eta * pressure) / sum(w_pref * exp(eta * pressure))

Properties (tested): ``w_t`` lies on the simplex; each severity feeds exactly one objective's pressure
through a non-decreasing map, so raising a severity never lowers that objective's weight; ``eta = 0``
returns ``w_pref`` unchanged (the static-weight ablation). The paper gives no formula; this is our
choice, with the grouping of SLAs to objectives stated above.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.typing import ArrayLike


def objective_pressure(severities: ArrayLike) -> jnp.ndarray:
    """Map the six SLA severities (see ``objectives.SLA_NAMES``) to one pressure per objective."""
    s = jnp.asarray(severities)
    return jnp.stack(pressures(*(s[..., i] for i in range(6))), axis=-1)


def pressures(
    s_time: jnp.ndarray,
    s_cost: jnp.ndarray,
    s_throughput: jnp.ndarray,
    s_memory: jnp.ndarray,
    s_gpu_util: jnp.ndarray,
    s_cpu_util: jnp.ndarray,
) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """Pressure on (time, cost, sla) from the six severities, as three arrays."""
    sla = jnp.maximum(jnp.maximum(s_memory, s_gpu_util), s_cpu_util)
    return jnp.maximum(s_time, s_throughput), s_cost, sla


def adapt_columns(
    preference: tuple[jnp.ndarray, ...], severities: tuple[jnp.ndarray, ...], eta: ArrayLike
) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """:func:`adapt` on separate arrays per objective and per SLA (fast under ``vmap``)."""
    eta = jnp.asarray(eta)
    tilt = [eta * p for p in pressures(*severities)]
    # Subtracting the largest tilt among the objectives the user weighs keeps exp() finite for any
    # eta (it cancels in the normalisation); objectives with zero preference stay at zero.
    live = [jnp.where(w > 0, t, -jnp.inf) for w, t in zip(preference, tilt, strict=True)]
    top = jnp.maximum(jnp.maximum(live[0], live[1]), live[2])
    tilted = [
        jnp.where(w > 0, w * jnp.exp(jnp.minimum(t - top, 0.0)), 0.0)
        for w, t in zip(preference, tilt, strict=True)
    ]
    total = tilted[0] + tilted[1] + tilted[2]
    return tilted[0] / total, tilted[1] / total, tilted[2] / total


def adapt(preference: ArrayLike, severities: ArrayLike, eta: ArrayLike) -> jnp.ndarray:
    """Severity-adapted objective weights on the simplex (``eta = 0`` gives ``preference``)."""
    w = jnp.asarray(preference)
    s = jnp.asarray(severities)
    columns = adapt_columns(tuple(w[..., i] for i in range(3)), tuple(s[..., i] for i in range(6)), eta)
    return jnp.stack(columns, axis=-1)
