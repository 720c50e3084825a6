"""A real job's first allocation before it has run an epoch: the forecast, a history store, or probes.

Three ways for a job with no measured epochs (``LiveJob.epochs_done == 0``), beside the policy's own
answer (``live.recommend``), which stays the default:

* :func:`forecast_first_allocation`: the allocation the profile's forecast ranks first (keep or a
  target of the policy's grid, ranked as the oracle ranks allocations: SLAs met, then the
  preference's time and cost), corrected by the job's reported ``probes`` if any: the start that
  ``evaluate`` reports as ``policy_from_forecast`` (the job placed there before its first epoch,
  then run by the policy);

* :func:`history_first_allocation`: the allocation of the nearest record of a history store
  (``slamorl_jax.history``: the same match the simulated history start makes), clipped to the policy's
  cluster;
* :func:`probe_plan`: the probe runs to make first (``env/probes.py``'s default set and fraction, and
  whether they are worth their time for this job). The user runs them and reports each as the job's
  ``probes`` (``{"gpus", "cpus", "epoch_time_s"}``, the probe's time over its fraction of an epoch),
  with the job's ``gpus`` and ``cpus`` the last probe's (a move from there pays the pause, as in
  ``ProbingEnv``), its ``requested_gpus`` and ``requested_cpus`` as they were (the plan's
  ``report_with``: left out, the request would default to the last probe's allocation) and its
  ``elapsed_s`` and ``cost_usd`` counting the probes' time and cost, as the env bills them;
  ``live.recommend`` then feeds them to the job's online model, as the env does, and the policy
  answers from the corrected forecast.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.actions import clip_allocation
from slamorl_jax.env.catalog import Catalog
from slamorl_jax.env.params import EnvParams, cluster_bounds
from slamorl_jax.env.probes import (
    PROBE_BUDGET,
    PROBE_FRACTION,
    probe_allocations,
    probes_worth_running,
    suggested_allocation,
)
from slamorl_jax.env.state import EnvState
from slamorl_jax.history.lookup import nearest_record, table_from_records
from slamorl_jax.history.records import HistoryRecord
from slamorl_jax.live import check_recommendable, live_state
from slamorl_jax.live_job import LiveJob, has_launched


@dataclasses.dataclass(frozen=True)
class FirstAllocation:
    """A job's first allocation from a history store, and the record it came from."""

    gpus: int
    cpus: int
    distance: float  # history.lookup's distance to the record
    record: dict[str, Any]
    source: str = "history"
    # How the record matches the job (HISTORY_MATCHES): a record of another GPU type, or another
    # workload, is used only where the store holds none closer (history.lookup).
    match: str = "workload and GPU type"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


# A history answer's ``match``, best first: the record's workload and GPU type are the job's; its
# workload only; neither workload (the store holds no record of the job's workload).
HISTORY_MATCHES = ("workload and GPU type", "workload, another GPU type", "another workload")


def _check_unstarted(job: LiveJob, what: str) -> None:
    if job.epochs_done > 0:
        raise ValueError(f"{what} is for a job that has run no epoch yet (epochs_done is {job.epochs_done})")


def history_first_allocation(
    job: LiveJob, records: Sequence[HistoryRecord], params: EnvParams, catalog: Catalog | None = None
) -> FirstAllocation:
    """The first allocation of ``job`` from the nearest of ``records`` (``ValueError`` for a job that has
    run epochs, or one ``live.check_recommendable`` refuses). ``catalog``: the one ``params`` are
    built on and the names are read in (the policy's; default: the shipped one)."""
    _check_unstarted(job, "a history start")
    check_recommendable(job, params, catalog)
    state = live_state(job, params, catalog)
    index, distance = jax.jit(nearest_record)(table_from_records(records, catalog), state, params)
    record = records[int(index)]
    gpus, cpus = clip_allocation(
        jnp.int32(record.best_gpus), jnp.int32(record.best_cpus), *cluster_bounds(params)
    )
    match = HISTORY_MATCHES[0 if record.workload == job.workload else 2]
    if match == HISTORY_MATCHES[0] and record.gpu_type != job.gpu_type:
        match = HISTORY_MATCHES[1]
    return FirstAllocation(int(gpus), int(cpus), float(distance), record.as_dict(), match=match)


_suggested = jax.jit(suggested_allocation)


def forecast_first_allocation(
    job: LiveJob, params: EnvParams, catalog: Catalog | None = None
) -> dict[str, Any]:
    """Where the forecast ranks first for ``job`` before its first epoch (module docstring;
    ``ValueError`` for a job that has run epochs, or one ``live.check_recommendable`` refuses;
    ``catalog`` as :func:`history_first_allocation` takes it)."""
    _check_unstarted(job, "a forecast start")
    check_recommendable(job, params, catalog)
    # A job that ran probes moves from the last one (the env's ProbingEnv); one that ran nothing
    # starts wherever it is placed, so no candidate pays a pause (probes.first_placement).
    gpus, cpus = _suggested(live_state(job, params, catalog), params, has_launched(job))
    return {
        "source": "forecast",
        "gpus": int(gpus),
        "cpus": int(cpus),
        "probes_used": len(job.probes or ()),
        "then": "start the job there; after each epoch ask again with its history",
    }


@jax.jit
def _probe_plan(state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The default probe set of a job and whether it is worth running (compiled: one call)."""
    gpus, cpus = probe_allocations(state, params)
    return gpus, cpus, probes_worth_running(state, gpus, cpus, params)


def probe_plan(job: LiveJob, params: EnvParams, catalog: Catalog | None = None) -> dict[str, Any]:
    """The probe runs ``job`` should make before its first epoch (module docstring; ``catalog`` as
    :func:`history_first_allocation` takes it)."""
    _check_unstarted(job, "a probe plan")
    check_recommendable(job, params, catalog)
    state = live_state(job, params, catalog)
    gpus, cpus, worth = _probe_plan(state, params)
    worth = bool(worth)
    runs: list[dict[str, Any]] = []
    for g, c in zip(np.asarray(gpus).tolist(), np.asarray(cpus).tolist(), strict=True):
        if not any(run["gpus"] == g and run["cpus"] == c for run in runs):
            runs.append({"gpus": g, "cpus": c, "fraction_of_epoch": PROBE_FRACTION})
    requested_gpus, requested_cpus = job.request
    return {
        "source": "probe_plan",
        "probes": runs,
        "worth_running": worth,
        "budget": PROBE_BUDGET,
        # What the job's next report keeps: left out, the request would default to the last probe's
        # allocation, which moves the throughput reference and the forecast's choice.
        "report_with": {
            "gpus": runs[-1]["gpus"],
            "cpus": runs[-1]["cpus"],
            "requested_gpus": int(requested_gpus),
            "requested_cpus": int(requested_cpus),
        },
        "then": "report each run as the job's probes ({gpus, cpus, epoch_time_s = probe time / fraction}), "
        "the job with report_with's fields (the last probe's allocation, the request as it was) and "
        "elapsed_s and cost_usd counting the probes' time and cost, and ask again",
    }
