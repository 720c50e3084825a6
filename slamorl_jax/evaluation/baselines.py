"""Static baselines as start rules: where a job starts, to keep that allocation for its whole run.

A start rule is ``rule(state, params) -> (gpus, cpus)`` for one fresh job (``episodes.StartRule``);
``JobAllocationEnv.place`` clips the result to the cluster. Run with the no-op policy
(``episodes.keep_allocation``) a rule is a static allocation.

* :func:`requested`: the user's request (the static baseline the env's rewards are scaled by).
* :func:`minimum`: 1 GPU and one CPU step (the cold start).
* :func:`maximum`: every GPU and CPU a job may hold: the reference code's static baseline
  ("all GPUs + all CPUs", reference notes §11.2).
* :func:`reference_heuristic`: the reference code's ``estimate_optimal_resources`` (L1479-1624 of
  ``main-rl-slamorl.py``, reference notes §11.2), applied once to the request with the request's
  expected GPU utilisation, as the code applies it once before its optimised run.
* :class:`BestStatic`: the best static allocation in hindsight, per job (the oracle;
  ``env/best_static.py``, where the history store and the demonstrations, below evaluation, take it).
* :class:`ProfileBestStatic`: the same choice made from what a platform knows before the job runs,
  then run on the truth: the workload's profile instead of the job's hidden constants
  (``env/job_truth.py``), and no mid-run event (``env/shifts.py``; no one knows one before it
  happens), so it plans against the job's SLAs as they stand at the start. On jobs without events
  (the headline's deadline-critical and budget-constrained ones) it is what the hidden constants
  cost a static choice; on ``shifting`` jobs also what not foreseeing the event costs it.

The oracle knows the simulator's noise-free model of the job: over every allocation of the lattice
it computes the job's expected total time and cost (epochs x epoch time, no pauses; with a mid-run
event, ``env/shifts.py``, the run through it: ``env/plans.py``), throughput, memory and utilisations,
and picks the allocation that meets the most of the six job-level SLAs,
ties broken by the lowest preference-weighted time and cost relative to the request,
``(w_time T / T_ref + w_cost C / C_ref) / (w_time + w_cost)``. It does not see the epoch noise or
the contention of the actual run, so a policy can beat it on a job, but not on average by much.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from slamorl_jax.env.best_static import BestStatic, expected_static_outcomes
from slamorl_jax.env.job_model import epoch_metrics
from slamorl_jax.env.params import EnvParams, max_gpus
from slamorl_jax.env.shifts import NONE as NO_EVENT
from slamorl_jax.env.state import EnvState

__all__ = [
    "BestStatic",
    "ProfileBestStatic",
    "expected_static_outcomes",
    "maximum",
    "minimum",
    "reference_heuristic",
    "requested",
]

# Thresholds and steps of the reference code's heuristic (utilisation as a fraction, CPUs as counts).
HEURISTIC_TIME_UTIL = 0.70  # time: scale up when the GPUs are busier than this
HEURISTIC_TIME_UP = (2, 8)  # ... by 2 GPUs and 8 CPUs; otherwise only +4 CPUs
HEURISTIC_TIME_CPUS_ONLY = 4
HEURISTIC_COST_IDLE_UTIL = 0.05  # cost: drop to 1 GPU below this utilisation
HEURISTIC_COST_LOW_UTIL = 0.50  # cost: drop one GPU below this one
HEURISTIC_COST_CPU_CUT = 4  # cost: 4 fewer CPUs when throughput exceeds its minimum by ...
HEURISTIC_COST_THROUGHPUT_MARGIN = 1.5  # ... this factor
# Our mapping of a preference vector to the code's option (its presets put 0.6 on one objective):
# "time" when w_time >= 1.5 w_cost, "cost" when w_cost >= 1.5 w_time, otherwise "balanced".
HEURISTIC_DOMINANCE = 1.5


def _int(x: jax.Array | int) -> jax.Array:
    return jnp.asarray(x, jnp.int32)


def requested(state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """The user's requested allocation."""
    return _int(state.job.requested_gpus), _int(state.job.requested_cpus)


def minimum(state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """One GPU and one CPU step."""
    return _int(1), _int(params.cpu_step)


def maximum(state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """Every GPU a job may hold and every CPU of their nodes (CPUs are clipped by ``place``)."""
    return _int(max_gpus(params)), _int(1 << 20)


def reference_heuristic(state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """The reference code's one-shot heuristic option for the job's preference, from its request.

    The code reads the GPU utilisation and throughput it measured; here they are the job's own
    noise-free ones at the request (its hidden constants: what a measured epoch there shows, less
    the noise), so the heuristic is judged on its rule, not on a profile's error."""
    job = state.job
    gpus, cpus = requested(state, params)
    m = epoch_metrics(job.constants, gpus, cpus, params)
    util = m.gpu_util
    w_time, w_cost = job.preference[0], job.preference[1]
    wants_time = w_time >= HEURISTIC_DOMINANCE * w_cost
    wants_cost = jnp.logical_and(jnp.logical_not(wants_time), w_cost >= HEURISTIC_DOMINANCE * w_time)

    scale_up = jnp.logical_and(util > HEURISTIC_TIME_UTIL, gpus < max_gpus(params))
    time_gpus = jnp.where(scale_up, gpus + HEURISTIC_TIME_UP[0], gpus)
    time_cpus = jnp.where(scale_up, cpus + HEURISTIC_TIME_UP[1], cpus + HEURISTIC_TIME_CPUS_ONLY)

    several = gpus > 1
    cost_gpus = jnp.where(
        jnp.logical_and(util < HEURISTIC_COST_IDLE_UTIL, several),
        1,
        jnp.where(jnp.logical_and(util < HEURISTIC_COST_LOW_UTIL, several), gpus - 1, gpus),
    )
    fast_enough = m.throughput > HEURISTIC_COST_THROUGHPUT_MARGIN * job.sla_targets.min_throughput
    cost_cpus = jnp.where(fast_enough, cpus - HEURISTIC_COST_CPU_CUT, cpus)

    out_gpus = jnp.where(wants_time, time_gpus, jnp.where(wants_cost, cost_gpus, gpus))
    out_cpus = jnp.where(wants_time, time_cpus, jnp.where(wants_cost, cost_cpus, cpus))
    return _int(out_gpus), _int(out_cpus)


@dataclasses.dataclass(frozen=True)
class ProfileBestStatic:
    """:class:`BestStatic`'s choice with the job's profile in place of its true constants and no
    mid-run event (module docstring)."""

    oracle: BestStatic

    @classmethod
    def for_params(cls, params: EnvParams) -> ProfileBestStatic:
        """The rule over every allocation that actions can reach under ``params``."""
        return cls(BestStatic.for_params(params))

    def __call__(self, state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
        """The allocation the profile says is best for the job as it starts (it then runs on its
        truth, event included)."""
        no_event = jnp.full_like(state.job.shift_kind, NO_EVENT)
        known = state.job.replace(constants=state.job.profile, shift_kind=no_event)
        return self.oracle(state.replace(job=known), params)
