"""A live job's report as fixed-shape arrays, and the env state the policy sees for it.

:func:`encode` turns a :class:`slamorl_jax.live_job.LiveJob` (Python values, optional readings, runs of
any number) into a :class:`JobReport` of NumPy arrays: every optional value with a flag saying
whether the job gave it, and the runs the online model learns from (probes, then the measured
epochs: ``measured_epochs``) padded to a fixed length with a mask. :func:`state_from_report` is a
pure, jittable function of one report; under ``vmap`` it builds the states of many jobs in one
compiled call, which is how ``live.recommend_many`` answers a whole cluster's jobs at once.
:func:`live_state` is the one-job form every live tool uses (``recommend``, ``live_start``,
``live_slas``, ``history.demonstrations``), so a job gets the same state alone or in a batch.

The state holds what the env's own formulas make of the report (``job_env.epoch_readings``:
forward-looking severities, adaptive weights; ``online_model``: the job's corrected forecasts), with
the job's unknown true constants replaced by its workload's profile (no observation reads them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.catalog import Catalog, gpu_type_index, load_catalog, workload_index
from slamorl_jax.env.epoch_readings import epoch_readings
from slamorl_jax.env.job_model import (
    EpochMetrics,
    JobConstants,
    epoch_metrics,
    gpu_price_of,
    job_constants_table,
)
from slamorl_jax.env.objectives import preference_vector
from slamorl_jax.env.online_model import empty_stats, epoch_surprise, record_epoch
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.probes import probe_busy_s
from slamorl_jax.env.state import EnvState, JobSpec, SlaTargets, check_state
from slamorl_jax.live_job import READINGS, LiveJob

SLA_FIELDS = ("deadline_s", "budget_usd", "min_throughput", "max_memory_gib", "min_gpu_util", "min_cpu_util")
# Job-so-far figures a job may give (default: the last epoch's, see ``live_job.py``).
SO_FAR = ("mean_gpu_util", "mean_cpu_util", "peak_memory_gib")
# Runs are padded to a power of two at least this long, so few lengths compile.
MIN_RUNS = 8


class JobReport(NamedTuple):
    """A live job as arrays (one job: scalars and short vectors; a batch: a leading job axis)."""

    workload: np.ndarray  # int32 catalogue index
    gpu_type: np.ndarray  # int32
    allocation: np.ndarray  # int32 (gpus, cpus)
    requested: np.ndarray  # int32 (gpus, cpus); the current allocation when the job gave none
    epochs: np.ndarray  # int32 (done, total)
    spent: np.ndarray  # float32 (elapsed_s, cost_usd)
    slas: np.ndarray  # float32 [6] in SLA_FIELDS order
    preference: np.ndarray  # float32 [3]
    readings: np.ndarray  # float32 [len(READINGS)] (0 where left out)
    has_readings: np.ndarray  # bool [len(READINGS)]
    so_far: np.ndarray  # float32 [len(SO_FAR)] (0 where left out)
    has_so_far: np.ndarray  # bool [len(SO_FAR)]
    reference_throughput: np.ndarray  # float32 (0 when left out)
    has_reference: np.ndarray  # bool
    run_allocation: np.ndarray  # int32 [R, 2]: probes, then the measured epochs, then padding
    run_seconds: np.ndarray  # float32 [R]
    run_valid: np.ndarray  # bool [R]
    multipliers: np.ndarray  # float32 [6]: the dual multipliers before this report (0 when left out)


def measured_epochs(job: LiveJob) -> tuple[tuple[int, int, float], ...]:
    """The epochs the online model learns from: ``history``, or the last epoch alone when none is
    given (and none at all before the first epoch)."""
    if job.history is not None:
        return job.history
    return ((job.gpus, job.cpus, job.last_epoch_time_s),) if job.epochs_done > 0 else ()


def runs_of(job: LiveJob) -> tuple[tuple[int, int, float], ...]:
    """Every run the online model learns from, in the order the env measures them: the probes, then
    the measured epochs."""
    return (*(job.probes or ()), *measured_epochs(job))


def padded_size(count: int, least: int = 1) -> int:
    """``count`` rounded up to a power of two, at least ``least``: arrays padded to it compile for
    few shapes."""
    return max(least, 1 << max(count - 1, 0).bit_length())


def runs_length(count: int) -> int:
    """The padded length of ``count`` runs: :func:`padded_size`, at least ``MIN_RUNS``."""
    return padded_size(count, MIN_RUNS)


def encode(job: LiveJob, catalog: Catalog | None = None, length: int | None = None) -> JobReport:
    """``job`` as a :class:`JobReport` with its runs padded to ``length`` (default
    :func:`runs_length` of its own); ``ValueError`` for an unknown workload or GPU type."""
    catalog = catalog or load_catalog()
    runs = runs_of(job)
    length = runs_length(len(runs)) if length is None else length
    if length < len(runs):
        raise ValueError(f"{len(runs)} runs do not fit a report of {length}")
    padding = length - len(runs)
    allocation = [(gpus, cpus) for gpus, cpus, _ in runs] + [(job.gpus, job.cpus)] * padding

    def optional(names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        values = [getattr(job, name) for name in names]
        return (
            np.array([0.0 if v is None else v for v in values], np.float32),
            np.array([v is not None for v in values]),
        )

    readings, has_readings = optional(READINGS)
    so_far, has_so_far = optional(SO_FAR)
    return JobReport(
        workload=np.int32(workload_index(job.workload, catalog)),
        gpu_type=np.int32(gpu_type_index(job.gpu_type, catalog)),
        allocation=np.array([job.gpus, job.cpus], np.int32),
        requested=np.array(job.request, np.int32),
        epochs=np.array([job.epochs_done, job.epochs_total], np.int32),
        spent=np.array([job.elapsed_s, job.cost_usd], np.float32),
        slas=np.array([getattr(job, name) for name in SLA_FIELDS], np.float32),
        preference=np.asarray(preference_vector(job.preference), np.float32),
        readings=readings,
        has_readings=has_readings,
        so_far=so_far,
        has_so_far=has_so_far,
        reference_throughput=np.float32(job.reference_throughput or 0.0),
        has_reference=np.bool_(job.reference_throughput is not None),
        run_allocation=np.array(allocation, np.int32).reshape(length, 2),
        run_seconds=np.array([s for _, _, s in runs] + [1.0] * padding, np.float32),
        run_valid=np.arange(length) < len(runs),
        multipliers=np.array(job.multipliers or (0.0,) * len(SLA_FIELDS), np.float32),
    )


def encode_many(jobs: list[LiveJob], catalog: Catalog | None = None, size: int | None = None) -> JobReport:
    """The reports of ``jobs`` stacked on a leading axis, their runs padded to one length, and the
    batch padded to ``size`` rows with copies of the first (default: no padding); ``ValueError`` for
    no jobs."""
    if not jobs:
        raise ValueError("no jobs to encode")
    catalog = catalog or load_catalog()
    length = runs_length(max(len(runs_of(job)) for job in jobs))
    reports = [encode(job, catalog, length) for job in jobs]
    reports += reports[:1] * ((size or len(reports)) - len(reports))
    return JobReport(*(np.stack(field) for field in zip(*reports, strict=True)))


def reported_metrics(report: JobReport, forecast: EpochMetrics) -> EpochMetrics:
    """The job's last-epoch readings as ``EpochMetrics``, each reading it left out (a new job) taken
    from ``forecast``, the profile's at its allocation (the env's reset does the same)."""
    names = ("epoch_time_s", *READINGS[1:])  # EpochMetrics calls the epoch's time epoch_time_s
    return forecast.replace(
        **{
            name: jnp.where(report.has_readings[i], report.readings[i], getattr(forecast, name))
            for i, name in enumerate(names)
        }
    )


def learn_runs(
    report: JobReport, profile: JobConstants, params: EnvParams
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """The online model's statistics after the job's runs, the last run's surprise against the model
    of the runs before it, the largest memory the profile forecasts for a run, and the busy GPU and
    CPU seconds of the runs counted as probes (the profile's utilisation over
    ``PROBE_FRACTION`` of each run's epoch time, as ``probes.run_probes`` counts them; read only
    before the first epoch, when every run is a probe): ``(stats, surprise, peak_gib, gpu_busy_s,
    cpu_busy_s)``."""

    def learn(carry: tuple[jax.Array, ...], run: tuple) -> tuple[tuple, None]:
        stats, _, peak, gpu_busy, cpu_busy = carry
        allocation, seconds, valid = run
        forecast = epoch_metrics(profile, allocation[0], allocation[1], params)
        measured = (seconds, forecast.epoch_time_s, forecast.compute_share, forecast.sync_share)
        busy_gpu_s, busy_cpu_s = probe_busy_s(forecast, seconds)
        learnt = (
            record_epoch(stats, *measured),
            epoch_surprise(stats, *measured, params),
            jnp.maximum(peak, forecast.memory_used_gib),
            gpu_busy + busy_gpu_s,
            cpu_busy + busy_cpu_s,
        )
        return tuple(jnp.where(valid, new, old) for new, old in zip(learnt, carry, strict=True)), None

    zero = jnp.zeros((), jnp.float32)
    runs = (report.run_allocation, report.run_seconds, report.run_valid)
    return jax.lax.scan(learn, (empty_stats(), zero, zero, zero, zero), runs)[0]


def state_from_report(report: JobReport, params: EnvParams) -> EnvState:
    """The env state the policy would see for one job's ``report`` on ``params``' cluster (pure and
    jittable; ``vmap`` it over a batch of reports)."""
    zero = jnp.zeros((), jnp.float32)
    listed = jax.tree.map(lambda x: x[report.workload, report.gpu_type], job_constants_table(params))
    gpus, cpus = report.allocation[0], report.allocation[1]
    # The GPU price the job pays: its measured price where it reports one (a price rise reprices every
    # allocation the forecast compares, as the env's event does), else the catalogue's.
    paid = report.readings[READINGS.index("price_per_hour")]
    profile = listed.replace(
        gpu_price_per_hour=jnp.where(
            report.has_readings[READINGS.index("price_per_hour")],
            gpu_price_of(paid, gpus.astype(jnp.float32), cpus.astype(jnp.float32), params),
            listed.gpu_price_per_hour,
        )
    )
    done, total = report.epochs[0], report.epochs[1]
    elapsed, cost = report.spent[0], report.spent[1]
    at_request = epoch_metrics(profile, report.requested[0], report.requested[1], params)
    spec = JobSpec(
        workload=report.workload,
        gpu_type=report.gpu_type,
        scenario=jnp.int32(0),
        epochs=total,
        constants=profile,
        profile=profile,
        deviation=jnp.zeros((2,), jnp.float32),
        requested_gpus=report.requested[0],
        requested_cpus=report.requested[1],
        preference=report.preference,
        sla_targets=SlaTargets(*(report.slas[i] for i in range(len(SLA_FIELDS)))),
        time_ref_s=zero,
        cost_ref_usd=zero,
        throughput_ref=jnp.where(report.has_reference, report.reference_throughput, at_request.throughput),
        shift_kind=jnp.int32(0),  # a live job's world changes in its reports, not by a drawn event
        shift_epoch=total,
        shift_value=zero,
    )
    now = epoch_metrics(profile, gpus, cpus, params)
    metrics = reported_metrics(report, now)
    readings = epoch_readings(
        spec,
        metrics,
        metrics.epoch_time_s,
        metrics.throughput,
        metrics.gpu_util,
        metrics.cpu_util,
        elapsed,
        cost,
        done,
        params,
        report.multipliers,
    )
    # Probes first, then the epochs, as the env measures them; the surprise is the last epoch's
    # against the model of everything measured before it (online_model.epoch_surprise), 0 before
    # the first epoch. A new job's peak memory is what its probes used (the env's reset: 0 without),
    # and its busy time their run time at the profile's utilisation (pauses are idle, as in the env).
    stats, surprise, run_peak, probe_gpu_s, probe_cpu_s = learn_runs(report, profile, params)
    started = done > 0
    probe_share = 1.0 / jnp.maximum(elapsed, 1e-9)
    mean_gpu, mean_cpu, peak = (
        jnp.where(report.has_so_far[i], report.so_far[i], default)
        for i, default in enumerate(
            (
                jnp.where(started, metrics.gpu_util, jnp.minimum(probe_gpu_s * probe_share, 1.0)),
                jnp.where(started, metrics.cpu_util, jnp.minimum(probe_cpu_s * probe_share, 1.0)),
                jnp.where(started, metrics.memory_used_gib, run_peak),
            )
        )
    )
    return EnvState(
        job=spec,
        steps=done,
        epoch=done,
        gpus=gpus,
        cpus=cpus,
        contended=jnp.zeros((), bool),
        event_left=jnp.zeros((), bool),
        elapsed_s=elapsed,
        cost_usd=cost,
        **readings,
        gpu_busy_s=mean_gpu * elapsed,
        cpu_busy_s=mean_cpu * elapsed,
        peak_memory_gib=peak,
        reallocations=jnp.int32(0),
        severity_sum=zero,
        profile_now=now,
        model_stats=stats,
        surprise=jnp.where(done > 0, surprise, zero),
    )


_state_from_report = jax.jit(state_from_report)
states_from_reports = jax.jit(jax.vmap(state_from_report, in_axes=(0, None)))


def live_state(job: LiveJob, params: EnvParams, catalog: Catalog | None = None) -> EnvState:
    """The env state the policy would see for ``job`` on ``params``' cluster (fields no observation
    reads, such as the job's unknown true constants, hold its profile or zero)."""
    return _state_from_report(encode(job, catalog), params)


