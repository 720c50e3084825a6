"""The Gymnasium id of the env (single-job entry point and vector entry point)."""

from __future__ import annotations

import gymnasium

ENV_ID = "slamorl_jax/JobAllocation-v0"


def register_with_gymnasium() -> None:
    """Register :data:`ENV_ID` unless it already is (idempotent).

    Gymnasium's passive env checker is off for it, as ``mo_gymnasium.make`` turns it off for every
    multi-objective env: it would warn on every vector reward. Run ``check_env`` yourself instead.
    """
    if ENV_ID in gymnasium.registry:
        return
    gymnasium.register(
        id=ENV_ID,
        entry_point="slamorl_jax.gym.single_env:JobAllocationMOEnv",
        vector_entry_point="slamorl_jax.gym.vector_env:JobAllocationVectorEnv",
        disable_env_checker=True,
    )
