"""Adaptive weights with memory: one Lagrange multiplier per SLA, dual ascent inside an episode.

The objective weights the env gives the policy and the loss come in three forms
(``EnvParams.weights_mode``, an index into :data:`slamorl_jax.env.params.WEIGHT_MODES`):

* ``static``: the user's preference, whatever happens (the same as ``adapt_strength = 0``);
* ``severity`` (default, the paper's form): ``adaptive_weights.adapt(preference, s_t, eta)``, a
  memoryless function of the current severities ``s_t``;
* ``dual``: ``adapt(preference, lambda_t, eta)``, where ``lambda_t`` holds one multiplier per SLA
  (``objectives.SLA_NAMES`` order) carried in ``EnvState.multipliers`` and reset to 0 with each job.

Update rule, applied at every reading (the reset forecast and each epoch), per SLA ``i``::

    lambda_i <- min(lambda_i + dual_step * s_i, dual_max)   if s_i > 0  (violated or projected to be)
    lambda_i <- (1 - dual_decay) * lambda_i                 if s_i = 0  (the SLA holds)

Why this form. Dual ascent on the Lagrangian of "maximise the preferred objectives subject to the six
SLAs" moves each multiplier by its constraint's violation; the severity (``sla.py``: relative overshoot,
forward-looking for time and cost) is that violation, so an SLA that stays at risk keeps gaining weight
instead of only holding it, which is the memory the severity form lacks. A met SLA has severity 0 and
no measured slack, so it cannot push its multiplier down by a violation of the other sign; it decays
geometrically instead, so the tilt fades over about ``1 / dual_decay`` epochs once the SLA is safe
(this stands in for the projection onto ``lambda >= 0`` and keeps the weights from sticking after a
recovery). ``dual_max`` (5 by default) is an anti-windup cap: with ``eta = 1.5`` a pressure of 5 already tilts
the weights by ``e^7.5`` (about 1800x), so larger multipliers would only delay the decay after recovery.
Per SLA rather than per objective: each SLA is its own constraint, and a throughput shortfall keeps
its memory while the deadline holds; the multipliers reach the three objectives through the same
grouping as the severities (``adaptive_weights.pressures``: the largest of the group's).

Defaults (``defaults.py``): ``dual_step = 1`` (the first reading of a violation tilts the weights
exactly as the severity form does: ``lambda = s`` from 0), ``dual_decay = 0.2`` (about five epochs to
forget); ``train --dual_step --dual_decay`` set them. Measured since (docs/adaptation.md): with
the paper's reward, ``dual_step = 3, dual_decay = 0.05`` (a multiplier remembered for about 20
epochs) beat static weights by 5.9 points of all six SLAs met on ``conflict`` on an earlier env (fresh
seeds and jobs; the defaults gained 3.9) and by 2.4 on the env of 1a600d6 (with the relocation gate
of b57bd06, ``dual_step = 6`` gains 3.2, confirmed on fresh seeds and jobs); with our reward the forms
differ by less than the seeds' spread, so the defaults were kept. Properties (tested): the weights lie on the
simplex; a larger severity never lowers the new multiplier, so never lowers its objective's weight;
``eta = 0`` gives the preference.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.typing import ArrayLike

from slamorl_jax.env.adaptive_weights import adapt_columns

# Anti-windup cap on every multiplier (see the module docstring): ``EnvParams.dual_max``'s default.
DEFAULT_DUAL_MAX = 5.0
# Indices into ``params.WEIGHT_MODES``.
STATIC, SEVERITY, DUAL = 0, 1, 2


def update_multipliers(
    multipliers: tuple[jnp.ndarray, ...],
    severities: tuple[jnp.ndarray, ...],
    step: ArrayLike,
    decay: ArrayLike,
    cap: ArrayLike = DEFAULT_DUAL_MAX,
) -> tuple[jnp.ndarray, ...]:
    """One dual-ascent step of the six multipliers from the six severities (module docstring), each
    capped at ``cap`` (``EnvParams.dual_max``)."""
    return tuple(
        jnp.where(s > 0.0, jnp.minimum(lam + step * s, cap), (1.0 - decay) * lam)
        for lam, s in zip(multipliers, severities, strict=True)
    )


def mode_weights(
    mode: ArrayLike,
    preference: tuple[jnp.ndarray, ...],
    severities: tuple[jnp.ndarray, ...],
    multipliers: tuple[jnp.ndarray, ...],
    eta: ArrayLike,
) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """The objective weights of ``mode`` (``STATIC``, ``SEVERITY`` or ``DUAL``) as three arrays."""
    mode = jnp.asarray(mode)
    eta = jnp.where(mode == STATIC, 0.0, jnp.asarray(eta, jnp.float32))
    pressure_of = tuple(
        jnp.where(mode == DUAL, lam, s) for lam, s in zip(multipliers, severities, strict=True)
    )
    return adapt_columns(preference, pressure_of, eta)


def dual_weights(preference: ArrayLike, multipliers: ArrayLike, eta: ArrayLike) -> jnp.ndarray:
    """``dual`` weights on the simplex from a preference (3,) and multipliers (6,) (last axes)."""
    w = jnp.asarray(preference)
    lam = jnp.asarray(multipliers)
    columns = adapt_columns(tuple(w[..., i] for i in range(3)), tuple(lam[..., i] for i in range(6)), eta)
    return jnp.stack(columns, axis=-1)
