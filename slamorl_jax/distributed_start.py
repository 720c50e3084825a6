"""Join a multi-process run at start-up, before any module can touch a JAX device.

``jax.distributed.initialize`` must run before JAX's backend starts, and importing the environment
(gymnax among its dependencies) already computes arrays. So ``python -m slamorl_jax.train`` imports
this module second (after :mod:`slamorl_jax.cli_start`): when it is the program being run, it reads
the multi-process flags straight from the command line (``--distributed``, ``--coordinator_address``,
``--num_processes``, ``--process_id``, ``--distributed_heartbeat_s``, ``--distributed_init_timeout_s``,
as ``--flag=value`` or ``--flag value``, in a ``--flagfile`` too) and the environment, and joins the
run. absl parses and checks the same flags again later. Bad values: one line and exit status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from absl import flags

from slamorl_jax.cli_args import fail
from slamorl_jax.cli_start import launched_command, program_name
from slamorl_jax.distributed import CoordinatorError, DistributedOptions, initialize, resolve

INT_FLAGS = {
    "num_processes": "num_processes",
    "process_id": "process_id",
    "distributed_heartbeat_s": "heartbeat_timeout_s",
    "distributed_init_timeout_s": "initialization_timeout_s",
}
# absl's words for a boolean flag's value (case aside): what it accepts, the early reading accepts.
TRUE_WORDS = ("true", "t", "1")
FALSE_WORDS = ("false", "f", "0")


def _double_dash(arg: str) -> str:
    """``arg`` with absl's one-dash spelling of a flag (``-name``, ``-name=value``) as ``--name``; a
    value such as ``-1`` stays as it is."""
    return "-" + arg if len(arg) > 1 and arg[0] == "-" and (arg[1].isalpha() or arg[1] == "_") else arg


def _value(args: Sequence[str], i: int, name: str) -> tuple[str | None, int]:
    """The value of flag ``name`` at ``args[i]`` (``--name=v`` or ``--name v``) and the next index;
    ``(None, i + 1)`` when ``args[i]`` is not that flag."""
    arg = args[i]
    if arg.startswith(f"--{name}="):
        return arg.split("=", 1)[1], i + 1
    if arg == f"--{name}":
        if i + 1 >= len(args):
            raise ValueError(f"flag --{name} needs a value")
        return args[i + 1], i + 2
    return None, i + 1


def early_options(args: Sequence[str]) -> DistributedOptions:
    """The multi-process settings among command-line ``args`` (program name excluded)."""
    values: dict[str, object] = {}
    args = [_double_dash(arg) for arg in args]
    i = 0
    while i < len(args) and args[i] != "--":
        arg = args[i]
        if arg in ("--distributed", "--nodistributed") or arg.startswith("--distributed="):
            word = arg.split("=", 1)[1].lower() if "=" in arg else str(arg == "--distributed").lower()
            if word not in TRUE_WORDS + FALSE_WORDS:
                raise ValueError(f"--distributed must be true or false, got {word!r}")
            values["enabled"] = word in TRUE_WORDS
            i += 1
            continue
        text, j = _value(args, i, "coordinator_address")
        if text is not None:
            values["coordinator_address"] = text
            i = j
            continue
        for flag, field in INT_FLAGS.items():
            text, j = _value(args, i, flag)
            if text is not None:
                try:
                    values[field] = int(text)
                except ValueError:
                    raise ValueError(f"--{flag} must be an integer, got {text!r}") from None
                break
        i = j
    return DistributedOptions(**values)  # type: ignore[arg-type]


def expand_flagfiles(argv: Sequence[str]) -> list[str]:
    """``argv`` with each ``--flagfile`` replaced by the flags it holds (absl's reading of them, nested
    files included); ``argv`` as it is when a file cannot be read, which absl reports later."""
    try:
        return flags.FlagValues().read_flags_from_files(list(argv), force_gnu=True)
    except (flags.Error, OSError, UnicodeError, ValueError):
        return list(argv)


def join_if_launched(argv: Sequence[str]) -> bool:
    """Join the multi-process run the command line asks for, when this process is a package command."""
    command = launched_command()
    if command is None:
        return False
    prog = program_name(command)
    try:
        options = resolve(early_options(expand_flagfiles(argv)[1:]))
    except ValueError as err:
        fail(str(err), prog)
    try:
        return initialize(options)
    except CoordinatorError as err:
        fail(str(err), prog)
    except ValueError as err:  # JAX found no cluster to fill in what the flags leave unset
        fail(
            f"--distributed: {err} (no SLURM or other cluster detected; pass --coordinator_address, "
            "--num_processes and --process_id)",
            prog,
        )
    except RuntimeError as err:
        print(f"{prog}: error: cannot join the multi-process run: {err}", file=sys.stderr)
        raise SystemExit(1) from None
