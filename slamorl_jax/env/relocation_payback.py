"""What a relocation right after a slowed epoch is expected to save, against the pause it pays.

Random contention of a job's nodes is a two-state chain per epoch (``job_env.py``): a contended
epoch is followed by another with probability ``1 - end``, and fresh nodes start uncontended, then
are contended with probability ``start`` an epoch. After a contended epoch the chance that each
later epoch is contended is ``rho^k`` higher on the old nodes than on fresh ones, ``k`` epochs on,
with ``rho = 1 - start - end`` (:func:`contention_persistence`), so relocating avoids
``rho + rho^2 + ... + rho^L`` contended epochs on average over the job's ``L`` epochs left (2.33
at the default rates and many epochs left). If the last epoch's slowdown ``exp(x)`` was contention,
each avoided epoch saves ``(exp(x) - 1)`` clean epochs. The expected saving over the pause is that
times the clean epoch over the pause; below 1, relocating away from contention loses time on
average (``python -m benchmarks.epoch_times`` tabulates it per workload). A slowdown that persists
(a slower node, a long contention spell: ``shifts.py``) saves on every epoch left instead, which
this count does not credit: it is the payback of the common case, not of every case.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def contention_persistence(start_prob: jax.Array | float, end_prob: jax.Array | float) -> jax.Array | float:
    """The contention chain's one-epoch autocorrelation ``rho = 1 - start - end``: how much likelier
    a contended epoch is after a contended one than after a clean one."""
    return 1.0 - start_prob - end_prob


def contended_epochs_avoided(rho: jax.Array | float, epochs_left: jax.Array | float = jnp.inf) -> jax.Array:
    """Expected contended epochs a relocation right after a contended epoch avoids within
    ``epochs_left`` epochs: ``sum_{k=1..L} rho^k`` (``rho / (1 - rho)`` for ever; 0 where ``rho <=
    0``, a chain without memory)."""
    rho = jnp.clip(jnp.asarray(rho, jnp.float32), 0.0, 1.0 - 1e-6)
    left = jnp.maximum(jnp.asarray(epochs_left, jnp.float32), 0.0)
    return rho * (1.0 - jnp.power(rho, left)) / (1.0 - rho)


def relocation_payback(
    slowdown_log: jax.Array,
    clean_epoch_over_pause: jax.Array,
    epochs_left: jax.Array,
    rho: jax.Array | float,
) -> jax.Array:
    """Expected time a relocation saves over the pause it pays (module docstring): the last epoch
    ``exp(slowdown_log)`` times slower than forecast (0 where it was not slower), a clean epoch of
    ``clean_epoch_over_pause`` pauses, ``epochs_left`` epochs to run and contention's ``rho``."""
    slowed = jnp.expm1(jnp.maximum(slowdown_log, 0.0))
    return contended_epochs_avoided(rho, epochs_left) * slowed * clean_epoch_over_pause
