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
  (relative to the profile's forecast for the requested allocation), and measured epoch times further
  from the profile's forecast than the hidden per-job spread, noise and contention ever put them.
  The recommendation is still given; it says it is an extrapolation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.actions import cpu_cap
from slamorl_jax.env.catalog import gpu_type_index, workload_index
from slamorl_jax.env.job_model import JobConstants, epoch_metrics, job_constants_table
from slamorl_jax.env.params import EnvParams, max_gpus
from slamorl_jax.live_encoding import measured_epochs

if TYPE_CHECKING:
    from slamorl_jax.live import LiveJob

# How many standard deviations of the per-job spread and the epoch noise count as "seen in training".
SPREAD_SIGMAS = 4.0


def _int(x: object) -> int:
    return int(np.asarray(x))


def cluster_limits(gpus: int, params: EnvParams) -> tuple[int, int, int]:
    """``(max GPUs per job, max CPUs for gpus GPUs, CPU step)`` of the cluster in ``params``."""
    most_gpus = _int(max_gpus(params))
    step = _int(params.cpu_step)
    most_cpus = _int(
        cpu_cap(jnp.int32(min(gpus, most_gpus)), params.gpus_per_node, params.cpus_per_node, params.cpu_step)
    )
    return most_gpus, most_cpus, step


def check_in_cluster(name: str | tuple[str, str], gpus: int, cpus: int, params: EnvParams) -> None:
    """Raise ``ValueError`` unless ``gpus`` GPUs and ``cpus`` CPUs fit the cluster of ``params``.

    The message starts with ``name``, the allocation's, or, given the names of its GPU and CPU
    fields (``("next_gpus", "next_cpus")``), with the name of the one at fault. The one check of an
    allocation against the cluster: live jobs, logged decisions and history records all use it."""
    gpu_name, cpu_name = (name, name) if isinstance(name, str) else name
    most_gpus, most_cpus, step = cluster_limits(gpus, params)
    per_node = _int(params.gpus_per_node)
    if gpus > most_gpus:
        raise ValueError(
            f"{gpu_name}: {gpus} GPUs is outside the policy's cluster: at most {most_gpus} GPUs per job "
            f"({per_node} per node); the policy cannot place this job"
        )
    if cpus > most_cpus:
        nodes = -(-gpus // per_node)
        raise ValueError(
            f"{cpu_name}: {cpus} CPUs with {gpus} GPUs is outside the policy's cluster: at most {most_cpus} "
            f"CPUs on {nodes} node(s) of {_int(params.cpus_per_node)}"
        )
    if cpus % step:
        raise ValueError(
            f"{cpu_name}: {cpus} CPUs is not a multiple of the policy cluster's CPU step ({step})"
        )


def _epoch_time_range(params: EnvParams) -> tuple[float, float]:
    """Measured / profile epoch time that training jobs stayed within (see the module docstring)."""
    spread = max(float(params.compute_spread), float(params.sync_spread))
    log_width = SPREAD_SIGMAS * math.hypot(spread, float(params.epoch_time_noise))
    slowdown = 1.0 + max(float(params.contention_compute_slowdown), float(params.contention_network_slowdown))
    return math.exp(-log_width), math.exp(log_width) * slowdown


def outside_training(job: LiveJob, params: EnvParams) -> tuple[str, ...]:
    """One sentence per reading of ``job`` outside the ranges the policy's training jobs were drawn
    from; empty when every reading is within them."""
    w, t = workload_index(job.workload), gpu_type_index(job.gpu_type)
    profile = jax.tree.map(lambda x: x[w, t], job_constants_table(params))
    notes = []
    low, high = _int(params.workloads.epochs_min[w]), _int(params.workloads.epochs_max[w])
    if not low <= job.epochs_total <= high:
        notes.append(f"epochs_total {job.epochs_total} is outside {low}-{high}, the epochs of {job.workload}")
    if float(params.workload_probs[w]) <= 0 or float(params.gpu_type_probs[t]) <= 0:
        notes.append(f"the policy's scenario never drew {job.workload} jobs on {job.gpu_type} GPUs")
    notes += _sla_notes(job, profile, params)
    note = _epoch_time_note(job, profile, params)
    return (*notes, *([note] if note else []))


def _sla_notes(job: LiveJob, profile: JobConstants, params: EnvParams) -> list[str]:
    """The deadline and budget against the SLA factors training jobs were drawn with."""
    gpus, cpus = job.requested_gpus or job.gpus, job.requested_cpus or job.cpus
    expected = epoch_metrics(profile, jnp.int32(gpus), jnp.int32(cpus), params)
    expected_time = job.epochs_total * float(expected.epoch_time_s)
    expected_cost = expected_time * float(expected.price_per_hour) / 3600.0
    low, high = np.asarray(params.sla_factor_low), np.asarray(params.sla_factor_high)
    notes = []
    for i, (name, value, reference) in enumerate(
        (("deadline_s", job.deadline_s, expected_time), ("budget_usd", job.budget_usd, expected_cost))
    ):
        factor = value / max(reference, 1e-12)
        lo, hi = float(low[:, i].min()), float(high[:, i].max())
        if not lo <= factor <= hi:
            notes.append(
                f"{name} is {factor:.3g}x the profile's forecast for the requested allocation; "
                f"training jobs had {lo:g}x-{hi:g}x"
            )
    return notes


def _epoch_time_note(job: LiveJob, profile: JobConstants, params: EnvParams) -> str | None:
    """The first measured epoch (or probe) further from the profile's forecast than training jobs ever
    were; a new job's readings are not measurements."""
    lo, hi = _epoch_time_range(params)
    for gpus, cpus, seconds in (*measured_epochs(job), *(job.probes or ())):
        forecast = float(epoch_metrics(profile, jnp.int32(gpus), jnp.int32(cpus), params).epoch_time_s)
        ratio = seconds / forecast
        if not lo <= ratio <= hi:
            return (
                f"an epoch on {gpus} GPUs x {cpus} CPUs took {ratio:.3g}x the {job.workload} profile's "
                f"forecast; training jobs ran within {lo:.2g}x-{hi:.2g}x"
            )
    return None
