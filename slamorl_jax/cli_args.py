"""Command-line helpers shared by the package's commands and the benchmarks.

Bad input gets one line on stderr and exit status 2 (no usage block, no traceback); Ctrl-C, SIGTERM
or SIGHUP (a closed terminal) ends a command with status 128 + signal and one line; output piped to
a reader that stops early (``| head``) ends it quietly with status 141, as SIGPIPE would; an
unexpected error is one line with status 1 (``SLAMORL_JAX_TRACEBACK=1`` shows its traceback).
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn

# Longest message an error line shows: bad input may be echoed (a name, a list of unknown fields),
# and a megabyte-long value would make a megabyte-long line.
MAX_MESSAGE_CHARS = 1000


def fail(message: str, prog: str | None = None) -> NoReturn:
    """Print ``prog: error: message`` on one line to stderr (:func:`one_line`) and exit with status 2."""
    print(f"{prog or Path(sys.argv[0]).name}: error: {one_line(message)}", file=sys.stderr)
    raise SystemExit(2)


def one_line(message: str) -> str:
    """``message`` as one line of at most ``MAX_MESSAGE_CHARS`` characters: a line break it echoes
    (a path or name holding one) is written ``\\n``, as Python writes it in a string."""
    message = message.replace("\r", "\\r").replace("\n", "\\n")
    if len(message) > MAX_MESSAGE_CHARS:
        message = f"{message[:MAX_MESSAGE_CHARS]}... ({len(message) - MAX_MESSAGE_CHARS:,} more characters)"
    return message


def respelled(arg: str, known: Callable[[str], bool]) -> str:
    """``arg`` with its flag name spelled as the command knows it: ``--hold-below`` where only
    ``--hold_below`` is ``known`` and the other way round (the package's commands spell flags with
    ``_``, most benchmarks with ``-``; either works in every command), a value after ``=`` kept as it
    is. Anything else (a known flag, a value, a name known in neither spelling) is returned as it is."""
    if not arg.startswith("-") or arg == "-":
        return arg
    flag, equals, value = arg.partition("=")
    if known(flag):
        return arg
    dashes = len(flag) - len(flag.lstrip("-"))
    name = flag[dashes:]
    for other in (name.replace("_", "-"), name.replace("-", "_")):
        if other != name and known(flag[:dashes] + other):
            return flag[:dashes] + other + equals + value
    return arg


def respelled_argv(argv: list[str], known: Callable[[str], bool]) -> list[str]:
    """Every argument of ``argv`` before a ``--`` :func:`respelled`; from ``--`` on, as given."""
    end = argv.index("--") if "--" in argv else len(argv)
    return [*(respelled(arg, known) for arg in argv[:end]), *argv[end:]]


class DefaultsShownFormatter(argparse.HelpFormatter):
    """``--help`` that shows each option's default after its help, as the flag takes it (a list as
    its comma-separated items), unless the help already says it or there is none to show (``None``,
    a switch's ``False``, an empty list). An option without help gets none: give every option help."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        empty = isinstance(default, list | tuple | dict | str) and not default
        nothing = default is None or default is False or default == argparse.SUPPRESS or empty
        typed = _as_typed(default, action.nargs).replace("%", "%%")
        if nothing or not action.option_strings:
            return action.help
        if "default" in text:  # said already: as typed where the text asks for the value
            return text.replace("%(default)s", typed)
        return f"{text} (default: {typed})"


def _as_typed(default: Any, nargs: Any) -> str:
    """A default as its flag is typed: a list comma-separated (``1,2,4``), and with ``nargs`` one
    argument an item, space-separated (``64,64 128,128``)."""
    if not isinstance(default, list | tuple):
        return str(default)
    if nargs in (None, "?"):
        return ",".join(str(item) for item in default)
    return " ".join(_as_typed(item, None) for item in default)


class OneLineArgumentParser(argparse.ArgumentParser):
    """``argparse`` whose errors are one line (no usage block) with exit status 2, and whose flags
    take either spelling, ``--hold_below`` or ``--hold-below`` (:func:`respelled`), by their full
    names only (``--hold=0.5`` is refused, as train's absl flags refuse it, rather than read as
    whichever flag it starts); ``--help`` shows every option's default (:class:`DefaultsShownFormatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", DefaultsShownFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Report a bad command line and exit 2."""
        fail(message, self.prog)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """``argparse``'s, each flag first spelled as this parser knows it (a sub-command's parser
        respells its own flags when it parses them)."""
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(
            respelled_argv(args, self._option_string_actions.__contains__), namespace
        )


def summary(doc: str | None) -> str | None:
    """The first line of a module's docstring, for a command's ``--help``; ``None`` when Python runs
    with ``-OO``, which strips docstrings (``__doc__`` is then ``None``)."""
    return doc.strip().splitlines()[0] if doc and doc.strip() else None


#: The largest int32: the largest seed, count or list entry the commands and configs take (JAX
#: indexes arrays and sizes, and counts an optimiser's steps, with int32).
INT32_MAX = 2**31 - 1


def positive_int_list(text: str) -> list[int]:
    """``argparse`` type: a comma-separated list of positive integers up to :data:`INT32_MAX`,
    e.g. ``1,64,4096``."""
    parts = text.split(",")
    if len(parts) > 1 and any(not part.strip() for part in parts):  # "8,,16": a number left out?
        raise argparse.ArgumentTypeError(
            f"an empty item in {text!r}: separate the numbers with single commas, e.g. 1,64,4096"
        )
    try:
        values = [int(part) for part in parts if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    if too_big := [v for v in values if v > INT32_MAX]:
        raise argparse.ArgumentTypeError(
            f"each must be at most {INT32_MAX:,} (2**31 - 1), got {too_big[0]:,}"
        )
    return values


def file_path(text: str) -> Path:
    """``argparse`` type: a path naming a file to write. One ending in a separator, ``.`` or ``..``
    names a folder (``Path`` would drop the slash or the dot and write a file of the name before it),
    so it is refused."""
    if text.endswith(("/", os.sep)) or os.path.basename(text) in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder: give a file name")
    return Path(text)


def bounded(kind: Callable[[str], float], low: float, high: float) -> Callable[[str], Any]:
    """``argparse`` type: a number of ``kind`` in ``[low, high]``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            noun = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not low <= value <= high:
            shown = (f"{low:,}", f"{high:,}") if kind is int else (f"{low:g}", f"{high:g}")
            raise argparse.ArgumentTypeError(f"must be in [{shown[0]}, {shown[1]}], got {text}")
        return value

    return parse


def seed_value(text: str) -> int:
    """``argparse`` type: a seed, an integer in ``[0, 2**31 - 1]`` (:data:`INT32_MAX`)."""
    return bounded(int, 0, INT32_MAX)(text)


def add_hold_below_argument(parser: argparse.ArgumentParser, flag: str, kept: str) -> None:
    """The hold threshold flag (``agent.decision``; default 0, the plain argmax): ``flag`` as the
    command spells it, ``kept`` what is kept (e.g. "the job's allocation")."""
    parser.add_argument(
        flag,
        type=bounded(float, 0.0, 1.0),
        default=0.0,
        help=f"keep {kept} where the policy's top action probability is below this (0: the plain argmax)",
    )


def add_relocate_payback_argument(parser: argparse.ArgumentParser, flag: str, what: str) -> None:
    """The relocation payback flag (``networks.relocation_pays``; default None: the policy's own, as
    trained): ``flag`` as the command spells it, ``what`` the command does with it ("run the policy")."""
    parser.add_argument(
        flag,
        type=bounded(float, 0.0, 100.0),
        default=None,
        help=f"{what} with this relocation payback rule, in pauses (0: off; default: as trained)",
    )


TRACEBACK_ENV = "SLAMORL_JAX_TRACEBACK"
# The signals that stop a command the way Ctrl-C does: SIGHUP is a closed terminal or SSH session
# (it killed a run at once, leaving logs and no checkpoint); Windows has no SIGHUP.
STOP_SIGNALS = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None
)
_cleanups: list[Callable[[], None]] = []
_interrupted_prog = ["slamorl_jax"]  # the command named in the line an interrupt prints
_deferring = [0]  # depth of stop_signals_deferred blocks
_deferred: list[int] = []  # a stop signal that arrived inside one


def _exit_interrupted(signum: int, frame: object) -> None:
    """Run the registered clean-ups, print one line and end the process with 128 + ``signum``.

    Exiting from the handler (instead of raising ``KeyboardInterrupt``) is what makes Ctrl-C reliable
    here: an exception raised in a signal handler can land in a garbage-collection callback, where
    Python prints and drops it, and XLA compiles in callbacks of that kind. Inside
    :func:`stop_signals_deferred` the signal is only noted, and acted on when the block ends.
    """
    if _deferring[0]:
        _deferred.append(signum)
        return
    for cleanup in reversed(_cleanups):
        with suppress(Exception):  # a failing clean-up must not turn into a traceback
            cleanup()
    with suppress(Exception):  # the handler may interrupt a write to the same stream
        sys.stdout.flush()
        sys.stderr.flush()
    os.write(2, f"{_interrupted_prog[0]}: interrupted ({signal.Signals(signum).name})\n".encode())
    os._exit(128 + signum)


def exit_on_interrupt(prog: str) -> None:
    """From now on the :data:`STOP_SIGNALS` end the process at once, quietly (see
    :func:`_exit_interrupted`)."""
    _interrupted_prog[0] = prog
    for signum in STOP_SIGNALS:
        signal.signal(signum, _exit_interrupted)


@contextmanager
def cleanup_on_interrupt(cleanup: Callable[[], None]) -> Iterator[None]:
    """Run ``cleanup`` if one of the :data:`STOP_SIGNALS` ends the process inside the block."""
    _cleanups.append(cleanup)
    try:
        yield
    finally:
        _cleanups.remove(cleanup)


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Run the block whole: a stop signal that arrives inside it ends the process (as
    :func:`exit_on_interrupt` set up) when it ends, not halfway (a few renames that must all happen or
    none). Python runs signal handlers in the main thread between bytecodes, so a flag does it where
    blocking the signal would not (another of the process's threads would take it)."""
    _deferring[0] += 1
    try:
        yield
    finally:
        _deferring[0] -= 1
        if not _deferring[0] and _deferred:
            _exit_interrupted(_deferred.pop(), None)


def first_line(error: BaseException, limit: int = 300) -> str:
    """The first line of ``error``'s message, at most ``limit`` characters."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quiet_after_closed_stdout() -> int:
    """What a command does when the reader of its output went away (``| head``): it has no one left
    to tell, so it points standard output at the null device (the interpreter's last flush would fail
    again) and exits like a process killed by SIGPIPE, quietly: status 141."""
    # Where standard output is not a file descriptor (a test's capture) there is nothing to redirect.
    with suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + signal.SIGPIPE


def run_command(main: Callable[[], int | None], prog: str) -> NoReturn:
    """Run a command's ``main`` and exit with its status, never with a traceback.

    The :data:`STOP_SIGNALS` end the command with status 128 + signal and one line (after the clean-ups of
    :func:`cleanup_on_interrupt`; a training loop handles them itself while it trains); any other
    unexpected exception is one line and status 1, unless the environment sets ``SLAMORL_JAX_TRACEBACK``.
    """
    exit_on_interrupt(prog)
    try:
        code = main()
    except BrokenPipeError:
        code = quiet_after_closed_stdout()
    except Exception as err:
        if os.environ.get(TRACEBACK_ENV):
            raise
        print(
            f"{prog}: error: unexpected {type(err).__name__}: {first_line(err)} "
            f"(set {TRACEBACK_ENV}=1 for the traceback)",
            file=sys.stderr,
        )
        code = 1
    sys.exit(code)
