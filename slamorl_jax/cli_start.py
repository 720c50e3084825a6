"""Quiet start-up of the package's commands: imported first by each command module.

While a command is still importing (JAX, flax, orbax: about a second) nothing has been written, so
Ctrl-C or SIGTERM there exits at once with status 128 + signal and one line, instead of a traceback
through the import machinery. The handlers are installed only when the module is the program being
run (``python -m slamorl_jax.train`` or a ``slamorl-*`` console script), never on a plain import;
the command's ``main`` adds its clean-ups (:func:`slamorl_jax.cli_args.cleanup_on_interrupt`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from slamorl_jax.cli_args import exit_on_interrupt

COMMANDS = ("train", "evaluate", "recommend")


def launched_command() -> str | None:
    """The package command this process runs (``python -m`` or console script), else ``None``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name in {f"slamorl_jax.{name}" for name in COMMANDS}:
        return spec.name
    script = Path(sys.argv[0] if sys.argv else "").name
    return script if script in {f"slamorl-{name}" for name in COMMANDS} else None


_command = launched_command()
if _command is not None:
    exit_on_interrupt(_command)
