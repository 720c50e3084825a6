"""JAX's persistent compilation cache for the package's commands (later runs skip most compilation).

The commands' ``--compilation_cache_dir`` defaults to JAX's own ``JAX_COMPILATION_CACHE_DIR`` when
it is set, else to ``~/.cache/slamorl_jax/jax``; an empty string leaves the cache to JAX's own
settings (off unless that variable is set).
"""

from __future__ import annotations

import os
from pathlib import Path

JAX_CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
DEFAULT_CACHE_DIR = os.environ.get(JAX_CACHE_VARIABLE) or str(Path.home() / ".cache" / "slamorl_jax" / "jax")
#: Programs that compile faster than this are not cached by training and evaluation (JAX's own
#: default): their compiles are dwarfed by the run. ``recommend`` caches every program (0 s): a
#: call is a few dozen small programs, and reading them back takes less than compiling them.
MIN_COMPILE_TIME_S = 1.0


def enable_compilation_cache(directory: str, min_compile_time_s: float = MIN_COMPILE_TIME_S) -> None:
    """Turn on JAX's persistent compilation cache in ``directory`` for programs that take at least
    ``min_compile_time_s`` to compile (no-op for an empty string). Takes effect only before the
    process's first compile: JAX opens its cache once."""
    if not directory:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_time_s)
