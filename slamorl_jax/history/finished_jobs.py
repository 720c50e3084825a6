"""History records from a platform's own finished jobs: the reports ``recommend`` reads, at their end.

A finished job is a job report (``live_job.LiveJob``, the JSON ``recommend --job`` takes) whose
``epochs_done`` equals its ``epochs_total``. Its record holds what the job was (workload, GPU type,
epochs, deadline, budget, preference) and an allocation it measurably ran on:

* ``recorded="longest"`` (the default): the allocation of the longest stretch of consecutive epochs
  its ``history`` lists (the later stretch on a tie), where the job settled: the same rule as
  ``history build --source=policy`` applies to simulated jobs (``episodes``' longest stretch);
* ``recorded="final"``: the allocation it ran its last epoch on (``gpus``, ``cpus``).

A report without a ``history`` records its last allocation either way (nothing else was measured).
Nothing is taken from hindsight or from a model: a store of these records is what the platform saw.

A record reads none of the last epoch's readings (``live_encoding.READINGS``: utilisations, memory,
price), which a platform's log of finished jobs may not keep: :func:`with_unread_readings` fills the
ones a report leaves out with values nobody reads (the last epoch's time from its ``history``, else
its mean epoch), so the report passes the checks every job report gets; the ones it gives are kept
and checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from slamorl_jax.env.objectives import preference_vector
from slamorl_jax.history.names import RECORDED
from slamorl_jax.history.records import HistoryRecord, record_from_mapping
from slamorl_jax.live_checks import check_in_cluster

if TYPE_CHECKING:
    from slamorl_jax.env.catalog import Catalog
    from slamorl_jax.env.params import EnvParams
    from slamorl_jax.live_checks import ClusterLimits
    from slamorl_jax.live_job import LiveJob


def longest_stretch(allocations: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The allocation of the longest run of equal consecutive ``(gpus, cpus)`` entries, the later run
    on a tie; ``ValueError`` for no entries."""
    if not allocations:
        raise ValueError("no allocations: a job that ran no epoch has no stretch")
    best, best_length, length = allocations[0], 0, 0
    for i, allocation in enumerate(allocations):
        length = length + 1 if i and allocation == allocations[i - 1] else 1
        if length >= best_length:
            best, best_length = allocation, length
    return best


# What a left-out reading is set to in a finished report (never read; each passes the report checks).
UNREAD_READINGS = {
    "throughput": 0.0,
    "gpu_util": 0.0,
    "cpu_util": 0.0,
    "memory_used_gib": 0.0,
    "memory_alloc_gib": 1.0,
    "price_per_hour": 0.0,
}


def with_unread_readings(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` (a job report's JSON object) with the last epoch's readings it leaves out filled
    (module docstring), for any report of a job that has run an epoch, so a running one is refused
    as not finished rather than for readings ingest does not read; a report of no epoch is returned
    as it is. Filled values never contradict given ones (a memory allocation at least the memory
    used), and an epoch time is filled only where the report's own figures give a positive one."""
    done = report.get("epochs_done")
    if not _is_number(done) or done < 1:
        return report
    filled = dict(report)
    if filled.get("last_epoch_time_s") is None:
        history, elapsed = filled.get("history"), filled.get("elapsed_s")
        if isinstance(history, list) and history:
            last = history[-1].get("epoch_time_s") if isinstance(history[-1], dict) else None
        else:
            last = elapsed / done if _is_number(elapsed) else None
        if _is_number(last) and last > 0:
            filled["last_epoch_time_s"] = last
    for name, value in UNREAD_READINGS.items():
        if filled.get(name) is None:
            filled[name] = value
    if report.get("memory_alloc_gib") is None:  # at least what the report says was used
        used = [v for v in (filled.get("memory_used_gib"), filled.get("peak_memory_gib")) if _is_number(v)]
        filled["memory_alloc_gib"] = max([UNREAD_READINGS["memory_alloc_gib"], *used])
    return filled


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def record_from_finished_job(
    job: LiveJob,
    recorded: str = "longest",
    catalog: Catalog | None = None,
    cluster: EnvParams | ClusterLimits | None = None,
) -> HistoryRecord:
    """The history record of the finished ``job`` (module docstring); ``ValueError`` for a job still
    running, an unknown ``recorded``, or a record :func:`~slamorl_jax.history.records.load_records`
    would refuse (given a ``cluster``, an allocation outside it)."""
    if recorded not in RECORDED:
        raise ValueError(f"recorded must be one of {', '.join(RECORDED)}, got {recorded!r}")
    if job.epochs_done != job.epochs_total:
        raise ValueError(
            f"has not finished ({job.epochs_done} of {job.epochs_total} epochs): a history record is a "
            "finished job"
        )
    gpus, cpus, which = job.gpus, job.cpus, "its last allocation (gpus, cpus)"
    if recorded == "longest" and job.history:
        gpus, cpus = longest_stretch([(g, c) for g, c, _ in job.history])
        which = "its history's longest stretch"
    if cluster is not None:  # named by the report's fields, not the record's
        check_in_cluster(which, gpus, cpus, cluster)
    fields = {
        "workload": job.workload,
        "gpu_type": job.gpu_type,
        "epochs": job.epochs_total,
        "deadline_s": job.deadline_s,
        "budget_usd": job.budget_usd,
        "preference": [float(w) for w in preference_vector(job.preference)],
        "best_gpus": gpus,
        "best_cpus": cpus,
    }
    return record_from_mapping(fields, "its record", catalog)
