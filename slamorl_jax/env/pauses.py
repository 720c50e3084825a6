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
    return change_pause_s(jnp.logical_or(to_gpus != from_gpus, relocate), to_cpus != from_cpus, params)


def change_pause_s(restarts: jax.Array | bool, cpus_change: jax.Array | bool, params: EnvParams) -> jax.Array:
    """Seconds of pause for a change that checkpoints and restarts the job (``restarts``: a GPU
    change or a relocation), else for one of the CPUs alone (``cpus_change``), else 0 (broadcasts)."""
    return jnp.where(
        restarts,
        params.reallocation_pause_s,
        jnp.where(cpus_change, params.cpu_reallocation_pause_s, 0.0),
    ).astype(jnp.float32)
