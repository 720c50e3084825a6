"""Command-line helpers shared by the package's commands and the benchmarks.

Bad input gets one line on stderr and exit status 2 (no usage block, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn


def fail(message: str, prog: str | None = None) -> NoReturn:
    """Print ``prog: error: message`` on one line to stderr and exit with status 2."""
    print(f"{prog or Path(sys.argv[0]).name}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class OneLineArgumentParser(argparse.ArgumentParser):
    """``argparse`` whose errors are one line (no usage block) with exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Report a bad command line and exit 2."""
        fail(message, self.prog)


def positive_int_list(text: str) -> list[int]:
    """``argparse`` type: a comma-separated list of positive integers, e.g. ``1,64,4096``."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return values


def bounded(kind: Callable[[str], float], low: float, high: float) -> Callable[[str], Any]:
    """``argparse`` type: a number of ``kind`` in ``[low, high]``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            noun = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low:g}, {high:g}], got {text}")
        return value

    return parse
