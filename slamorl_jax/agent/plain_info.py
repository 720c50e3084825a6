"""The ``info`` an env without jobs gives the trainer: what the rollout reads, with neutral figures.

The trainer reads job figures from every step's ``info`` (its shaping potential's projections and
references, the episode sums it logs). An env that has no jobs (the training benchmark's CartPole,
the tests' counting env) gives them through :func:`plain_info`: zero projections and episode
figures, references of 1, so its shaping potential is zero and its logged job figures are zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def plain_info(final_observation: jax.Array, weights: jax.Array) -> dict[str, jax.Array]:
    """A step's ``info`` for the trainer: ``final_observation`` (the observation before any
    auto-reset, which a truncated step bootstraps from), ``weights`` as the objective weights and the
    preference, and neutral job figures."""
    zero = jnp.zeros((), jnp.float32)
    one = jnp.ones((), jnp.float32)
    return {
        "weights": weights,
        "final_weights": weights,
        "final_observation": final_observation,
        "preference": weights,
        "projected_remaining_time_s": zero,
        "projected_remaining_cost_usd": zero,
        "time_ref_s": one,
        "cost_ref_usd": one,
        "episode_time_s": zero,
        "episode_cost_usd": zero,
        "deadline_met": jnp.zeros((), bool),
        "budget_met": jnp.zeros((), bool),
        "all_slas_met": jnp.zeros((), bool),
        "sla_compliance": zero,
        "reallocations": jnp.zeros((), jnp.int32),
    }
