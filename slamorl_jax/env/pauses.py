"""The pause a running job pays to move between allocations (one rule for the env, its forecasts,
probes and the oracles' plans).

A GPU change, or relocating the job to fresh nodes, checkpoints and restarts the job
(``reallocation_pause_s``, 30 s: the constant of Pollux's simulator, ``rescale_time = 30``, not a
measurement); a CPU-only change restarts the data loaders (``cpu_reallocation_pause_s``, 5 s, our
assumption); staying costs nothing. Both pauses are billed at the price of the allocation moved
to.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env.params import EnvParams


def move_pause_s(
    from_gpus: jax.Array,
    from_cpus: jax.Array,
    to_gpus: jax.Array,
    to_cpus: jax.Array,
    params: EnvParams,
    relocate: jax.Array | bool = False,
) -> jax.Array:
    """Seconds of pause for moving from ``(from_gpus, from_cpus)`` to ``(to_gpus, to_cpus)``
    (broadcasts; 0 when they are equal), or for relocating (``relocate``: a checkpoint-restart on
    fresh nodes, ``action_sets.py``, whatever the allocation)."""
    return jnp.where(
        jnp.logical_or(to_gpus != from_gpus, relocate),
        params.reallocation_pause_s,
        jnp.where(to_cpus != from_cpus, params.cpu_reallocation_pause_s, 0.0),
    ).astype(jnp.float32)
