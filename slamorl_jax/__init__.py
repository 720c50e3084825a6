"""slamorl_jax: JAX-native SLA-aware multi-objective RL for GPU/CPU allocation of ML training jobs."""

from typing import Any

from slamorl_jax.env import JobAllocationEnv, make

__version__ = "0.1.0"
__all__ = ["JobAllocationEnv", "__version__", "load_policy", "make"]


def __getattr__(name: str) -> Any:
    """``slamorl_jax.load_policy``, imported on first use (it pulls in orbax and the learner)."""
    if name == "load_policy":
        from slamorl_jax.checkpoint import load_policy

        return load_policy
    raise AttributeError(f"module 'slamorl_jax' has no attribute {name!r}")
