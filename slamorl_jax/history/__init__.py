"""History of finished jobs: records (JSON/CSV), nearest-match lookup of a new job's first
allocation, and building a store from simulated jobs (their oracle allocations or where a policy's
runs settled, ``build.py``) or from a platform's finished job reports (``finished_jobs.py``;
``python -m slamorl_jax.history``); logs of past allocation decisions (``decisions.py``) and the
demonstrations a policy is pre-trained on from them (``demonstrations.py``, ``python -m
slamorl_jax.imitate``).

The names below load their module on first use: ``python -m slamorl_jax.history`` imports this
package before its ``__main__``, which must start quietly (``slamorl_jax.cli_start``) before any
module computes arrays.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULE_OF = {
    "FEATURE_WEIGHTS": "lookup",
    "HISTORY_FEATURES": "lookup",
    "HistoryStart": "lookup",
    "HistoryTable": "lookup",
    "history_allocation": "lookup",
    "nearest_record": "lookup",
    "table_from_records": "lookup",
    "HistoryRecord": "records",
    "load_records": "records",
    "save_records": "records",
}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    """One of :data:`__all__`, imported from its module on first use."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
