"""Comparing calibration outputs: the shipped JSON against a rerun's, numbers to float rounding."""

from __future__ import annotations

import math
from typing import Any


def assert_json_close(a: Any, b: Any, path: str = "$") -> None:
    """``a`` and ``b`` (parsed JSON) have the same structure, equal strings and whole numbers, and
    floats equal to 1e-6 relative (SciPy's optimisers land a few last digits apart by machine);
    a difference is named by its JSON path."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), path
        for k in a:
            assert_json_close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_json_close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12), (path, a, b)
    else:
        assert a == b, (path, a, b)
