"""Strict JSON for the commands that read jobs: a repeated key is an error, kinds and values named as
JSON writes them.

Python's ``json`` keeps the last of two values for one key, other readers the first; a job that says
``"gpus": 4`` and ``"gpus": 8`` is refused rather than read either way.
"""

from __future__ import annotations

import json
import math
import numbers
import sys
from typing import Any

import numpy as np

from slamorl_jax.cli_args import first_line

# The largest numbers a job report or a history record may hold: a reading (seconds, dollars,
# samples/s, GiB) beyond MAX_VALUE fails in float32 arithmetic; a GPU, CPU or epoch count beyond
# MAX_COUNT is no job's.
MAX_VALUE = 1e12
MAX_COUNT = 1_000_000


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice."""


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``json.loads``' object hook: the object, or :class:`DuplicateKeyError` naming a repeated key."""
    data = dict(pairs)
    if len(data) < len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise DuplicateKeyError(f"the field {repeated[:80]!r} is given twice")
    return data


def loads_strict(text: str) -> object:
    """``json.loads`` refusing a repeated key (:class:`DuplicateKeyError`, a ``ValueError``)."""
    return json.loads(text, object_pairs_hook=unique_keys)


def json_kind(value: object) -> str:
    """The JSON name of a parsed value's kind (for messages)."""
    if value is None:
        return "null"
    kinds = (
        (bool, "a boolean"),
        ((int, float), "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "an object"),
    )
    return next((name for kind, name in kinds if isinstance(value, kind)), "a value")


def short_value(value: Any, limit: int = 60) -> str:
    """A value for a message, as JSON writes it where it is JSON (``true``, ``null``, ``{"a": 1}``;
    the job files and stores are JSON), else its ``repr``; cut to ``limit`` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # not JSON (a tuple inside a dict key, an object, ...)
        text = " ".join(repr(value).split())  # one line (an array's repr spans several)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def finite_number(value: Any, what: str, *, text: bool = False) -> float:
    """``value`` as a finite Python float, or a ``ValueError`` "``what`` must be a finite number,
    got ...": a real number, a NumPy or JAX scalar, and with ``text`` a string holding one (a CSV
    cell); never a bool. An integer beyond any float is not finite."""
    number = None
    try:
        if text and isinstance(value, str):
            number = float(value.strip())
        elif isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
            number = float(value)
        elif getattr(value, "shape", None) == () and _numeric_dtype(getattr(value, "dtype", None)):
            number = float(np.asarray(value))  # a NumPy or JAX scalar, bfloat16 included
    except OverflowError:  # an integer beyond any float
        number = math.inf
    except (TypeError, ValueError):  # not a number after all (np.timedelta64 is Integral to NumPy)
        number = None
    if number is None or not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {short_value(value)}")
    return number


def _numeric_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` may hold a number: integer, floating point, or NumPy's ``V`` kind, as JAX's
    bfloat16 and float8s are (a ``V`` value that is raw bytes then fails ``float``). A bool is not a
    number here."""
    try:
        return np.dtype(dtype).kind in "iufV"
    except TypeError:  # None, or a dtype NumPy does not know (another library's)
        return False


def json_or_reason(text: str) -> tuple[object, str | None]:
    """The JSON value of ``text`` and ``None``, or ``None`` and why it is none, to follow where it
    came from: it is not JSON, is nested too deeply, repeats a key in an object (which JSON readers
    resolve differently: Python's keeps the last) or holds a number Python will not convert (an
    integer of over 4,300 digits)."""
    try:
        return loads_strict(text), None
    except json.JSONDecodeError as err:
        return None, f" is not valid JSON: {err.msg} (line {err.lineno})"
    except RecursionError:
        return None, " is nested too deeply to be a job"
    except ValueError as err:  # a key given twice; an integer of more digits than Python converts
        if "int_max_str_digits" in str(err) or "integer string conversion" in str(err):
            limit = sys.get_int_max_str_digits()
            return None, f" holds an integer of more digits than a job's number can have (over {limit:,})"
        return None, f": {first_line(err)}"
