"""Nearest-match lookup in a history store: a new job's first allocation (jittable, vmappable).

A job is matched on its workload and GPU type and five numbers (:data:`HISTORY_FEATURES`):

=========================  ==============================================================
``log_epochs``             log of the job's epochs
``log_deadline_slack``     log(deadline / (epochs x the profile's fastest epoch)): how tight the
                           deadline is against the fastest static run of this workload on this type
``log_budget_slack``       log(budget / (epochs x the profile's cheapest epoch cost)), the same for money
``preference_time``        the preference's time weight (on the simplex)
``preference_cost``        its cost weight
=========================  ==============================================================

The SLAs are taken against the profile's fastest and cheapest static runs (``EnvParams``'s derived
``fastest_epoch_s`` and ``cheapest_epoch_usd``) rather than the request, because which allocation
serves a job depends on how much speed or thrift it needs in absolute terms, and those two runs are
what a job of this workload can reach at best (the job generator sets its feasibility margins on
them too). Distance between a job and a record:

    d = 100 [workload differs] + 10 [GPU type differs] + sum_k weight_k |f_k(job) - f_k(record)|

with weights :data:`FEATURE_WEIGHTS` (epochs count a quarter: for the same slack, the length of a
job changes little about where it should run). The job's first allocation is the record of least
distance among those that match it best (the first on ties): its workload and GPU type, else its
workload on another type, else another workload on its type, else any. So a record of another
workload is used only when none of the job's workload is in the store, and another GPU type only
when none of its type, however far the features (the penalties alone could not promise that: a
slack's log can differ by more than 10).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from slamorl_jax.env.catalog import Catalog, gpu_type_index, load_catalog, workload_index
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState
from slamorl_jax.history.records import HistoryRecord, check_records

HISTORY_FEATURES = (
    "log_epochs",
    "log_deadline_slack",
    "log_budget_slack",
    "preference_time",
    "preference_cost",
)
FEATURE_WEIGHTS = (0.25, 1.0, 1.0, 1.0, 1.0)
WORKLOAD_MISMATCH = 100.0
GPU_TYPE_MISMATCH = 10.0


def job_features(
    workload: jax.Array,
    gpu_type: jax.Array,
    epochs: jax.Array,
    deadline_s: jax.Array,
    budget_usd: jax.Array,
    preference: jax.Array,
    params: EnvParams,
) -> jax.Array:
    """The :data:`HISTORY_FEATURES` of jobs (broadcasts; ``preference`` has a last axis of 3)."""
    epochs_f = jnp.asarray(epochs).astype(jnp.float32)
    fastest = params.fastest_epoch_s[workload, gpu_type] * epochs_f
    cheapest = params.cheapest_epoch_usd[workload, gpu_type] * epochs_f
    return jnp.stack(
        [
            jnp.log(jnp.maximum(epochs_f, 1.0)),
            jnp.log(jnp.maximum(deadline_s / jnp.maximum(fastest, 1e-9), 1e-9)),
            jnp.log(jnp.maximum(budget_usd / jnp.maximum(cheapest, 1e-9), 1e-9)),
            preference[..., 0],
            preference[..., 1],
        ],
        axis=-1,
    ).astype(jnp.float32)


@struct.dataclass
class HistoryTable:
    """A history store as arrays, one row per record (build with :func:`table_from_records`)."""

    workload: jax.Array  # int32 [N] catalogue indices
    gpu_type: jax.Array  # int32 [N]
    epochs: jax.Array  # int32 [N]
    deadline_s: jax.Array  # float32 [N]
    budget_usd: jax.Array  # float32 [N]
    preference: jax.Array  # float32 [N, 3]
    gpus: jax.Array  # int32 [N] the allocation that served the record best
    cpus: jax.Array  # int32 [N]


def table_from_records(
    records: Sequence[HistoryRecord], catalog: Catalog | None = None, *, loaded: bool = False
) -> HistoryTable:
    """The arrays of ``records`` (at least one, each as :func:`load_records` would accept it: checked
    here, about 50 µs a record, unless ``loaded``, for what ``load_records`` returned)."""
    if not records:
        raise ValueError("a history store needs at least one record")
    catalog = catalog or load_catalog()
    if not loaded:
        check_records(records, catalog)

    def column(values: list, dtype: type) -> jax.Array:
        return jnp.asarray(np.asarray(values, dtype=dtype))

    return HistoryTable(
        workload=column([workload_index(r.workload, catalog) for r in records], np.int32),
        gpu_type=column([gpu_type_index(r.gpu_type, catalog) for r in records], np.int32),
        epochs=column([r.epochs for r in records], np.int32),
        deadline_s=column([r.deadline_s for r in records], np.float32),
        budget_usd=column([r.budget_usd for r in records], np.float32),
        preference=column([r.preference for r in records], np.float32),
        gpus=column([r.best_gpus for r in records], np.int32),
        cpus=column([r.best_cpus for r in records], np.int32),
    )


def distances(
    table: HistoryTable, workload: jax.Array, gpu_type: jax.Array, features: jax.Array, params: EnvParams
) -> jax.Array:
    """Distance from one job (its workload, GPU type and features) to every record, ``[N]``."""
    stored = job_features(
        table.workload,
        table.gpu_type,
        table.epochs,
        table.deadline_s,
        table.budget_usd,
        table.preference,
        params,
    )
    weights = jnp.asarray(FEATURE_WEIGHTS, jnp.float32)
    return (
        WORKLOAD_MISMATCH * (table.workload != workload).astype(jnp.float32)
        + GPU_TYPE_MISMATCH * (table.gpu_type != gpu_type).astype(jnp.float32)
        + jnp.sum(weights * jnp.abs(stored - features), axis=-1)
    )


def nearest_record(table: HistoryTable, state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """Index of the record nearest to the job of ``state`` (one job), and its distance."""
    job = state.job
    targets = job.sla_targets
    features = job_features(
        job.workload, job.gpu_type, job.epochs, targets.deadline_s, targets.budget_usd, job.preference, params
    )
    d = distances(table, job.workload, job.gpu_type, features, params)
    # Workload first, then GPU type (module docstring), then the distance.
    tier = 2 * (table.workload != job.workload).astype(jnp.int32) + (table.gpu_type != job.gpu_type).astype(
        jnp.int32
    )
    index = jnp.argmin(jnp.where(tier == jnp.min(tier), d, jnp.inf))
    return index, d[index]


def history_allocation(
    table: HistoryTable, state: EnvState, params: EnvParams
) -> tuple[jax.Array, jax.Array]:
    """The allocation of the record nearest to the job of ``state`` (``env.place`` clips it)."""
    index, _ = nearest_record(table, state, params)
    return table.gpus[index], table.cpus[index]


@dataclasses.dataclass(frozen=True)
class HistoryStart:
    """A start rule (``episodes.StartRule``) placing each fresh job at its nearest record's allocation.

    Holds the store as tuples, so it is hashable and a runner compiled for it is reused.
    """

    columns: tuple[tuple, ...]  # HistoryTable's fields in order, each a tuple of values

    @classmethod
    def from_records(
        cls, records: Sequence[HistoryRecord], catalog: Catalog | None = None, *, loaded: bool = False
    ) -> HistoryStart:
        """The rule for ``records`` (``loaded``: :func:`table_from_records`'s)."""
        table = table_from_records(records, catalog, loaded=loaded)
        return cls(tuple(_nested_tuple(getattr(table, f.name)) for f in dataclasses.fields(table)))

    def table(self) -> HistoryTable:
        """The store as arrays."""
        floating = ("deadline_s", "budget_usd", "preference")
        names = [f.name for f in dataclasses.fields(HistoryTable)]
        values = {
            name: jnp.asarray(column, jnp.float32 if name in floating else jnp.int32)
            for name, column in zip(names, self.columns, strict=True)
        }
        return HistoryTable(**values)

    def __call__(self, state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
        """The job's first allocation from the store."""
        return history_allocation(self.table(), state, params)


def _nested_tuple(values: jax.Array) -> tuple:
    """An array as nested tuples of Python numbers (hashable)."""
    return tuple(tuple(row) if isinstance(row, list) else row for row in np.asarray(values).tolist())
