"""Silence the after-effects of a failed orbax restore or save on stderr.

When TensorStore fails to read a damaged checkpoint, orbax's asyncio loop ends while TensorStore's
threads still hold callbacks for it, and its unfinished tasks are dropped. Each leftover is
reported later, dozens of lines on stderr after the one-line ``CheckpointError`` that already said
what is wrong (a failed write leaves the same), by one of three routes:

* ``sys.unraisablehook``: ``RuntimeError: Event loop is closed``, or an abandoned coroutine;
* ``sys.excepthook``: the same ``RuntimeError`` raised in a callback TensorStore's thread runs;
* the ``asyncio`` logger: "Task exception was never retrieved", with the task's whole traceback.

:func:`silence_abandoned_restores` drops exactly those reports and passes every other one on. It is
installed only once a restore or a save has failed, so a process that loads its policy fine keeps
every report.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CLOSED_LOOP = "Event loop is closed"
UNRETRIEVED = "exception was never retrieved"  # asyncio's "Task ..." and "Future ..." reports


def _closed_loop(error: BaseException | None) -> bool:
    """Whether ``error`` is a callback's ``RuntimeError`` on orbax's closed loop."""
    return isinstance(error, RuntimeError) and CLOSED_LOOP in str(error)


def _from_abandoned_restore(unraisable: Any) -> bool:
    """Whether an unraisable report is a leftover of an abandoned asynchronous restore."""
    return _closed_loop(unraisable.exc_value) or inspect.iscoroutine(unraisable.object)


class _Filter:
    """``sys.unraisablehook`` that drops leftovers of abandoned restores."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if not _from_abandoned_restore(unraisable):
            self.previous(unraisable)


class _ExceptFilter:
    """``sys.excepthook`` that drops the closed loop's ``RuntimeError`` (nothing else)."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, kind: type, error: BaseException, traceback: Any) -> None:
        if not _closed_loop(error):
            self.previous(kind, error, traceback)


class _UnretrievedTasks(logging.Filter):
    """Drops the ``asyncio`` logger's reports of the abandoned restore's unfinished tasks."""

    def filter(self, record: logging.LogRecord) -> bool:
        return UNRETRIEVED not in str(record.msg)


@contextmanager
def quiet_if_it_fails() -> Iterator[None]:
    """Run an orbax restore or save with the filters in place (TensorStore's threads report some
    leftovers while the failure is still being raised): kept when the block fails, taken down again
    when it succeeds, so a process that loads its policy fine keeps its own hooks."""
    before = (sys.unraisablehook, sys.excepthook, list(logging.getLogger("asyncio").filters))
    silence_abandoned_restores()
    yield  # an exception propagates with the filters kept: its leftovers are still to come
    sys.unraisablehook, sys.excepthook = before[0], before[1]
    logging.getLogger("asyncio").filters[:] = before[2]


def silence_abandoned_restores() -> None:
    """Install the filters (once per process; a later hook installed on top of them stays in
    charge). Called only where a restore or a save has failed: they drop every report of an
    abandoned coroutine, a closed loop or an unretrieved task, so a process (a service) that loads
    its policy fine keeps its own."""
    if not isinstance(sys.unraisablehook, _Filter):
        sys.unraisablehook = _Filter(sys.unraisablehook)
    if not isinstance(sys.excepthook, _ExceptFilter):
        sys.excepthook = _ExceptFilter(sys.excepthook)
    asyncio_logger = logging.getLogger("asyncio")
    if not any(isinstance(f, _UnretrievedTasks) for f in asyncio_logger.filters):
        asyncio_logger.addFilter(_UnretrievedTasks())
