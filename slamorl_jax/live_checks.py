"""What ``recommend`` checks about a live job against the policy it asks (``live.py``).

Two kinds of check, because the observation is relative to the policy's cluster and the policy only
knows the jobs it was trained on:

* :func:`check_in_cluster` refuses (``ValueError``) an allocation the policy's cluster cannot hold:
  more GPUs than a job may have, more CPUs than its nodes have, CPUs off the cluster's CPU step. The
  env would clip such an allocation, and the recommendation would then move the job from where the
  policy thinks it is rather than from where it is.
* :func:`outside_training` lists, one sentence each, readings outside the ranges the policy's jobs
  were drawn from (``env/job_generator.py``): epochs outside the workload's range, a workload or GPU
  type its scenario never draws, a deadline or budget outside the SLA factors of every scenario kind
  (relative to the profile's forecast for the requested allocation; the lower end times the smallest
  deadline or budget cut the scenario's events make, ``env/shifts.py``), measured epoch times further
  from the profile's forecast than the hidden per-job spread, noise and contention ever put them,
  a reported price per hour below the catalogue's for the allocation or above it by more than
  the scenario's largest price rise, and a job that has run an epoch that gives a dual-weights
  policy no ``multipliers`` (its SLA pressures then restart from 0, where the env's had already
  moved at the job's start).
  The recommendation is still given; it says it is an extrapolation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.actions import cpu_cap
from slamorl_jax.env.catalog import Catalog, gpu_type_index, load_catalog, workload_index
from slamorl_jax.env.job_model import billed_usd, epoch_metrics, job_constants_table
from slamorl_jax.env.params import WEIGHT_MODES, EnvParams, max_gpus
from slamorl_jax.env.shifts import BUDGET_CUT, DEADLINE_CUT, PRICE_RISE
from slamorl_jax.live_encoding import measured_epochs, padded_size

if TYPE_CHECKING:
    from slamorl_jax.live_job import LiveJob

# How many standard deviations of the per-job spread and the epoch noise count as "seen in training".
SPREAD_SIGMAS = 4.0


def _int(x: object) -> int:
    return int(np.asarray(x))


class ClusterLimits(NamedTuple):
    """A cluster's bounds on one allocation, and the largest dual multiplier a report may pass back,
    as host numbers (read once, checked many times)."""

    most_gpus: int  # GPUs a job may hold
    gpus_per_node: int
    cpus_per_node: int
    cpu_step: int
    cpu_caps: np.ndarray  # most CPUs a job of g GPUs may hold, at index g (0 to most_gpus)
    dual_max: float = float("inf")  # the params' cap on every dual multiplier

    @classmethod
    def of(cls, params: EnvParams) -> ClusterLimits:
        """The limits of the cluster in ``params``."""
        most_gpus = _int(max_gpus(params))
        caps = cpu_cap(jnp.arange(most_gpus + 1), params.gpus_per_node, params.cpus_per_node, params.cpu_step)
        return cls(
            most_gpus,
            _int(params.gpus_per_node),
            _int(params.cpus_per_node),
            _int(params.cpu_step),
            np.asarray(caps),
            float(params.dual_max),
        )


def check_in_cluster(
    name: str | tuple[str, str], gpus: int, cpus: int, params: EnvParams | ClusterLimits
) -> None:
    """Raise ``ValueError`` unless ``gpus`` GPUs and ``cpus`` CPUs fit the cluster of ``params`` (or
    its :class:`ClusterLimits`, read once for many checks).

    The message starts with ``name``, the allocation's, or, given the names of its GPU and CPU
    fields (``("next_gpus", "next_cpus")``), with the name of the one at fault. The one check of an
    allocation against the cluster: live jobs, logged decisions and history records all use it."""
    limits = params if isinstance(params, ClusterLimits) else ClusterLimits.of(params)
    gpu_name, cpu_name = (name, name) if isinstance(name, str) else name
    most_gpus, step, per_node = limits.most_gpus, limits.cpu_step, limits.gpus_per_node
    most_cpus = int(limits.cpu_caps[min(gpus, most_gpus)])
    if gpus > most_gpus:
        raise ValueError(
            f"{gpu_name}: {gpus} GPUs is outside the policy's cluster: at most {most_gpus} GPUs per job "
            f"({per_node} per node); the policy cannot place this job"
        )
    if cpus > most_cpus:
        nodes = -(-gpus // per_node)
        raise ValueError(
            f"{cpu_name}: {cpus} CPUs with {gpus} GPUs is outside the policy's cluster: at most {most_cpus} "
            f"CPUs on {nodes} node(s) of {limits.cpus_per_node}"
        )
    if cpus % step:
        raise ValueError(
            f"{cpu_name}: {cpus} CPUs is not a multiple of the policy cluster's CPU step ({step})"
        )


def _epoch_time_range(params: EnvParams) -> tuple[float, float]:
    """Measured / profile epoch time that training jobs stayed within (see the module docstring)."""
    spread = max(float(params.compute_spread), float(params.sync_spread))
    # The truth is drawn within +-deviation_limit_sd spreads: a wider limit widens what training saw.
    sigmas = max(SPREAD_SIGMAS, float(params.deviation_limit_sd))
    log_width = sigmas * math.hypot(spread, float(params.epoch_time_noise))
    slowdown = 1.0 + max(float(params.contention_compute_slowdown), float(params.contention_network_slowdown))
    return math.exp(-log_width), math.exp(log_width) * slowdown


def outside_training(job: LiveJob, params: EnvParams, catalog: Catalog | None = None) -> tuple[str, ...]:
    """One sentence per reading of ``job`` outside the ranges the policy's training jobs were drawn
    from; empty when every reading is within them. ``catalog``: the one the job's names are read in
    and ``params`` built on (the policy's, ``LoadedPolicy.catalog``; default: the shipped one)."""
    return outside_training_many([job], params, catalog)[0]


def uses_dual_weights(params: EnvParams) -> bool:
    """Whether ``params`` adapt the objective weights with dual multipliers (``--weights=dual``), the
    one weight mode that reads and returns a live job's ``multipliers``."""
    return int(np.asarray(params.weights_mode)) == WEIGHT_MODES.index("dual")


def outside_training_many(
    jobs: Sequence[LiveJob], params: EnvParams, catalog: Catalog | None = None
) -> list[tuple[str, ...]]:
    """:func:`outside_training` of every job of ``jobs``: the profile's forecasts the notes compare
    against (each job's requested allocation and measured runs) computed in one compiled call."""
    if not jobs:
        return []
    catalog = catalog or load_catalog()
    indices = [(workload_index(job.workload, catalog), gpu_type_index(job.gpu_type, catalog)) for job in jobs]
    runs = [(*measured_epochs(job), *(job.probes or ())) for job in jobs]
    queries = [
        (w, t, gpus, cpus)
        for job, (w, t), job_runs in zip(jobs, indices, runs, strict=True)
        for gpus, cpus in (job.request, *(r[:2] for r in job_runs), (job.gpus, job.cpus))
    ]
    epoch_s, price = _profile_forecasts(queries, params)
    host = jax.device_get(
        (
            params.workloads.epochs_min,
            params.workloads.epochs_max,
            params.workload_probs,
            params.gpu_type_probs,
        )
    )
    sla_low, sla_high = np.asarray(params.sla_factor_low), np.asarray(params.sla_factor_high)
    # A deadline or budget cut (shifts.py) takes a training job's SLA below its drawn factor.
    shift_probs, cut_sizes = np.asarray(params.shift_probs), np.asarray(params.shift_size_low)
    cuts = tuple(float(cut_sizes[k]) if shift_probs[k] > 0 else 1.0 for k in (DEADLINE_CUT, BUDGET_CUT))
    # A price rise multiplies the GPU price, so an allocation's price by at most its factor.
    rise = float(np.asarray(params.shift_size_high)[PRICE_RISE]) if shift_probs[PRICE_RISE] > 0 else 1.0
    time_range = _epoch_time_range(params)
    dual = uses_dual_weights(params)
    notes, at = [], 0
    for job, (w, t), job_runs in zip(jobs, indices, runs, strict=True):
        job_notes = []
        low, high = int(host[0][w]), int(host[1][w])
        if not low <= job.epochs_total <= high:
            job_notes.append(
                f"epochs_total {job.epochs_total} is outside {low}-{high}, the epochs of {job.workload}"
            )
        if float(host[2][w]) <= 0 or float(host[3][t]) <= 0:
            job_notes.append(f"the policy's scenario never drew {job.workload} jobs on {job.gpu_type} GPUs")
        job_notes += _sla_notes(job, float(epoch_s[at]), float(price[at]), sla_low, sla_high, cuts)
        note = _epoch_time_note(job, job_runs, epoch_s[at + 1 : at + 1 + len(job_runs)], time_range)
        listed = float(price[at + 1 + len(job_runs)])
        if job.price_per_hour is not None and not 0.99 <= job.price_per_hour / listed <= 1.01 * rise:
            job_notes.append(
                f"price_per_hour is {job.price_per_hour / listed:.3g}x the catalogue's for {job.gpus} "
                f"{job.gpu_type} GPUs x {job.cpus} CPUs; training jobs paid 1x-{rise:g}x"
            )
        # The env's reset is a reading too: a job's multipliers before its first epoch's are not 0.
        if dual and job.multipliers is None and job.epochs_done > 0:
            job_notes.append(
                "no multipliers for a dual-weights policy: its SLA pressures restart from 0 (pass back the "
                "previous answer's multipliers)"
            )
        notes.append((*job_notes, *([note] if note else [])))
        at += 2 + len(job_runs)
    return notes


def _profile_forecasts(
    queries: list[tuple[int, int, int, int]], params: EnvParams
) -> tuple[np.ndarray, np.ndarray]:
    """The profile's epoch time and price per hour for each ``(workload, GPU type, gpus, cpus)`` (host
    arrays; the queries padded to a power of two so few batch sizes compile)."""
    size = padded_size(len(queries), 8)
    padded = np.array([*queries, *[queries[0]] * (size - len(queries))], np.int32).T
    epoch_s, price = jax.device_get(_forecast_batch(params, *padded))
    return epoch_s[: len(queries)], price[: len(queries)]


@jax.jit
def _forecast_batch(
    params: EnvParams, workload: jax.Array, gpu_type: jax.Array, gpus: jax.Array, cpus: jax.Array
) -> tuple[jax.Array, jax.Array]:
    table = job_constants_table(params)

    def forecast(w: jax.Array, t: jax.Array, g: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
        metrics = epoch_metrics(jax.tree.map(lambda x: x[w, t], table), g, c, params)
        return metrics.epoch_time_s, metrics.price_per_hour

    return jax.vmap(forecast)(workload, gpu_type, gpus, cpus)


def _sla_notes(
    job: LiveJob,
    epoch_s: float,
    price_per_hour: float,
    low: np.ndarray,
    high: np.ndarray,
    cuts: tuple[float, float] = (1.0, 1.0),
) -> list[str]:
    """The deadline and budget against the SLA factors training jobs were drawn with (``low`` and
    ``high`` per scenario kind and SLA; the lower ends times ``cuts``, the smallest deadline and budget
    cut the scenario's events make, 1 without), given the profile's epoch time and price at the
    request."""
    expected_time = job.epochs_total * epoch_s
    expected_cost = billed_usd(expected_time, price_per_hour)
    notes = []
    for i, (name, value, reference) in enumerate(
        (("deadline_s", job.deadline_s, expected_time), ("budget_usd", job.budget_usd, expected_cost))
    ):
        factor = value / max(reference, 1e-12)
        lo, hi = float(low[:, i].min()) * cuts[i], float(high[:, i].max())
        if not lo <= factor <= hi:
            notes.append(
                f"{name} is {factor:.3g}x the profile's forecast for the requested allocation; "
                f"training jobs had {lo:g}x-{hi:g}x"
            )
    return notes


def _epoch_time_note(
    job: LiveJob,
    runs: Sequence[tuple[int, int, float]],
    forecasts: np.ndarray,
    time_range: tuple[float, float],
) -> str | None:
    """The first measured epoch (or probe) further from the profile's forecast (``forecasts``, one per
    run) than training jobs ever were; a new job's readings are not measurements."""
    lo, hi = time_range
    for (gpus, cpus, seconds), forecast in zip(runs, forecasts, strict=True):
        ratio = seconds / float(forecast)
        if not lo <= ratio <= hi:
            return (
                f"an epoch on {gpus} GPUs x {cpus} CPUs took {ratio:.3g}x the {job.workload} profile's "
                f"forecast; training jobs ran within {lo:.2g}x-{hi:.2g}x"
            )
    return None
