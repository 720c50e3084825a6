"""Hidden truth: each job's true physical constants deviate from its workload's calibrated profile.

A platform knows a job's workload and GPU type, not its exact speed: two jobs of the same model run
at different speeds (another software stack, data layout, placement, a different per-GPU batch).
So every job draws two hidden log deviations at reset, ``z`` unit-variance and clipped at
``+-deviation_limit_sd`` standard deviations (``EnvParams``; 2.5 by default):

* compute: ``T_comp_true = T_comp_profile x exp(compute_spread x z_compute)``;
* sync: every sync term (intra- and inter-node, alpha and beta) ``x exp(sync_spread x z_sync)``.

The spreads (``EnvParams.compute_spread``, ``sync_spread``) are sized from the vendored data
(``docs/calibration.md``, "Per-job deviation from the profile"). The dynamics run on the true
constants; everything the agent sees is built from the profile and the job's own measurements
(``online_model.py``); the hindsight oracles in evaluation use the truth.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env import draws as d
from slamorl_jax.env.job_model import JobConstants
from slamorl_jax.env.params import EnvParams

DEFAULT_DEVIATION_LIMIT_SD = 2.5  # EnvParams.deviation_limit_sd's default


def deviation_draws(u_compute: jax.Array, u_sync: jax.Array, params: EnvParams) -> jax.Array:
    """The ``(2,)`` log deviations (compute, sync) for two uniforms."""
    z = jnp.stack([d.standard_normal_approx(u_compute), d.standard_normal_approx(u_sync)])
    spread = jnp.stack([params.compute_spread, params.sync_spread])
    return spread * jnp.clip(z, -params.deviation_limit_sd, params.deviation_limit_sd)


def true_time_ratio(
    compute_share: jax.Array, sync_share: jax.Array, gamma: jax.Array, deviation: jax.Array
) -> jax.Array:
    """True / profile epoch time (uncontended) at an allocation whose profile compute and sync shares
    are ``s`` and ``q``: exactly ``(s e^(gamma dc) + q e^(gamma ds)) ** (1 / gamma)``, because the step
    time is ``(T_comp^gamma + T_sync^gamma) ** (1 / gamma)`` and ``s = (T_comp / T_step) ** gamma``,
    ``q = (T_sync / T_step) ** gamma``."""
    grow_compute = jnp.exp(gamma * deviation[..., 0])
    grow_sync = jnp.exp(gamma * deviation[..., 1])
    mixed = compute_share * grow_compute + sync_share * grow_sync
    return jnp.exp(jnp.log(mixed) / gamma)


def true_constants(profile: JobConstants, deviation: jax.Array) -> JobConstants:
    """The job's true constants: the profile with its compute and sync terms scaled by ``exp(deviation)``."""
    compute = jnp.exp(deviation[..., 0])
    sync = jnp.exp(deviation[..., 1])
    return profile.replace(
        compute_s=profile.compute_s * compute,
        sync_local_alpha_s=profile.sync_local_alpha_s * sync,
        sync_local_beta_s=profile.sync_local_beta_s * sync,
        sync_node_alpha_s=profile.sync_node_alpha_s * sync,
        sync_node_beta_s=profile.sync_node_beta_s * sync,
    )
