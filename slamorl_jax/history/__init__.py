"""History of finished jobs: records (JSON/CSV), nearest-match lookup of a new job's first
allocation, and building a store from simulated jobs (``python -m slamorl_jax.history``); logs of
past allocation decisions (``decisions.py``) and the demonstrations a policy is pre-trained on from
them (``demonstrations.py``, ``python -m slamorl_jax.imitate``)."""

from slamorl_jax.history.lookup import (
    FEATURE_WEIGHTS,
    HISTORY_FEATURES,
    HistoryStart,
    HistoryTable,
    history_allocation,
    nearest_record,
    table_from_records,
)
from slamorl_jax.history.records import HistoryRecord, load_records, save_records

__all__ = [
    "FEATURE_WEIGHTS",
    "HISTORY_FEATURES",
    "HistoryRecord",
    "HistoryStart",
    "HistoryTable",
    "history_allocation",
    "load_records",
    "nearest_record",
    "save_records",
    "table_from_records",
]
