"""Strict JSON for the commands that read jobs: a repeated key is an error, kinds and values named as
JSON writes them.

Python's ``json`` keeps the last of two values for one key, other readers the first; a job that says
``"gpus": 4`` and ``"gpus": 8`` is refused rather than read either way.
"""

from __future__ import annotations

import json
from typing import Any


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
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
