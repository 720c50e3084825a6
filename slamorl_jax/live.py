"""The next allocation for a running training job, from what the job reports after an epoch.

A platform tool knows a running job's allocation, progress, spend, last-epoch readings, SLAs and
preference (:class:`LiveJob`); :func:`recommend` turns them into the policy's inputs with the
environment's own formulas (``observation.observe``, ``job_env.epoch_readings``: forward-looking
severities, adaptive weights) and returns the next allocation (:class:`Recommendation`).

The observation is relative to the cluster the policy was trained on (its config's cluster:
GPUs and CPUs per node, nodes per job, CPU step) and to the job's **reference throughput**, the
samples/s its requested allocation achieves (the "throughput" feature is the last epoch's
throughput relative to it). The recommended allocation is clipped to that cluster.

JSON form (``LiveJob.from_dict``; ``python -m slamorl_jax.recommend --job=job.json``)::

    {"gpus": 4, "cpus": 32, "epochs_done": 10, "epochs_total": 60,
     "elapsed_s": 3000, "cost_usd": 9.5, "last_epoch_time_s": 290,
     "throughput": 850, "reference_throughput": 800,
     "gpu_util": 0.82, "cpu_util": 0.4, "memory_used_gib": 60, "memory_alloc_gib": 128,
     "price_per_hour": 11.7, "deadline_s": 15000, "budget_usd": 60,
     "min_throughput": 500, "preference": "time"}

``min_throughput``, ``max_memory_gib``, ``min_gpu_util`` and ``min_cpu_util`` are optional (no limit
when left out); ``preference`` is ``time``, ``cost``, ``balanced`` or three weights (time, cost, sla).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.checkpoint import LoadedPolicy
from slamorl_jax.env.actions import apply_action
from slamorl_jax.env.job_env import epoch_readings
from slamorl_jax.env.job_model import EpochMetrics, JobConstants
from slamorl_jax.env.objectives import SLA_NAMES, preference_vector
from slamorl_jax.env.observation import FEATURE_NAMES, observe
from slamorl_jax.env.params import EnvParams, cluster_bounds
from slamorl_jax.env.state import EnvState, JobSpec, SlaTargets

NO_LIMIT = 1e30  # an upper limit that is never reached (max_memory_gib left out)


@dataclasses.dataclass(frozen=True)
class LiveJob:
    """A running job after its latest epoch (units in the names; utilisations are fractions)."""

    gpus: int
    cpus: int
    epochs_done: int
    epochs_total: int
    elapsed_s: float
    cost_usd: float
    last_epoch_time_s: float
    throughput: float  # samples/s in the last epoch
    reference_throughput: float  # samples/s of the job's requested allocation
    gpu_util: float
    cpu_util: float
    memory_used_gib: float
    memory_alloc_gib: float
    price_per_hour: float
    deadline_s: float
    budget_usd: float
    min_throughput: float = 0.0
    max_memory_gib: float = NO_LIMIT
    min_gpu_util: float = 0.0
    min_cpu_util: float = 0.0
    preference: str | tuple[float, ...] = "balanced"

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LiveJob:
        """Build from a JSON-like mapping; ``ValueError`` names any unknown, missing or bad field."""
        if not isinstance(data, Mapping):
            raise ValueError("a job must be a JSON object of its fields")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(f"unknown job field(s): {', '.join(unknown)}")
        required = [n for n, f in fields.items() if f.default is dataclasses.MISSING]
        missing = [n for n in required if n not in data]
        if missing:
            raise ValueError(f"missing job field(s): {', '.join(missing)}")
        values = {}
        for name, value in data.items():
            if name == "preference":
                if not isinstance(value, (str, list, tuple)):
                    raise ValueError(f"preference must be a name or three weights, got {value!r}")
                values[name] = value if isinstance(value, str) else tuple(_number(name, v) for v in value)
            elif fields[name].type == "int":
                values[name] = _integer(name, value)
            else:
                values[name] = _number(name, value)
        return cls(**values)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"job field {name} must be a finite number, got {value!r}")
    return float(value)


def _integer(name: str, value: Any) -> int:
    number = _number(name, value)
    if number != int(number):
        raise ValueError(f"job field {name} must be an integer, got {value!r}")
    return int(number)


def _check(job: LiveJob) -> None:
    """Ranges of every field; ``ValueError`` naming the first bad one."""
    if job.gpus < 1 or job.cpus < 1:
        raise ValueError(f"gpus and cpus must be >= 1, got {job.gpus} and {job.cpus}")
    if job.epochs_total < 1 or not 0 <= job.epochs_done <= job.epochs_total:
        raise ValueError(
            f"need 0 <= epochs_done <= epochs_total and epochs_total >= 1, got {job.epochs_done} "
            f"and {job.epochs_total}"
        )
    positive = ("last_epoch_time_s", "reference_throughput", "memory_alloc_gib", "deadline_s", "budget_usd")
    for name in positive:
        if not getattr(job, name) > 0:
            raise ValueError(f"{name} must be > 0, got {getattr(job, name)}")
    non_negative = ("elapsed_s", "cost_usd", "throughput", "memory_used_gib", "price_per_hour")
    for name in (*non_negative, "min_throughput", "max_memory_gib"):
        if not getattr(job, name) >= 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(job, name)}")
    for name in ("gpu_util", "cpu_util", "min_gpu_util", "min_cpu_util"):
        if not 0 <= getattr(job, name) <= 1:
            raise ValueError(f"{name} is a fraction in [0, 1], got {getattr(job, name)}")
    preference_vector(job.preference)  # raises for a bad preference


def live_state(job: LiveJob, params: EnvParams) -> EnvState:
    """The env state the policy would see for ``job`` (fields no observation reads are zero)."""
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    i32 = lambda x: jnp.asarray(x, jnp.int32)  # noqa: E731
    zero = f32(0.0)
    targets = SlaTargets(
        deadline_s=f32(job.deadline_s),
        budget_usd=f32(job.budget_usd),
        min_throughput=f32(job.min_throughput),
        max_memory_gib=f32(job.max_memory_gib),
        min_gpu_util=f32(job.min_gpu_util),
        min_cpu_util=f32(job.min_cpu_util),
    )
    constants = JobConstants(**{f.name: zero for f in dataclasses.fields(JobConstants)})
    spec = JobSpec(
        workload=i32(0),
        gpu_type=i32(0),
        scenario=i32(0),
        epochs=i32(job.epochs_total),
        constants=constants,
        requested_gpus=i32(job.gpus),
        requested_cpus=i32(job.cpus),
        preference=jnp.asarray(preference_vector(job.preference)),
        sla_targets=targets,
        time_ref_s=zero,
        cost_ref_usd=zero,
        throughput_ref=f32(job.reference_throughput),
    )
    metrics = EpochMetrics(
        epoch_time_s=f32(job.last_epoch_time_s),
        throughput=f32(job.throughput),
        gpu_util=f32(job.gpu_util),
        cpu_util=f32(job.cpu_util),
        memory_used_gib=f32(job.memory_used_gib),
        memory_alloc_gib=f32(job.memory_alloc_gib),
        price_per_hour=f32(job.price_per_hour),
    )
    readings = epoch_readings(
        spec,
        metrics,
        metrics.epoch_time_s,
        metrics.throughput,
        metrics.gpu_util,
        metrics.cpu_util,
        f32(job.elapsed_s),
        f32(job.cost_usd),
        i32(job.epochs_done),
        params,
    )
    return EnvState(
        job=spec,
        steps=i32(job.epochs_done),
        epoch=i32(job.epochs_done),
        gpus=i32(job.gpus),
        cpus=i32(job.cpus),
        contended=jnp.zeros((), bool),
        elapsed_s=f32(job.elapsed_s),
        cost_usd=f32(job.cost_usd),
        **readings,
        gpu_busy_s=zero,
        cpu_busy_s=zero,
        peak_memory_gib=f32(job.memory_used_gib),
        reallocations=i32(0),
        severity_sum=zero,
    )


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """The policy's decision for a live job and what it was based on."""

    gpus: int
    cpus: int
    gpu_delta: int
    cpu_delta: int
    action: int
    action_probabilities: tuple[float, ...]
    weights: dict[str, float]
    severities: dict[str, float]
    observation: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def recommend(policy: LoadedPolicy, job: LiveJob, params: EnvParams | None = None) -> Recommendation:
    """The greedy policy's next allocation for ``job`` (on ``params``' cluster; default: the policy's)."""
    params = params if params is not None else env_params_from_config(policy.config)
    state = live_state(job, params)
    obs = observe(state, params)
    logits = policy.logits(obs, state.weights)
    action = int(jnp.argmax(logits))
    gpus, cpus = apply_action(action, state.gpus, state.cpus, *cluster_bounds(params))
    return Recommendation(
        gpus=int(gpus),
        cpus=int(cpus),
        gpu_delta=int(gpus) - job.gpus,
        cpu_delta=int(cpus) - job.cpus,
        action=action,
        action_probabilities=_floats(jax.nn.softmax(logits)),
        weights=dict(zip(("time", "cost", "sla"), _floats(state.weights), strict=True)),
        severities=dict(zip(SLA_NAMES, _floats(state.severities), strict=True)),
        observation=dict(zip(FEATURE_NAMES, _floats(obs), strict=True)),
    )


def _floats(x: jax.Array | Sequence[float]) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(x).reshape(-1))
