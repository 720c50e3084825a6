"""slamorl_jax: JAX-native SLA-aware multi-objective RL for GPU/CPU allocation of ML training jobs.

The package imports nothing heavy itself: ``JobAllocationEnv``, ``make``, ``load_policy`` and
``shipped_policy_path`` (and the subpackages) are imported on first use, so the commands start, and
answer Ctrl-C, before JAX loads.
"""

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["JobAllocationEnv", "__version__", "load_policy", "make", "shipped_policy_path"]

# Public names and the module each is imported from on first use.
_LAZY = {
    "JobAllocationEnv": "slamorl_jax.env",
    "make": "slamorl_jax.env",
    "load_policy": "slamorl_jax.policy_checkpoint",
    "shipped_policy_path": "slamorl_jax.shipped_policy",
}


def __getattr__(name: str) -> Any:
    """``slamorl_jax.make``, ``.JobAllocationEnv``, ``.load_policy``, ``.shipped_policy_path`` and
    submodules, on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module 'slamorl_jax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