def live_states(
    jobs: list[LiveJob], params: EnvParams, catalog: Catalog | None = None, size: int | None = None
) -> EnvState:
    """:func:`live_state` of every job in ``jobs``, batched on a leading axis (one compiled call),
    padded to ``size`` rows with copies of the first job (default: none)."""
    return states_from_reports(encode_many(jobs, catalog, size), params)


def job_description(state: EnvState, catalog: Catalog | None = None) -> dict[str, Any]:
    """What the job of one env state (unbatched) is, in the fields of a report (:class:`LiveJob`):
    workload and GPU type by name, allocation, request, epochs, SLA targets and preference; no
    progress or readings (a simulated job reported to ``recommend`` or logged as a decision adds them)."""
    check_state(state, batched_use="describe one job of it: jax.tree.map(lambda x: x[i], state)")
    catalog = catalog or load_catalog()
    job = jax.device_get(state.job)
    targets = job.sla_targets
    return {
        "workload": catalog.workload_names[int(job.workload)],
        "gpu_type": catalog.gpu_types[int(job.gpu_type)],
        "gpus": int(state.gpus),
        "cpus": int(state.cpus),
        "epochs_total": int(job.epochs),
        "requested_gpus": int(job.requested_gpus),
        "requested_cpus": int(job.requested_cpus),
        "deadline_s": float(targets.deadline_s),
        "budget_usd": float(targets.budget_usd),
        "min_throughput": float(targets.min_throughput),
        "max_memory_gib": float(targets.max_memory_gib),
        "min_gpu_util": float(targets.min_gpu_util),
        "min_cpu_util": float(targets.min_cpu_util),
        "preference": [float(w) for w in job.preference],
    }


