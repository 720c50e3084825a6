"""Quiet start-up of the package's commands: imported first by each command module.

While a command is still importing (JAX, flax, orbax: about a second) nothing has been written, so
Ctrl-C or SIGTERM there exits at once with status 128 + signal and one line, instead of a traceback
through the import machinery. The handlers are installed only when the module is the program being
run (``python -m slamorl_jax.train`` or a ``slamorl-*`` console script), never on a plain import;
the command's ``main`` adds its clean-ups (:func:`slamorl_jax.cli_args.cleanup_on_interrupt`).

:func:`require_backend` then starts JAX's backend before the command's other imports, which compute
arrays: a platform the machine lacks (``JAX_PLATFORMS=gpu`` on a CPU-only machine, a broken CUDA
install) is one line and status 2 instead of a traceback of the import that first touched a device.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from slamorl_jax.cli_args import exit_on_interrupt, fail, first_line

COMMANDS = ("train", "evaluate", "recommend", "imitate", "history", "export_policy")
#: The package's other programs (``python -m``), which start the same way.
TOOL_MODULES = (
    "slamorl_jax.env.feasibility",
    "slamorl_jax.calibration",
    "slamorl_jax.calibration.job_spread",
    "slamorl_jax.calibration.assumptions",
)
#: The benchmark harness's package: each of its modules run as a program starts the same way.
BENCHMARKS = "benchmarks"


def launched_command() -> str | None:
    """The package command this process runs (``python -m`` or console script), else ``None``; also
    one of :data:`TOOL_MODULES` or a benchmark (``python -m benchmarks.X`` or ``python benchmarks/X.py``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    # While ``python -m a.b.c`` imports the packages ``a`` and ``a.b``, ``__main__`` has no spec yet.
    name = spec.name if spec is not None else module_after_dash_m(getattr(sys, "orig_argv", []))
    name = name.removesuffix(".__main__") if name is not None else None  # a package's __main__
    if name in {f"slamorl_jax.{command}" for command in COMMANDS} or name in TOOL_MODULES:
        return name
    if name is not None and name.startswith(f"{BENCHMARKS}."):
        return name
    script = Path(sys.argv[0] if sys.argv else "")
    if spec is None and script.suffix == ".py" and script.parent.name == BENCHMARKS:
        return f"{BENCHMARKS}.{script.stem}"
    return script.name if script.name in {console_script(command) for command in COMMANDS} else None


def program_name(module: str) -> str:
    """How a command names itself in its messages (usage, errors, an interrupt): the console script
    it was started as (``slamorl-evaluate``), else ``python -m <module>``."""
    command = launched_command()
    return command if command is not None and command.startswith("slamorl-") else f"python -m {module}"


def console_script(command: str) -> str:
    """The console script ``pyproject.toml`` installs for a package command (``slamorl-export-policy``
    for ``export_policy``)."""
    return f"slamorl-{command.replace('_', '-')}"


def module_after_dash_m(argv: list[str]) -> str | None:
    """The module a Python command line (``sys.orig_argv``) runs with ``-m``, else ``None``."""
    rest = iter(argv[1:])
    for arg in rest:
        if arg.startswith("--") and arg != "--":
            continue  # a long option (the value of one that takes a value reads as a script: None)
        if arg in ("-", "--") or not arg.startswith("-"):  # stdin or a script
            return None
        for index, letter in enumerate(arg[1:], start=1):  # a cluster of short options, e.g. -Im
            if letter in "mcWX":  # each takes a value: the rest of the cluster or the next argument
                value = arg[index + 1 :] or next(rest, None)
                if letter == "m":
                    return value
                if letter == "c":
                    return None
                break
    return None


def require_backend() -> None:
    """When this process is a package command: start JAX's backend now, and if it cannot start, say
    why in one line and exit with status 2. A multi-process run calls it after joining
    (``distributed_start``), as the backend must start after ``jax.distributed.initialize``."""
    command = launched_command()
    if command is None:
        return
    import jax

    try:
        jax.devices()
    except RuntimeError as err:
        platforms = os.environ.get("JAX_PLATFORMS", "")
        advice = (
            f"JAX_PLATFORMS={platforms} asks for it; unset JAX_PLATFORMS to use what this machine has"
            if platforms
            else "check the accelerator's drivers and the jax package installed for it"
        )
        fail(f"JAX cannot start its backend ({advice}): {first_line(err)}", program_name(command))


_command = launched_command()
if _command is not None:
    exit_on_interrupt(program_name(_command))
