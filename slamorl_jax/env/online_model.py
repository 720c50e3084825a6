"""The job's online model: its workload profile, corrected by the epochs this job has measured.

The agent does not know a job's true constants (``job_truth.py``), only its workload's calibrated
profile. It learns the job's two hidden log deviations ``delta = (compute, sync)`` from its own
epochs: to first order, an epoch on allocation ``a`` takes

    log t_measured(a) = log t_profile(a) + s(a) delta_compute + q(a) delta_sync + noise,

where ``s(a)`` and ``q(a) = 1 - s(a)`` are the profile's compute and sync shares at ``a``
(``EpochMetrics.compute_share``, ``sync_share``; ``s = 1`` for one GPU, falling as sync grows with
more GPUs and nodes). With the prior ``delta ~ N(0, diag(spread^2))``
(the same spreads the truth is drawn with) and Gaussian noise of std ``forecast_noise``, the posterior
mean is Bayesian linear regression on two unknowns. Its sufficient statistics are kept in
square-root information form (:data:`MODEL_STATS`, ``EnvState.model_stats``): the upper-triangular
``R`` with ``R^T R = sum x x^T`` and ``z`` with ``R^T z = sum x r`` over the measured epochs
(``x = (s, q)``, ``r`` the log residual), updated by two Givens rotations per epoch. The raw sums
would do in exact arithmetic, but in float32 the posterior's numerators cancel in them
(``S22 S1r - S12 S2r`` is 0 for epochs at one allocation, and its rounding error swamps the prior
once the noise precision is large); with ``R`` the cancelling terms drop out of the formulas
(``posterior_deviation``). One allocation identifies one mix of the two (``R22 = 0``); epochs at
allocations with different compute shares separate them. Before any epoch the posterior mean is 0:
the forecast is the profile's.

The corrected forecast of an allocation is ``t_profile(a) x exp(s(a) mu_compute + q(a) mu_sync)``.
``slamorl_jax.live`` folds a real job's reported epochs through :func:`record_epoch` the same way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env.params import EnvParams

MODEL_STATS = ("r11", "r12", "r22", "z1", "z2")  # R (upper triangular) and z, see the module docstring
NUM_MODEL_STATS = len(MODEL_STATS)
MIN_SPREAD = 1e-3  # a zero spread means "no deviation": a very tight prior
ROUNDING = 8 * 2.0**-23  # a rotated remainder within 8 float32 ulps of its terms is rounding


def empty_stats() -> jax.Array:
    """Statistics of a job that has measured nothing."""
    return jnp.zeros((NUM_MODEL_STATS,), jnp.float32)


def givens(top: jax.Array, bottom: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The rotation that zeroes ``bottom`` against ``top``: ``(cos, sin, radius)`` with
    ``cos top + sin bottom = radius >= 0`` and ``cos bottom - sin top = 0`` (the identity when both are 0)."""
    radius = jnp.hypot(top, bottom)
    safe = jnp.where(radius > 0, radius, 1.0)
    return jnp.where(radius > 0, top / safe, 1.0), jnp.where(radius > 0, bottom / safe, 0.0), radius


def record_epoch(
    stats: jax.Array,
    measured_epoch_s: jax.Array,
    profile_epoch_s: jax.Array,
    compute_share: jax.Array,
    sync_share: jax.Array,
) -> jax.Array:
    """``stats`` plus one measured epoch of ``measured_epoch_s`` where the profile forecast
    ``profile_epoch_s`` with compute and sync shares ``compute_share`` and ``sync_share``: the row
    ``(s, q | r)`` rotated into ``(R | z)``."""
    s = jnp.asarray(compute_share, jnp.float32)
    q = jnp.asarray(sync_share, jnp.float32)
    r = jnp.log(jnp.maximum(measured_epoch_s, 1e-9)) - jnp.log(jnp.maximum(profile_epoch_s, 1e-9))
    r = jnp.asarray(r, jnp.float32)
    r11, r12, r22, z1, z2 = (stats[..., i] for i in range(NUM_MODEL_STATS))
    cos1, sin1, new_r11 = givens(r11, s)
    # What is left of the row's sync share once its compute share is rotated out; a remainder at the
    # level of float32 rounding is 0 (the row repeats an allocation already measured), else a
    # residual that disagrees with the earlier epochs would be taken for information.
    q_left = cos1 * q - sin1 * r12
    rounding = ROUNDING * (jnp.abs(cos1 * q) + jnp.abs(sin1 * r12))
    q_left = jnp.where(jnp.abs(q_left) <= rounding, 0.0, q_left)
    r_left = cos1 * r - sin1 * z1
    cos2, sin2, new_r22 = givens(r22, q_left)
    return jnp.stack(
        [new_r11, cos1 * r12 + sin1 * q, new_r22, cos1 * z1 + sin1 * r, cos2 * z2 + sin2 * r_left], axis=-1
    ).astype(jnp.float32)


