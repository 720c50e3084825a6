"""Job-level figures of an episode: total time and cost, the six job-level SLA checks, utilisation."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env.sla import slas_met
from slamorl_jax.env.state import EnvState

Info = dict[str, jax.Array]

# The keys of :func:`episode_figures`, in its order: the figures the Gymnasium wrapper hands on as
# ``info`` (``gym/batched.py``; a test checks they match).
FIGURE_NAMES = (
    "episode_time_s",
    "episode_cost_usd",
    "time_ref_s",
    "cost_ref_usd",
    "deadline_met",
    "budget_met",
    "job_sla_met",
    "all_slas_met",
    "sla_compliance",
    "mean_severity",
    "mean_gpu_util",
    "mean_cpu_util",
    "reallocations",
    "epochs",
    "workload",
    "gpu_type",
    "scenario",
    "preference",
)


def episode_figures(state: EnvState) -> Info:
    """Job-level figures of the episode so far (final once the job terminates)."""
    job = state.job
    targets = job.sla_targets
    elapsed = jnp.maximum(state.elapsed_s, 1e-9)
    done_samples = state.epoch.astype(jnp.float32) * job.constants.samples_per_epoch
    mean_gpu_util = state.gpu_busy_s / elapsed
    mean_cpu_util = state.cpu_busy_s / elapsed
    job_met = slas_met(
        state.elapsed_s,
        state.cost_usd,
        done_samples / elapsed,
        state.peak_memory_gib,
        mean_gpu_util,
        mean_cpu_util,
        targets,
    )
    return {
        "episode_time_s": state.elapsed_s,
        "episode_cost_usd": state.cost_usd,
        "time_ref_s": job.time_ref_s,
        "cost_ref_usd": job.cost_ref_usd,
        "deadline_met": job_met[0],
        "budget_met": job_met[1],
        "job_sla_met": job_met,
        "all_slas_met": jnp.all(job_met),
        "sla_compliance": jnp.mean(job_met.astype(jnp.float32)),
        "mean_severity": state.severity_sum / jnp.maximum(state.epoch, 1).astype(jnp.float32),
        "mean_gpu_util": mean_gpu_util,
        "mean_cpu_util": mean_cpu_util,
        "reallocations": state.reallocations,
        "epochs": job.epochs,
        "workload": job.workload,
        "gpu_type": job.gpu_type,
        "scenario": job.scenario,
        "preference": job.preference,
    }