def reported_job(
    state: EnvState,
    catalog: Catalog | None = None,
    history: Sequence[tuple[int, int, float]] | None = None,
    multipliers: Sequence[float] | None = None,
) -> LiveJob:
    """What the job of one env state (unbatched) would report to ``recommend``: what it is
    (:func:`job_description`), its progress and spend, and, once it has run an epoch, the last
    epoch's readings and its job-so-far figures (a job before its first epoch reports none, as a
    new job may); ``history`` is its measured epochs (default: the last epoch alone) and
    ``multipliers`` its dual multipliers before the last epoch's reading (the state before its step;
    default: none, as at a first reading).

    A simulated platform's report: ``recommend`` on it sees the env's own observation of the job
    (``tests/test_live.py``)."""
    s = jax.device_get(state)
    described = job_description(s, catalog)
    job = {**described, "preference": tuple(described["preference"]), "epochs_done": int(s.epoch)}
    if int(s.epoch) == 0:
        return LiveJob(**job)
    elapsed = float(s.elapsed_s)
    return LiveJob(
        **job,
        elapsed_s=elapsed,
        cost_usd=float(s.cost_usd),
        last_epoch_time_s=float(s.epoch_time_s),
        throughput=float(s.throughput),
        gpu_util=float(s.gpu_util),
        cpu_util=float(s.cpu_util),
        memory_used_gib=float(s.memory_used_gib),
        memory_alloc_gib=float(s.memory_used_gib / s.memory_util),
        price_per_hour=float(s.price_per_hour),
        history=None if history is None else tuple(history),
        mean_gpu_util=float(s.gpu_busy_s) / elapsed,
        mean_cpu_util=float(s.cpu_busy_s) / elapsed,
        peak_memory_gib=float(s.peak_memory_gib),
        multipliers=None if multipliers is None else tuple(float(m) for m in np.asarray(multipliers)),
    )
