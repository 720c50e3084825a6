"""JAX's persistent compilation cache for the package's commands (later runs skip most compilation)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_CACHE_DIR = str(Path.home() / ".cache" / "slamorl_jax" / "jax")


def enable_compilation_cache(directory: str) -> None:
    """Turn on JAX's persistent compilation cache in ``directory`` (no-op for an empty string)."""
    if not directory:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
