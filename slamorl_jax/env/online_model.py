"""The job's online model: its workload profile, corrected by the epochs this job has measured.

The agent does not know a job's true constants (``job_truth.py``), only its workload's calibrated
profile. It learns the job's two hidden log deviations ``delta = (compute, sync)`` from its own
epochs: to first order, an epoch on allocation ``a`` takes

    log t_measured(a) = log t_profile(a) + s(a) delta_compute + q(a) delta_sync + noise,

where ``s(a)`` and ``q(a) = 1 - s(a)`` are the profile's compute and sync shares at ``a``
(``EpochMetrics.compute_share``, ``sync_share``; ``s = 1`` for one GPU, falling as sync grows with
more GPUs and nodes). With the prior ``delta ~ N(0, diag(spread^2))``
(the same spreads the truth is drawn with) and Gaussian noise of std ``forecast_noise``, the posterior
mean is Bayesian linear regression on two unknowns. Its sufficient statistics are five sums over the
measured epochs (:data:`MODEL_STATS`), kept in ``EnvState.model_stats``. One allocation identifies
one mix of the two; epochs at allocations with different compute shares separate them. Before any
epoch the posterior mean is 0: the forecast is the profile's.

The corrected forecast of an allocation is ``t_profile(a) x exp(s(a) mu_compute + q(a) mu_sync)``.
``slamorl_jax.live`` folds a real job's reported epochs through :func:`record_epoch` the same way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env.job_truth import MAX_DEVIATION_SD
from slamorl_jax.env.params import EnvParams

MODEL_STATS = ("sum_s2", "sum_s_q", "sum_q2", "sum_s_r", "sum_q_r")  # s, q shares, r log residual
NUM_MODEL_STATS = len(MODEL_STATS)
MIN_SPREAD = 1e-3  # a zero spread means "no deviation": a very tight prior


def empty_stats() -> jax.Array:
    """Statistics of a job that has measured nothing."""
    return jnp.zeros((NUM_MODEL_STATS,), jnp.float32)


def record_epoch(
    stats: jax.Array,
    measured_epoch_s: jax.Array,
    profile_epoch_s: jax.Array,
    compute_share: jax.Array,
    sync_share: jax.Array,
) -> jax.Array:
    """``stats`` plus one measured epoch of ``measured_epoch_s`` where the profile forecast
    ``profile_epoch_s`` with compute and sync shares ``compute_share`` and ``sync_share``."""
    s = compute_share
    q = sync_share
    r = jnp.log(jnp.maximum(measured_epoch_s, 1e-9)) - jnp.log(jnp.maximum(profile_epoch_s, 1e-9))
    return stats + jnp.stack([s * s, s * q, q * q, s * r, q * r], axis=-1).astype(jnp.float32)


def posterior_deviation(stats: jax.Array, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """Posterior mean of the (compute, sync) log deviations given ``stats``, each clipped to the
    range the truth is drawn from (``job_truth.MAX_DEVIATION_SD`` spreads).

    The 2x2 precision ``D + n S`` (prior ``D``, noise precision ``n``, ``S`` the measured sums) is
    solved with its determinant written as ``d1 d2 + n (d1 S22 + d2 S11) + n^2 det(S)``, ``det(S)``
    floored at 0 (it is a Gram determinant), which float32 rounding cannot make zero or negative.
    """
    inv_noise = 1.0 / jnp.square(jnp.maximum(params.forecast_noise, MIN_SPREAD))
    spread_c = jnp.maximum(params.compute_spread, MIN_SPREAD)
    spread_s = jnp.maximum(params.sync_spread, MIN_SPREAD)
    d1 = 1.0 / jnp.square(spread_c)
    d2 = 1.0 / jnp.square(spread_s)
    s11, s12, s22 = stats[..., 0], stats[..., 1], stats[..., 2]
    gram = jnp.maximum(s11 * s22 - s12 * s12, 0.0)
    det = d1 * d2 + inv_noise * (d1 * s22 + d2 * s11) + inv_noise * inv_noise * gram
    b1 = inv_noise * stats[..., 3]
    b2 = inv_noise * stats[..., 4]
    p11 = d1 + inv_noise * s11
    p12 = inv_noise * s12
    p22 = d2 + inv_noise * s22
    limit = MAX_DEVIATION_SD
    mu_compute = jnp.clip((p22 * b1 - p12 * b2) / det, -limit * spread_c, limit * spread_c)
    mu_sync = jnp.clip((p11 * b2 - p12 * b1) / det, -limit * spread_s, limit * spread_s)
    return mu_compute, mu_sync


def corrected_epoch_time(
    profile_epoch_s: jax.Array,
    compute_share: jax.Array,
    sync_share: jax.Array,
    mu_compute: jax.Array,
    mu_sync: jax.Array,
) -> jax.Array:
    """The online model's epoch time at an allocation whose profile forecast is ``profile_epoch_s``."""
    return profile_epoch_s * jnp.exp(compute_share * mu_compute + sync_share * mu_sync)
