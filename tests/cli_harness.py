"""Running the package's commands in process on bad input, and what a bad-input run must look like.

Calling a command's ``main`` with an argument list costs milliseconds where a subprocess costs seconds
of imports, so the fuzz cases run here; the properties only a real process has (exit by signal, no
traceback from the interpreter) are checked with a few subprocesses elsewhere.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

MAX_STDERR_LINES = 3  # the bar: a bad input gets at most three lines on stderr
# How train starts its one error line, as the package's other commands do (``prog: error:``).
TRAIN_ERROR = "python -m slamorl_jax.train: error:"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one in-process command run did."""

    code: int | str | None
    stdout: str
    stderr: str
    new_paths: tuple[str, ...]

    def report(self) -> str:
        """Everything, for an assertion message."""
        return (
            f"exit {self.code!r}\nstderr: {self.stderr[-2000:]}\nstdout: {self.stdout[-500:]}\n"
            f"new: {self.new_paths}"
        )


def snapshot(root: Path) -> set[str]:
    """Every path under ``root``, relative to it."""
    return {
        os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files
    }


def call(main: Callable[[], object], capsys: pytest.CaptureFixture[str], root: Path) -> Outcome:
    """Run ``main`` (raising ``SystemExit`` or returning a status) and see what it left under ``root``."""
    before = snapshot(root)
    capsys.readouterr()
    try:
        code = main()
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return Outcome(code, out.out, out.err, tuple(sorted(snapshot(root) - before)))


def assert_refused(outcome: Outcome, *phrases: str, code: int = 2) -> None:
    """Exit ``code`` (2: bad input), one to three lines on stderr naming ``phrases``, no traceback,
    nothing new on disk."""
    lines = outcome.stderr.strip().splitlines()
    assert outcome.code == code, outcome.report()
    assert 1 <= len(lines) <= MAX_STDERR_LINES, outcome.report()
    assert "Traceback" not in outcome.stderr + outcome.stdout, outcome.report()
    assert not outcome.new_paths, outcome.report()
    for phrase in phrases:
        assert phrase in outcome.stderr, (phrase, outcome.report())


def new_job_from(report: dict[str, Any]) -> dict[str, Any]:
    """The same job as the JSON ``report`` before its first epoch: only what every report holds
    (``LiveJob.required_fields``) and its preference, with ``epochs_done`` 0."""
    from slamorl_jax.live_job import LiveJob

    fields = {name: report[name] for name in LiveJob.required_fields()}
    return {**fields, "preference": report["preference"], "epochs_done": 0}
