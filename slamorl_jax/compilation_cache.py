"""JAX's persistent compilation cache for the package's commands (later runs skip most compilation).

The commands' ``--compilation_cache_dir`` defaults to JAX's own ``JAX_COMPILATION_CACHE_DIR`` when
it is set, else to ``~/.cache/slamorl_jax/jax``; an empty string leaves the cache to JAX's own
settings (off unless that variable is set). A folder given that cannot hold the cache is bad input;
the default folder that cannot (a read-only home) leaves the command without a cache instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from slamorl_jax.cli_args import fail
from slamorl_jax.run_dirs import RunDirError, check_dir

if TYPE_CHECKING:
    import argparse

CACHE_FLAG = "--compilation_cache_dir"
JAX_CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
DEFAULT_CACHE_DIR = os.environ.get(JAX_CACHE_VARIABLE) or str(Path.home() / ".cache" / "slamorl_jax" / "jax")
#: Programs that compile faster than this are not cached by the commands other than ``recommend``
#: (JAX's own default): their compiles are dwarfed by the run. ``recommend`` caches every program (0 s): a
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


def add_cache_argument(parser: argparse.ArgumentParser) -> None:
    """The commands' ``--compilation_cache_dir`` option (argparse; ``train`` defines its absl flag)."""
    parser.add_argument(
        CACHE_FLAG,
        default=DEFAULT_CACHE_DIR,
        help="JAX compilation cache: a later run reads its compiled programs back ('' disables)",
    )


def usable_cache_dir(directory: str) -> str:
    """``directory`` when it can hold the cache; ``""`` (no cache) for ``""`` and for the default
    folder when it cannot; :class:`RunDirError` naming the flag for another folder that cannot."""
    if not directory:
        return ""
    try:
        check_dir(CACHE_FLAG, Path(directory))
    except RunDirError:
        if directory != DEFAULT_CACHE_DIR:
            raise
        return ""
    return directory


def start_cache(directory: str, prog: str, min_compile_time_s: float = MIN_COMPILE_TIME_S) -> None:
    """A command's cache, before its first compile: ``directory`` checked (:func:`usable_cache_dir`;
    one that cannot serve exits 2 naming the flag) and turned on (:func:`enable_compilation_cache`)."""
    try:
        directory = usable_cache_dir(directory)
    except RunDirError as err:
        fail(str(err), prog)
    enable_compilation_cache(directory, min_compile_time_s)
