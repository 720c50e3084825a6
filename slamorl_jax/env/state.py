"""``EnvState``: one running training job (flax dataclass of fixed-shape arrays)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from slamorl_jax.env.job_model import EpochMetrics, JobConstants


@struct.dataclass
class SlaTargets:
    """The six SLA limits of a job (order of ``objectives.SLA_NAMES``)."""

    deadline_s: jax.Array
    budget_usd: jax.Array
    min_throughput: jax.Array  # samples per second
    max_memory_gib: jax.Array
    min_gpu_util: jax.Array
    min_cpu_util: jax.Array

    def as_array(self) -> jax.Array:
        """The six limits stacked on a last axis."""
        return jnp.stack(
            [
                self.deadline_s,
                self.budget_usd,
                self.min_throughput,
                self.max_memory_gib,
                self.min_gpu_util,
                self.min_cpu_util,
            ],
            axis=-1,
        )


@struct.dataclass
class JobSpec:
    """What the job generator drew at reset; constant for the whole episode."""

    workload: jax.Array  # int32 index into the catalogue
    gpu_type: jax.Array  # int32 index into catalogue.gpu_types
    scenario: jax.Array  # int32 scenario kind (scenarios.SCENARIO_KINDS)
    epochs: jax.Array  # int32 epochs of the job = decisions of the episode
    constants: JobConstants  # the job's TRUE constants: hidden from the agent (job_truth.py)
    profile: JobConstants  # its workload's calibrated profile on this GPU type: what the agent knows
    deviation: jax.Array  # (2,) hidden log deviations of the true compute and sync terms
    requested_gpus: jax.Array  # int32: the user's static request
    requested_cpus: jax.Array  # int32
    preference: jax.Array  # (3,) objective weights the user asked for
    sla_targets: SlaTargets
    time_ref_s: jax.Array  # true job time at the requested allocation (noise- and contention-free)
    cost_ref_usd: jax.Array  # the same in dollars (reward scale and evaluation reference)
    throughput_ref: jax.Array  # samples/s the profile forecasts at the request (agent-visible)
    # The job's mid-run event (shifts.py; kind 0 = none): it happens at the end of epoch
    # ``shift_epoch`` and sets ``shift_value`` (a new deadline or budget, or a factor / share).
    shift_kind: jax.Array  # int32 index into shifts.SHIFT_KINDS
    shift_epoch: jax.Array  # int32
    shift_value: jax.Array


@struct.dataclass
class EnvState:
    """Job spec plus progress, allocation, last epoch's readings and episode accumulators."""

    job: JobSpec
    steps: jax.Array  # int32 decisions taken in this episode
    epoch: jax.Array  # int32 epochs completed
    gpus: jax.Array  # int32 current allocation
    cpus: jax.Array  # int32
    contended: jax.Array  # bool: noisy neighbour / congested network this epoch
    event_left: jax.Array  # bool: the job left the nodes its event slowed (shifts.py)
    elapsed_s: jax.Array
    cost_usd: jax.Array
    # Last epoch's readings (at reset: the noise-free expectation for the initial allocation).
    epoch_time_s: jax.Array
    throughput: jax.Array
    gpu_util: jax.Array
    cpu_util: jax.Array
    memory_util: jax.Array
    memory_used_gib: jax.Array
    price_per_hour: jax.Array
    severities: jax.Array  # (6,)
    weights: jax.Array  # (3,) adaptive weights for the current observation
    multipliers: jax.Array  # (6,) per-SLA dual multipliers (dual_weights.py; 0 at a job's start)
    projected_remaining_time_s: jax.Array  # remaining epochs x last epoch time
    projected_remaining_cost_usd: jax.Array  # the same in dollars at the current price
    # The job's online model (online_model.py): the profile's forecast for the current allocation
    # and the sufficient statistics of every epoch measured so far.
    profile_now: EpochMetrics
    model_stats: jax.Array  # (5,) see online_model.MODEL_STATS
    # log(last epoch's measured time / the online model's forecast of it before it ran); 0 at reset.
    surprise: jax.Array
    # Episode accumulators for the job-level figures.
    gpu_busy_s: jax.Array  # integral of GPU utilisation over time
    cpu_busy_s: jax.Array
    peak_memory_gib: jax.Array
    reallocations: jax.Array  # int32
    severity_sum: jax.Array  # sum over epochs of the mean severity

    @property
    def time(self) -> jax.Array:
        """gymnax's name for the decision counter of the episode (``steps``; not wall-clock time)."""
        return self.steps


def check_state(
    state: object,
    batch: int | None = None,
    batched_use: str = "step a batch with env.step_batch or jax.vmap(env.step)",
) -> None:
    """``TypeError`` unless ``state`` is an :class:`EnvState`; ``ValueError`` unless it holds one env
    (``batch=None``) or a batch of ``batch`` envs on its leading axis; ``batched_use`` says what to do
    with a batch given where one env is expected.

    Types and shapes are static, so under ``jit`` this runs once at trace time and costs a compiled
    step nothing; without it a wrong state fails deep in the step (``'NoneType' object has no
    attribute 'job'``, a broadcasting error for a batched state given to ``step``)."""
    if not isinstance(state, EnvState):
        raise TypeError(f"state must be the EnvState that reset or step returned, got {type(state).__name__}")
    shape = jnp.shape(state.epoch)
    if batch is None and shape != ():
        raise ValueError(f"state holds a batch of envs (epoch shape {shape}): {batched_use}")
    if batch is not None and shape != (batch,):
        raise ValueError(
            f"state must hold one env per key ({batch} on its leading axis); its epoch has shape {shape}"
        )
