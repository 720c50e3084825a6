"""JSON that every reader accepts: a figure that is not a finite number is written as ``null``.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which strict parsers (JavaScript's,
``jq``, Go's) refuse. A report's undefined figure (a relative gain over a baseline that met no SLA,
a mean over no jobs) is ``null`` instead, and ``allow_nan=False`` makes any other one an error here
rather than a file no one else can read.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_null(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by ``None``, in nested dicts, lists and
    tuples (tuples become lists, as JSON writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(item) for item in value]
    return value


def dumps_strict(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite_or_null` of ``value`` with ``allow_nan=False``."""
    return json.dumps(finite_or_null(value), allow_nan=False, **kwargs)
