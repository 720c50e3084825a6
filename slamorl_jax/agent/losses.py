"""The PPO loss with SLA-severity-adaptive weights folded into the advantages.

Per step, the vector advantage is scalarised with the weights that were in force when the action
was taken: ``A_t = w_t . A_t^vec`` (``w_t = adapt(w_pref, severities_t, eta)``, from the env). With
``eta = 0`` the weights are the static preference, which is the static-weight ablation. The critic
regresses every objective's return (vector value loss), and an entropy bonus keeps exploring.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class Batch:
    """One (mini)batch of rollout data, leading axis = samples."""

    obs: jax.Array  # [B, F]
    weights: jax.Array  # [B, K] adaptive weights at the observation
    actions: jax.Array  # [B]
    log_probs: jax.Array  # [B] under the behaviour policy
    values: jax.Array  # [B, K] critic output at collection time
    advantages: jax.Array  # [B, K] per-objective GAE
    targets: jax.Array  # [B, K] per-objective value targets


@struct.dataclass
class LossCoefficients:
    """PPO coefficients: floats or arrays. ``ppo_loss`` traces whatever it is given, so a sweep that
    passes them as arrays to one jitted loss compiles once; the trainer builds them from its config's
    floats, so each config's learner is compiled with its own (as with every other setting)."""

    clip_eps: float | jax.Array = 0.2
    value_coef: float | jax.Array = 0.5
    entropy_coef: float | jax.Array = 0.01
    value_clip_eps: float | jax.Array = 0.2  # <= 0 disables value clipping


def scalarise_advantages(advantages: jax.Array, weights: jax.Array, normalise: bool = True) -> jax.Array:
    """``w_t . A_t^vec`` per sample, optionally normalised to zero mean and unit std over the batch."""
    scalar = jnp.sum(advantages * weights, axis=-1)
    if normalise:
        scalar = (scalar - scalar.mean()) / (scalar.std() + 1e-8)
    return scalar


def ppo_loss(
    params: dict,
    apply_fn: Callable[[dict, jax.Array, jax.Array], tuple[jax.Array, jax.Array]],
    batch: Batch,
    coefs: LossCoefficients,
    normalise_advantages: bool = True,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clipped PPO loss on ``batch``; returns ``(loss, metrics)``."""
    logits, values = apply_fn(params, batch.obs, batch.weights)
    log_all = jax.nn.log_softmax(logits)
    log_probs = jnp.take_along_axis(log_all, batch.actions[..., None], axis=-1)[..., 0]
    entropy = -jnp.sum(jnp.exp(log_all) * log_all, axis=-1).mean()

    advantages = scalarise_advantages(batch.advantages, batch.weights, normalise_advantages)
    ratio = jnp.exp(log_probs - batch.log_probs)
    clipped_ratio = jnp.clip(ratio, 1.0 - coefs.clip_eps, 1.0 + coefs.clip_eps)
    policy_loss = -jnp.minimum(ratio * advantages, clipped_ratio * advantages).mean()

    value_error = jnp.square(values - batch.targets)
    clipped_values = batch.values + jnp.clip(
        values - batch.values, -coefs.value_clip_eps, coefs.value_clip_eps
    )
    clipped_error = jnp.square(clipped_values - batch.targets)
    value_error = jnp.where(coefs.value_clip_eps > 0, jnp.maximum(value_error, clipped_error), value_error)
    value_loss = 0.5 * value_error.mean()

    loss = policy_loss + coefs.value_coef * value_loss - coefs.entropy_coef * entropy
    metrics = {
        "loss": loss,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "approx_kl": ((ratio - 1.0) - jnp.log(ratio)).mean(),
        "clip_fraction": (jnp.abs(ratio - 1.0) > coefs.clip_eps).astype(jnp.float32).mean(),
    }
    return loss, metrics
