"""``EnvParams`` read into Python numbers for the plain-Python job (``python_job.py``).

:class:`HostParams` holds every field the Python job reads as Python scalars and lists, with the
tables its job generator draws from precomputed (the float32 inverse-CDF thresholds of each
categorical draw, each (workload, GPU type) pair's constants on the cluster as a
:class:`JobOnCluster`, the clipped absolute targets). Like the job itself it re-writes the formulas
it needs and never calls the JAX functions; the helpers here round to float32 where the JAX env does.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from slamorl_jax.env.action_sets import NUM_TARGET_CPUS_PER_GPU, NUM_TARGETS
from slamorl_jax.env.derived import DERIVED_FIELDS
from slamorl_jax.env.params import EnvParams

# The derived tables read (module docstring); the others are left out of ``HostParams.values``.
READ_DERIVED = ("fastest_epoch_s", "cheapest_epoch_usd")
UNREAD_DERIVED = tuple(name for name in DERIVED_FIELDS if name not in READ_DERIVED)


def f32(x: float) -> float:
    """``x`` rounded to float32 (one float64 op then this equals the float32 op, for + - * /)."""
    return float(np.float32(x))


def host_value(x: Any) -> Any:
    """A concrete params leaf as Python scalars or nested lists."""
    return np.asarray(x).tolist()


def cdf_thresholds(probs: Any) -> tuple[float, ...]:
    """The float32 cumulative probabilities (all but the last) that an inverse-CDF draw compares with;
    one that reaches the total is never passed (``inf``), as ``draws.categorical_from_cdf`` counts
    only those below it: trailing zero-probability bins are never drawn."""
    p = np.asarray(probs, dtype=np.float32)
    cdf = np.cumsum(p / np.sum(p, dtype=np.float32), dtype=np.float32)
    return tuple(float(c) if c < cdf[-1] else math.inf for c in cdf[:-1])


def cpu_supply(cpus_per_gpu: float, c_sat: float, p: float) -> float:
    """Synergy's fraction of the GPU-bound rate that the data-loading CPUs sustain."""
    return math.exp(-math.log1p((c_sat / max(cpus_per_gpu, 1e-6)) ** p) / p)