def posterior_deviation(stats: jax.Array, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """Posterior mean of the (compute, sync) log deviations given ``stats``, each clipped to the
    range the truth is drawn from (``params.deviation_limit_sd`` spreads).

    The precision is ``P = D + n R^T R`` (prior ``D = diag(d1, d2)``, noise precision ``n``) and the
    mean solves ``P mu = n R^T z``. By Cramer's rule with ``R``'s entries the terms in ``n^2 R12^2``
    cancel exactly on paper, so they are never formed:
    ``det P = d1 d2 + n (d1 (R12^2 + R22^2) + d2 R11^2) + n^2 R11^2 R22^2`` (every term >= 0),
    ``mu_compute det P = n R11 (d2 z1 + n R22 (R22 z1 - R12 z2))``,
    ``mu_sync det P = n (d1 (R12 z1 + R22 z2) + n R11^2 R22 z2)``.
    """
    n = 1.0 / jnp.square(jnp.maximum(params.forecast_noise, MIN_SPREAD))
    spread_c = jnp.maximum(params.compute_spread, MIN_SPREAD)
    spread_s = jnp.maximum(params.sync_spread, MIN_SPREAD)
    d1 = 1.0 / jnp.square(spread_c)
    d2 = 1.0 / jnp.square(spread_s)
    r11, r12, r22, z1, z2 = (stats[..., i] for i in range(NUM_MODEL_STATS))
    det = d1 * d2 + n * (d1 * (r12 * r12 + r22 * r22) + d2 * r11 * r11) + n * n * jnp.square(r11 * r22)
    compute = n * r11 * (d2 * z1 + n * r22 * (r22 * z1 - r12 * z2))
    sync = n * (d1 * (r12 * z1 + r22 * z2) + n * r11 * r11 * r22 * z2)
    limit = params.deviation_limit_sd
    mu_compute = jnp.clip(compute / det, -limit * spread_c, limit * spread_c)
    mu_sync = jnp.clip(sync / det, -limit * spread_s, limit * spread_s)
    return mu_compute, mu_sync


def posterior_log_time_variance(
    stats: jax.Array, params: EnvParams, compute_share: jax.Array, sync_share: jax.Array
) -> jax.Array:
    """Posterior variance of the log epoch-time correction ``s mu_compute + q mu_sync`` at an
    allocation with shares ``(s, q)``: ``x^T P^-1 x`` with ``x = (s, q)`` and the precision ``P`` of
    :func:`posterior_deviation` (before its clipping), by the same determinant. The prior's
    ``s^2 spread_c^2 + q^2 spread_s^2`` before any epoch; it shrinks as epochs at allocations with
    those shares are measured."""
    n = 1.0 / jnp.square(jnp.maximum(params.forecast_noise, MIN_SPREAD))
    d1 = 1.0 / jnp.square(jnp.maximum(params.compute_spread, MIN_SPREAD))
    d2 = 1.0 / jnp.square(jnp.maximum(params.sync_spread, MIN_SPREAD))
    r11, r12, r22 = (stats[..., i] for i in range(3))
    p11 = d1 + n * r11 * r11
    p12 = n * r11 * r12
    p22 = d2 + n * (r12 * r12 + r22 * r22)
    det = d1 * d2 + n * (d1 * (r12 * r12 + r22 * r22) + d2 * r11 * r11) + n * n * jnp.square(r11 * r22)
    s, q = compute_share, sync_share
    return jnp.maximum(s * s * p22 - 2.0 * s * q * p12 + q * q * p11, 0.0) / det


def corrected_epoch_time(
    profile_epoch_s: jax.Array,
    compute_share: jax.Array,
    sync_share: jax.Array,
    mu_compute: jax.Array,
    mu_sync: jax.Array,
) -> jax.Array:
    """The online model's epoch time at an allocation whose profile forecast is ``profile_epoch_s``."""
    return profile_epoch_s * jnp.exp(compute_share * mu_compute + sync_share * mu_sync)


def epoch_surprise(
    stats: jax.Array,
    measured_epoch_s: jax.Array,
    profile_epoch_s: jax.Array,
    compute_share: jax.Array,
    sync_share: jax.Array,
    params: EnvParams,
) -> jax.Array:
    """``log(measured / forecast)`` of an epoch, the forecast being the model's of ``stats`` (the epochs
    before it) at the epoch's allocation: near 0 while the job runs as measured so far, about
    ``log(slowdown)`` when its nodes slow it (contention, a slower node)."""
    mu_compute, mu_sync = posterior_deviation(stats, params)
    forecast = corrected_epoch_time(profile_epoch_s, compute_share, sync_share, mu_compute, mu_sync)
    return jnp.log(jnp.maximum(measured_epoch_s, 1e-9)) - jnp.log(jnp.maximum(forecast, 1e-9))
