"""Bounded least squares on log throughput, shared by the Pollux and Gavel fits.

The residual of a row is ``log(model samples/s) - log(measured samples/s)``, so every row weighs by
its relative error whatever its scale. Residuals are evaluated by the jitted JAX model in float64;
the Jacobian is a 3-point finite difference, because ``throughput.step_time`` computes powers as
``exp(y * log(x))``, whose derivative is NaN at ``t_sync = 0`` (every 1-GPU row), while its value
is exact there. SciPy is imported inside :func:`fit_log_throughput` only, so importing this module
stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.calibration.model import samples_per_s_jax

#: Bounds on ``gamma`` (Pollux: overlap exponent between 1 = no overlap and 10 = almost max()).
GAMMA_BOUNDS = (1.0, 10.0)
#: Bounds on the two-node multiplier of the inter-node sync term.
TWO_NODE_FACTOR_BOUNDS = (1.0, 20.0)
NUM_PARAMS = 8


@dataclass(frozen=True)
class LogFit:
    """Result of :func:`fit_log_throughput`."""

    theta: np.ndarray  # full 8-vector in PARAM_NAMES order
    cost: float  # 0.5 * sum of squared log residuals
    gamma_start: float  # the starting gamma of the best run


def _residual_fn(free: np.ndarray, fixed_theta: np.ndarray):
    """Jitted residual over the free entries of the parameter vector."""
    free_idx = jnp.asarray(np.flatnonzero(free))
    base = jnp.asarray(fixed_theta)

    def residual(x, k, n, m, log_meas):
        theta = base.at[free_idx].set(x)
        return jnp.log(samples_per_s_jax(theta, k, n, m)) - log_meas

    return jax.jit(residual)


def fit_log_throughput(
    num_gpus: np.ndarray,
    num_nodes: np.ndarray,
    local_batch: np.ndarray,
    samples_per_s: np.ndarray,
    theta0: np.ndarray,
    free: Sequence[bool],
    gamma_starts: Sequence[float] = (1.0, 1.5, 2.0, 3.0, 5.0),
) -> LogFit:
    """Fit the free entries of ``theta`` (8-vector) by bounded least squares on log throughput.

    All parameters are bounded below by 0 and ``gamma`` lies in :data:`GAMMA_BOUNDS`. When gamma is
    free the fit restarts from every value in ``gamma_starts`` and keeps the lowest cost (ties: the
    first), which makes the result deterministic.
    """
    from scipy.optimize import least_squares  # the fits need SciPy; the tests do not

    free_mask = np.asarray(free, dtype=bool)
    theta0 = np.asarray(theta0, dtype=np.float64)
    starts = list(gamma_starts) if free_mask[6] else [float(theta0[6])]
    lower = np.zeros(NUM_PARAMS)
    upper = np.full(NUM_PARAMS, np.inf)
    lower[6], upper[6] = GAMMA_BOUNDS
    lower[7], upper[7] = TWO_NODE_FACTOR_BOUNDS
    best: LogFit | None = None
    with jax.enable_x64(True):
        k = jnp.asarray(num_gpus, dtype=jnp.float64)
        n = jnp.asarray(num_nodes, dtype=jnp.float64)
        m = jnp.asarray(local_batch, dtype=jnp.float64)
        log_meas = jnp.log(jnp.asarray(samples_per_s, dtype=jnp.float64))
        for g0 in starts:
            start = theta0.copy()
            start[6] = g0
            fun = _residual_fn(free_mask, start)
            lo, hi = lower[free_mask], upper[free_mask]
            x0 = np.clip(start[free_mask], lo + 1e-12, np.where(np.isfinite(hi), hi - 1e-12, np.inf))
            res = least_squares(
                lambda x, fun=fun: np.asarray(fun(jnp.asarray(x), k, n, m, log_meas)),
                x0,
                jac="3-point",
                bounds=(lo, hi),
                method="trf",
                x_scale="jac",
                xtol=1e-12,
                ftol=1e-12,
                gtol=1e-12,
                max_nfev=2000,
            )
            theta = start.copy()
            theta[free_mask] = res.x
            # Parameters pinned at their lower bound come back as ~1e-30 round-off: make them 0.
            theta[:6] = np.where(theta[:6] < 1e-12, 0.0, theta[:6])
            cost = float(res.cost)
            if best is None or cost < best.cost - 1e-12:
                best = LogFit(theta=theta, cost=cost, gamma_start=float(g0))
    assert best is not None
    return best