def clip_allocation(v: dict[str, Any], gpus: int, cpus: int) -> tuple[int, int]:
    """Allocation clipped to the cluster of ``v``, CPUs snapped down to the ``cpu_step`` lattice."""
    step = v["cpu_step"]
    gpus = min(max(gpus, 1), v["max_gpus"])
    cap = -(-gpus // v["gpus_per_node"]) * v["cpus_per_node"] // step * step
    return gpus, min(max(cpus // step * step, step), cap)


def on_cpu_lattice(v: dict[str, Any], gpus: int, cpus_per_gpu: float) -> int:
    """``round(gpus x cpus_per_gpu / cpu_step) x cpu_step`` with the JAX env's float32 rounding."""
    step = v["cpu_step"]
    return round(f32(f32(cpus_per_gpu * gpus) / step)) * step


@dataclasses.dataclass(frozen=True)
class JobOnCluster:
    """Constants of one (workload, GPU type) pair on the cluster: the Python ``JobConstants``."""

    samples_per_epoch: float
    local_batch: float
    data_parallel: bool
    compute_s: float
    sync_local: tuple[float, float]  # alpha, beta scaled to this cluster's links
    sync_node: tuple[float, float]
    sync_two_node_factor: float  # inter-node term x this on exactly two nodes
    gamma: float
    c_sat: float
    cpu_p: float
    supply_at_calibration: float
    gpu_price: float

    def deviated(self, compute: float, sync: float) -> JobOnCluster:
        """These constants with compute time x ``exp(compute)`` and every sync term x ``exp(sync)``."""
        c, s = math.exp(compute), math.exp(sync)
        return dataclasses.replace(
            self,
            compute_s=self.compute_s * c,
            sync_local=(self.sync_local[0] * s, self.sync_local[1] * s),
            sync_node=(self.sync_node[0] * s, self.sync_node[1] * s),
        )


@dataclasses.dataclass(frozen=True)
class HostParams:
    """Concrete ``EnvParams`` as Python numbers, with the tables the job generator reads precomputed."""

    values: dict[str, Any]  # every field of EnvParams as Python numbers (derived: READ_DERIVED only)
    jobs: tuple[tuple[JobOnCluster, ...], ...]  # workload profiles [workload][gpu type]
    workload_cdf: tuple[float, ...]
    gpu_type_cdf: tuple[float, ...]
    scenario_cdf: tuple[float, ...]
    requested_gpu_cdf: tuple[tuple[float, ...], ...]  # per workload
    cpus_per_gpu_cdf: tuple[float, ...]
    init_mix_cdf: tuple[float, ...]
    kind_preferences: tuple[tuple[float, ...], ...]
    opposed_preferences: tuple[tuple[float, ...], ...]
    shift_cdf: tuple[float, ...]
    fixed_preference: tuple[float, ...]  # normalised in float32
    contention_stationary: float  # float32, as the JAX reset compares it
    targets: tuple[tuple[int, int], ...]  # clipped (GPUs, CPUs) of every absolute target, GPU-major

    @classmethod
    def from_env_params(cls, params: EnvParams) -> HostParams:
        """Read concrete (unbatched) ``params`` once."""
        v = {
            f.name: host_value(getattr(params, f.name))
            for f in dataclasses.fields(params)
            if f.name != "workloads" and f.name not in UNREAD_DERIVED
        }
        w = {
            f.name: host_value(getattr(params.workloads, f.name))
            for f in dataclasses.fields(params.workloads)
        }
        v["max_gpus"] = min(v["max_gpus_per_job"], v["gpus_per_node"] * v["max_nodes"])
        v["epochs_min"], v["epochs_max"] = w["epochs_min"], w["epochs_max"]
        local_scale = [cal / v["intra_node_gbps"] for cal in w["calibration_intra_node_gbps"]]
        node_scale = [cal / v["inter_node_gbps"] for cal in w["calibration_inter_node_gbps"]]
        jobs = tuple(
            tuple(
                JobOnCluster(
                    samples_per_epoch=w["samples_per_epoch"][i],
                    local_batch=w["local_batch"][i],
                    data_parallel=bool(w["data_parallel"][i]),
                    compute_s=(w["compute_alpha_s"][i] + w["compute_beta_s"][i] * w["local_batch"][i])
                    / speed,
                    sync_local=(
                        w["sync_local_alpha_s"][i] * local_scale[i],
                        w["sync_local_beta_s"][i] * local_scale[i],
                    ),
                    sync_node=(
                        w["sync_node_alpha_s"][i] * node_scale[i],
                        w["sync_node_beta_s"][i] * node_scale[i],
                    ),
                    sync_two_node_factor=w["sync_two_node_factor"][i],
                    gamma=w["gamma"][i],
                    c_sat=w["cpu_c_sat"][i],
                    cpu_p=w["cpu_p"][i],
                    supply_at_calibration=cpu_supply(
                        w["calibration_cpus_per_gpu"][i], w["cpu_c_sat"][i], w["cpu_p"][i]
                    ),
                    gpu_price=v["gpu_price_per_hour"][t],
                )
                for t, speed in enumerate(w["compute_speed"][i])
            )
            for i in range(len(w["samples_per_epoch"]))
        )
        assert len(v["target_cpus_per_gpu"]) == NUM_TARGET_CPUS_PER_GPU
        targets = tuple(
            clip_allocation(v, g, on_cpu_lattice(v, g, x))
            for g in v["target_gpus"]
            for x in v["target_cpus_per_gpu"]
        )
        assert len(targets) == NUM_TARGETS
        fixed = np.asarray(params.fixed_preference, dtype=np.float32)
        start = np.float32(v["contention_start_prob"])
        end = np.float32(v["contention_end_prob"])
        return cls(
            values=v,
            jobs=jobs,
            workload_cdf=cdf_thresholds(params.workload_probs),
            gpu_type_cdf=cdf_thresholds(params.gpu_type_probs),
            scenario_cdf=cdf_thresholds(params.scenario_probs),
            requested_gpu_cdf=tuple(cdf_thresholds(row) for row in w["requested_gpu_probs"]),
            cpus_per_gpu_cdf=cdf_thresholds(params.requested_cpus_per_gpu_probs),
            init_mix_cdf=cdf_thresholds(params.init_mix_probs),
            kind_preferences=tuple(tuple(row) for row in v["kind_preference"]),
            opposed_preferences=tuple(tuple(row) for row in v["opposed_preference"]),
            shift_cdf=cdf_thresholds(params.shift_probs),
            fixed_preference=tuple((fixed / np.sum(fixed, dtype=np.float32)).tolist()),
            contention_stationary=float(start / max(start + end, np.float32(1e-9))),
            targets=targets,
        )
