"""Silence the after-effects of a failed orbax restore: "Exception ignored" reports.

When TensorStore fails to read a damaged checkpoint, orbax's asyncio loop ends while TensorStore's
threads still hold callbacks for it; each later reports ``RuntimeError: Event loop is closed`` (or an
abandoned coroutine) through ``sys.unraisablehook``, dozens of lines on stderr after the one-line
``CheckpointError`` that already said what is wrong (a failed write leaves the same). This module's hook drops
exactly those reports and passes every other one to the hook it replaced.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any


def _from_abandoned_restore(unraisable: Any) -> bool:
    """Whether an unraisable report is a leftover of an abandoned asynchronous restore."""
    error = unraisable.exc_value
    closed_loop = isinstance(error, RuntimeError) and "Event loop is closed" in str(error)
    return closed_loop or inspect.iscoroutine(unraisable.object)


class _Filter:
    """``sys.unraisablehook`` that drops leftovers of abandoned restores."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if not _from_abandoned_restore(unraisable):
            self.previous(unraisable)


def silence_abandoned_restores() -> None:
    """Install the filter (once per process; a later hook installed on top of it stays in charge).
    Called only where a restore or a save has failed: it drops every report of an abandoned
    coroutine or a closed loop, so a process (a service) that loads its policy fine keeps its own."""
    if not isinstance(sys.unraisablehook, _Filter):
        sys.unraisablehook = _Filter(sys.unraisablehook)
