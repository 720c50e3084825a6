"""slamorl_jax: JAX-native SLA-aware multi-objective RL for GPU/CPU allocation of ML training jobs."""

from slamorl_jax.env import JobAllocationEnv, make

__version__ = "0.1.0"
__all__ = ["JobAllocationEnv", "__version__", "make"]
