"""The filters of a failed restore's leftovers (``restore_noise.py``): they drop exactly the three
kinds of report TensorStore's threads and asyncio make after orbax's loop closed, and stay only when
the restore failed. A damaged checkpoint's one-line error was followed by "Event loop is closed"
tracebacks or "Future exception was never retrieved" logs in about one run in three."""

from __future__ import annotations

import logging
import sys
import types

import pytest

from slamorl_jax import restore_noise


def test_the_filters_stay_after_a_failure_and_go_after_a_success(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, error, tb: seen.append(error))
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(unraisable.exc_value))
    asyncio_logger = logging.getLogger("asyncio")
    monkeypatch.setattr(asyncio_logger, "filters", [])
    with restore_noise.quiet_if_it_fails():
        pass
    assert not isinstance(sys.excepthook, restore_noise._ExceptFilter) and asyncio_logger.filters == []
    with pytest.raises(ValueError), restore_noise.quiet_if_it_fails():
        raise ValueError("damaged")
    closed, other = RuntimeError("Event loop is closed"), ValueError("a bug of the service's own")
    sys.excepthook(RuntimeError, closed, None)
    sys.excepthook(ValueError, other, None)
    sys.unraisablehook(types.SimpleNamespace(exc_value=closed, object=None))
    sys.unraisablehook(types.SimpleNamespace(exc_value=other, object=None))
    assert seen == [other, other]
    record = logging.LogRecord(
        "asyncio", logging.ERROR, "", 0, "Future exception was never retrieved", (), None
    )
    assert not all(f.filter(record) for f in asyncio_logger.filters)
    record.msg = "a loop's own error"
    assert all(f.filter(record) for f in asyncio_logger.filters)
