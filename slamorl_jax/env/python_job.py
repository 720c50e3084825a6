"""One ``JobAllocationEnv`` job in plain Python: a test oracle and a benchmark peer.

This is how the authors' reference code runs an environment: one job at a time, one epoch per Python
call. :class:`PythonJob` re-implements the dynamics of :class:`slamorl_jax.env.job_env.JobAllocationEnv`
from the model's formulas (DESIGN.md §3) with Python floats, ``math`` and loops; it never calls the JAX
functions. Given the same uniforms (slot layout in :mod:`slamorl_jax.env.draws`) it replays the episode
of ``reset_from_draws`` / ``step_from_draws``, so the tests use it as an independent oracle of the JAX
env, and ``benchmarks/env_throughput.py`` times it, drawing its uniforms with NumPy
(:class:`NumpyUniforms`), as the single-job loop the vectorised env is measured against.

Arithmetic is float64, except where a discrete outcome hangs on float32 rounding (integer draws, the
rounding of the CPU request, thresholds compared with uniforms): there values are rounded to float32
as the JAX env rounds them. Continuous results agree to float32 precision (about 1e-6 relative), so a
met-flag can only differ where its value sits on its limit within that precision.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from slamorl_jax.env import draws as d
from slamorl_jax.env.actions import CPU_STEP_DELTAS, GPU_DELTAS, NUM_ACTIONS
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.scenarios import kind_preferences

Info = dict[str, Any]
_LOGISTIC_SCALE = float(np.float32(math.sqrt(3.0) / math.pi))
_DELTAS = tuple(zip(GPU_DELTAS.tolist(), CPU_STEP_DELTAS.tolist(), strict=True))  # (GPUs, CPU steps)


def _f32(x: float) -> float:
    """``x`` rounded to float32 (one float64 op then this equals the float32 op, for + - * /)."""
    return float(np.float32(x))


def _host(x: Any) -> Any:
    """A concrete params leaf as Python scalars or nested lists."""
    return np.asarray(x).tolist()


def _cdf_thresholds(probs: Any) -> tuple[float, ...]:
    """The float32 cumulative probabilities (all but the last) that an inverse-CDF draw compares with."""
    p = np.asarray(probs, dtype=np.float32)
    cdf = np.cumsum(p / np.sum(p, dtype=np.float32), dtype=np.float32)
    return tuple(float(c) for c in cdf[:-1])


def _categorical(u: float, thresholds: tuple[float, ...]) -> int:
    """Inverse-CDF index: how many thresholds are <= ``u``."""
    index = 0
    for c in thresholds:
        if u >= c:
            index += 1
    return index


def _uniform_int(u: float, low: int, high: int) -> int:
    """Integer uniform on ``[low, high]`` (the product rounded to float32, as in the JAX env)."""
    return min(low + math.floor(_f32(u * (high - low + 1))), high)


def _cpu_supply(cpus_per_gpu: float, c_sat: float, p: float) -> float:
    """Synergy's fraction of the GPU-bound rate that the data-loading CPUs sustain."""
    return math.exp(-math.log1p((c_sat / max(cpus_per_gpu, 1e-6)) ** p) / p)


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


@dataclasses.dataclass(frozen=True)
class HostParams:
    """Concrete ``EnvParams`` as Python numbers, with the tables the job generator reads precomputed."""

    values: dict[str, Any]  # every scalar field of EnvParams as a Python number
    jobs: tuple[tuple[JobOnCluster, ...], ...]  # [workload][gpu type]
    workload_cdf: tuple[float, ...]
    gpu_type_cdf: tuple[float, ...]
    scenario_cdf: tuple[float, ...]
    requested_gpu_cdf: tuple[tuple[float, ...], ...]  # per workload
    cpus_per_gpu_cdf: tuple[float, ...]
    kind_preferences: tuple[tuple[float, ...], ...]
    fixed_preference: tuple[float, ...]  # normalised in float32
    contention_stationary: float  # float32, as the JAX reset compares it

    @classmethod
    def from_env_params(cls, params: EnvParams) -> HostParams:
        """Read concrete (unbatched) ``params`` once."""
        v = {
            f.name: _host(getattr(params, f.name))
            for f in dataclasses.fields(params)
            if f.name != "workloads"
        }
        w = {f.name: _host(getattr(params.workloads, f.name)) for f in dataclasses.fields(params.workloads)}
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
                    supply_at_calibration=_cpu_supply(
                        w["calibration_cpus_per_gpu"][i], w["cpu_c_sat"][i], w["cpu_p"][i]
                    ),
                    gpu_price=v["gpu_price_per_hour"][t],
                )
                for t, speed in enumerate(w["compute_speed"][i])
            )
            for i in range(len(w["samples_per_epoch"]))
        )
        fixed = np.asarray(params.fixed_preference, dtype=np.float32)
        start = np.float32(v["contention_start_prob"])
        end = np.float32(v["contention_end_prob"])
        return cls(
            values=v,
            jobs=jobs,
            workload_cdf=_cdf_thresholds(params.workload_probs),
            gpu_type_cdf=_cdf_thresholds(params.gpu_type_probs),
            scenario_cdf=_cdf_thresholds(params.scenario_probs),
            requested_gpu_cdf=tuple(_cdf_thresholds(row) for row in w["requested_gpu_probs"]),
            cpus_per_gpu_cdf=_cdf_thresholds(params.requested_cpus_per_gpu_probs),
            kind_preferences=tuple(tuple(row) for row in kind_preferences().tolist()),
            fixed_preference=tuple((fixed / np.sum(fixed, dtype=np.float32)).tolist()),
            contention_stationary=float(start / max(start + end, np.float32(1e-9))),
        )


@dataclasses.dataclass
class Job:
    """What reset drew for one episode (the Python ``JobSpec``)."""

    workload: int
    gpu_type: int
    scenario: int
    epochs: int
    constants: JobOnCluster
    requested: tuple[int, int]
    preference: tuple[float, float, float]
    targets: tuple[float, ...]  # deadline, budget, min throughput, max memory, min GPU util, min CPU util
    time_ref_s: float
    cost_ref_usd: float
    throughput_ref: float


def _floats(u: Sequence[float] | Any) -> list[float]:
    """Uniforms as a list of Python floats (from a list, a NumPy or a JAX array)."""
    return u.tolist() if hasattr(u, "tolist") else list(u)


def _over(value: float, limit: float) -> float:
    """Severity of an upper limit: relative overshoot clipped to [0, 1]."""
    limit = limit if limit > 1e-9 else 1e-9
    s = (value - limit) / limit
    return 0.0 if s <= 0.0 else (1.0 if s >= 1.0 else s)


def _under(value: float, limit: float) -> float:
    """Severity of a lower limit: relative shortfall clipped to [0, 1] (0 when ``limit <= 0``)."""
    if limit <= 0.0:
        return 0.0
    safe = limit if limit > 1e-9 else 1e-9
    s = (safe - value) / safe
    return 0.0 if s <= 0.0 else (1.0 if s >= 1.0 else s)


def _unit(x: float) -> float:
    """``x`` clipped to [0, 1]."""
    return 0.0 if x <= 0.0 else (1.0 if x >= 1.0 else x)


class PythonJob:
    """One training job stepped epoch by epoch in plain Python: a test oracle and a benchmark peer.

    ``reset(u_reset, params)`` draws a new job from ``draws.RESET_DRAWS`` uniforms and returns its
    first observation; ``step(u_step, u_reset, action)`` applies the action, runs one epoch from
    ``draws.STEP_DRAWS`` uniforms and auto-resets from ``u_reset`` when the job ends, returning
    ``(observation, reward, terminated, truncated, info)`` exactly as ``JobAllocationEnv.step_from_draws``
    does: 21 observation floats, the (time, cost, sla) reward, and ``info`` with the same keys
    (``weights``, ``final_weights``, ``step_weights``, severities, flags and episode figures) plus
    ``job_sla_slack``, each job-level check's relative margin (>= 0 when met) for tie-aware tests.
    Parameters are read into Python numbers once (:class:`HostParams`); nothing here calls JAX.
    """

    def __init__(self, params: EnvParams | HostParams) -> None:
        self._use(params)

    def _use(self, params: EnvParams | HostParams) -> None:
        """Take ``params`` (read once into Python numbers unless already ``HostParams``)."""
        self.params = params if isinstance(params, HostParams) else HostParams.from_env_params(params)
        self._v = self.params.values

    # Model ----------------------------------------------------------------------------------
    def _epoch_metrics(
        self, c: JobOnCluster, gpus: int, cpus: int, contended: bool
    ) -> tuple[float, float, float, float, float, float, float]:
        """Noise-free (epoch time, throughput, GPU util, CPU util, memory used, allocated, $/h)."""
        v = self._v
        replicas = float(gpus) if c.data_parallel else 1.0
        t_comp = c.compute_s * (1.0 + v["contention_compute_slowdown"]) if contended else c.compute_s
        t_sync = 0.0
        if replicas > 1.0:
            extra = replicas - 2.0 if replicas > 2.0 else 0.0
            nodes = math.ceil(replicas / v["gpus_per_node"])
            if nodes > 1:
                scale = 1.0 + v["contention_network_slowdown"] if contended else 1.0
                scale *= c.sync_two_node_factor if nodes == 2 else 1.0
                t_sync = (c.sync_node[0] + c.sync_node[1] * extra) * scale
            else:
                t_sync = c.sync_local[0] + c.sync_local[1] * extra
            t_sync = t_sync if t_sync > 0.0 else 0.0
        big, small = (t_comp, t_sync) if t_comp >= t_sync else (t_sync, t_comp)
        ratio = small / (big if big > 1e-30 else 1e-30)
        t_step = big * (1.0 + ratio**c.gamma) ** (1.0 / c.gamma)
        cpu_scale = _cpu_supply(cpus / replicas, c.c_sat, c.cpu_p) / c.supply_at_calibration
        samples_per_s = replicas * c.local_batch / t_step * cpu_scale
        busy = t_comp / t_step * (cpu_scale if cpu_scale < 1.0 else 1.0)
        gpu_util = _unit(busy * replicas / gpus)
        cpu_util = _unit(replicas * (1.0 + c.c_sat * busy) / cpus)
        process_memory = gpus * v["host_memory_gib_per_gpu"]
        memory_alloc = process_memory + cpus * v["memory_gib_per_vcpu"]
        memory_used = process_memory + cpu_util * cpus * v["worker_memory_gib_per_busy_cpu"]
        price = gpus * c.gpu_price + cpus * v["vcpu_price_per_hour"] + memory_alloc * v["gib_price_per_hour"]
        epoch_time = c.samples_per_epoch / samples_per_s
        return epoch_time, samples_per_s, gpu_util, cpu_util, memory_used, memory_alloc, price

    def _clip_allocation(self, gpus: int, cpus: int) -> tuple[int, int]:
        """Allocation clipped to the cluster, CPUs snapped down to the ``cpu_step`` lattice."""
        v = self._v
        step = v["cpu_step"]
        gpus = min(max(gpus, 1), v["max_gpus"])
        cap = -(-gpus // v["gpus_per_node"]) * v["cpus_per_node"] // step * step
        return gpus, min(max(cpus // step * step, step), cap)

    def _severities_and_weights(
        self, price: float, memory: float, gpu_util: float, cpu_util: float, throughput: float,
        epoch_time: float, elapsed: float, cost: float, epoch: int,
    ) -> tuple[tuple[float, ...], tuple[float, float, float], float, float]:  # fmt: skip
        """Forward-looking severities (6), the adapted objective weights (3), and the projected
        remaining time (s) and cost ($) of the job at the current epoch rate."""
        job = self.job
        remaining_time = (job.epochs - epoch) * epoch_time
        remaining_cost = remaining_time * price / 3600.0
        deadline, budget, min_throughput, max_memory, min_gpu_util, min_cpu_util = job.targets
        s = (
            _over(elapsed + remaining_time, deadline),
            _over(cost + remaining_cost, budget),
            _under(throughput, min_throughput),
            _over(memory, max_memory),
            _under(gpu_util, min_gpu_util),
            _under(cpu_util, min_cpu_util),
        )
        eta = self._v["adapt_strength"]
        tilt = (eta * max(s[0], s[2]), eta * s[1], eta * max(s[3], s[4], s[5]))
        # Normalise against the largest tilt of an objective the user weighs; unweighted ones stay 0.
        top = max(t for w, t in zip(job.preference, tilt, strict=True) if w > 0.0)
        raw = [w * math.exp(t - top) if w > 0.0 else 0.0 for w, t in zip(job.preference, tilt, strict=True)]
        total = raw[0] + raw[1] + raw[2]
        return s, (raw[0] / total, raw[1] / total, raw[2] / total), remaining_time, remaining_cost

    # Reset ----------------------------------------------------------------------------------
    def _sample_job(self, u: list[float]) -> Job:
        """Draw the job, its request, preference and SLA targets (``job_generator.sample_job``)."""
        p, v = self.params, self._v
        workload = _categorical(u[d.WORKLOAD], p.workload_cdf)
        gpu_type = _categorical(u[d.GPU_TYPE], p.gpu_type_cdf)
        kind = _categorical(u[d.SCENARIO], p.scenario_cdf)
        c = p.jobs[workload][gpu_type]
        epochs = _uniform_int(u[d.EPOCHS], v["epochs_min"][workload], v["epochs_max"][workload])
        gpus = v["requested_gpu_bins"][_categorical(u[d.REQUESTED_GPUS], p.requested_gpu_cdf[workload])]
        gpus = gpus if c.data_parallel else 1
        ratio = v["requested_cpus_per_gpu_values"][_categorical(u[d.REQUESTED_CPUS], p.cpus_per_gpu_cdf)]
        step = v["cpu_step"]
        cpus = round(_f32(_f32(ratio * gpus) / step)) * step
        requested = self._clip_allocation(gpus, cpus)
        epoch_time, throughput, _, _, memory, _, price = self._epoch_metrics(c, *requested, False)
        time_ref = epochs * epoch_time
        cost_ref = time_ref * price / 3600.0
        f = [
            lo + (hi - lo) * u[i]
            for lo, hi, i in zip(
                v["sla_factor_low"][kind], v["sla_factor_high"][kind], d.SLA_FACTORS, strict=True
            )
        ]
        margin = v["feasibility_margin"]
        fastest = v["fastest_epoch_s"][workload][gpu_type]
        targets = (
            max(f[0] * time_ref, margin * epochs * fastest),
            max(f[1] * cost_ref, margin * epochs * v["cheapest_epoch_usd"][workload][gpu_type]),
            min(f[2] * throughput, c.samples_per_epoch / fastest / margin),
            f[3] * memory,
            f[4],
            f[5],
        )
        if v["use_fixed_preference"]:
            preference = p.fixed_preference
        elif u[d.RANDOM_PREFERENCE] < v["random_preference_prob"]:
            low, high = sorted(u[i] for i in d.PREFERENCE)
            preference = (low, high - low, 1.0 - high)
        else:
            preference = p.kind_preferences[kind]
        return Job(
            workload, gpu_type, kind, epochs, c, requested, tuple(preference), targets,
            time_ref, cost_ref, throughput,
        )  # fmt: skip

    def _initial_allocation(self, u: list[float]) -> tuple[int, int]:
        """Allocation at the first epoch by the init strategy (``params.INIT_STRATEGIES`` order)."""
        v = self._v
        strategy, g_max, step = v["init_strategy"], v["max_gpus"], v["cpu_step"]
        if strategy == 0:
            return self._clip_allocation(1, step)
        if strategy == 1:
            return self._clip_allocation(*self.job.requested)
        if strategy == 2:
            gpus = _uniform_int(u[d.INIT_GPUS], 1, g_max)
            levels = -(-gpus // v["gpus_per_node"]) * v["cpus_per_node"] // step * step
            return self._clip_allocation(gpus, step * _uniform_int(u[d.INIT_CPUS], 1, levels // step))
        return self._clip_allocation(g_max, 1 << 20)

    def reset(
        self, u_reset: Sequence[float] | Any, params: EnvParams | HostParams | None = None
    ) -> list[float]:
        """Start a new job from ``RESET_DRAWS`` uniforms (optionally under new params); its observation."""
        if params is not None:
            self._use(params)
        u = _floats(u_reset)
        self.job = self._sample_job(u)
        self.gpus, self.cpus = self._initial_allocation(u)
        self.contended = u[d.CONTENTION_AT_START] < self.params.contention_stationary
        m = self._epoch_metrics(self.job.constants, self.gpus, self.cpus, False)
        self.epoch_time_s, self.throughput, self.gpu_util, self.cpu_util, memory, alloc, price = m
        self.memory_used_gib, self.memory_util, self.price_per_hour = memory, memory / alloc, price
        self.severities, self.weights, *projections = self._severities_and_weights(
            price, memory, self.gpu_util, self.cpu_util, self.throughput, self.epoch_time_s, 0.0, 0.0, 0
        )
        self.projected_remaining_time_s, self.projected_remaining_cost_usd = projections
        self.steps = self.epoch = self.reallocations = 0
        self.elapsed_s = self.cost_usd = self.gpu_busy_s = self.cpu_busy_s = 0.0
        self.peak_memory_gib = self.severity_sum = 0.0
        return self.observation()

    # Step -----------------------------------------------------------------------------------
    def step(
        self, u_step: Sequence[float] | Any, u_reset: Sequence[float] | Any, action: int
    ) -> tuple[list[float], tuple[float, float, float], bool, bool, Info]:
        """One decision and one epoch; auto-resets from ``u_reset`` when the job ends (see class)."""
        reward, terminated, info = self._transition(_floats(u_step), int(action))
        truncated = self.steps >= self._v["max_episode_steps"] and not terminated
        obs = final_obs = self.observation()
        info["final_weights"] = self.weights
        if terminated or truncated:
            obs = self.reset(u_reset)
        info["weights"] = self.weights
        info["terminated"] = terminated
        info["truncated"] = truncated
        info["final_observation"] = final_obs
        return obs, reward, terminated, truncated, info

    def _transition(self, u: list[float], action: int) -> tuple[tuple[float, float, float], bool, Info]:
        """Apply ``action`` and run one epoch (no reset): reward, terminated, info."""
        v, job = self._v, self.job
        if not 0 <= action < NUM_ACTIONS:
            raise ValueError(f"action must be in [0, {NUM_ACTIONS}), got {action}")
        gpu_delta, cpu_steps = _DELTAS[action]
        gpus, cpus = self._clip_allocation(self.gpus + gpu_delta, self.cpus + cpu_steps * v["cpu_step"])
        gpus_changed = gpus != self.gpus
        changed = gpus_changed or cpus != self.cpus
        switch = u[d.CONTENTION_SWITCH]
        if self.contended:
            contended = switch >= v["contention_end_prob"]
        else:
            contended = switch < v["contention_start_prob"]
        base_time, _, gpu_util, cpu_util, memory, alloc, price = self._epoch_metrics(
            job.constants, gpus, cpus, contended
        )
        noise_u = min(max(u[d.EPOCH_NOISE], 1e-5), 1.0 - 1e-5)
        epoch_time = base_time * math.exp(
            v["epoch_time_noise"] * math.log(noise_u / (1.0 - noise_u)) * _LOGISTIC_SCALE
        )
        # A GPU change checkpoints and restarts the job; a CPU-only change restarts the data loaders.
        if gpus_changed:
            pause = v["reallocation_pause_s"]
        else:
            pause = v["cpu_reallocation_pause_s"] if changed else 0.0
        interval = epoch_time + pause
        interval_cost = interval * price / 3600.0
        working = epoch_time / interval
        noise = v["util_noise"]
        gpu_util = _unit(gpu_util * working + noise * (2.0 * u[d.GPU_UTIL_NOISE] - 1.0))
        cpu_util = _unit(cpu_util * working + noise * (2.0 * u[d.CPU_UTIL_NOISE] - 1.0))
        throughput = job.constants.samples_per_epoch / interval
        elapsed = self.elapsed_s + interval
        cost = self.cost_usd + interval_cost
        epoch = self.epoch + 1
        severities, weights, remaining_time, remaining_cost = self._severities_and_weights(
            price, memory, gpu_util, cpu_util, throughput, epoch_time, elapsed, cost, epoch
        )
        step_weights = self.weights
        self.steps += 1
        self.epoch, self.gpus, self.cpus, self.contended = epoch, gpus, cpus, contended
        self.elapsed_s, self.cost_usd, self.epoch_time_s, self.throughput = (
            elapsed,
            cost,
            epoch_time,
            throughput,
        )
        self.gpu_util, self.cpu_util, self.memory_util = gpu_util, cpu_util, memory / alloc
        self.memory_used_gib, self.price_per_hour = memory, price
        self.severities, self.weights = severities, weights
        self.projected_remaining_time_s, self.projected_remaining_cost_usd = remaining_time, remaining_cost
        self.gpu_busy_s += gpu_util * interval
        self.cpu_busy_s += cpu_util * interval
        self.peak_memory_gib = max(self.peak_memory_gib, memory)
        self.reallocations += changed
        mean_severity = sum(severities) / len(severities)
        self.severity_sum += mean_severity
        terminated = epoch >= job.epochs
        info = self.episode_figures()
        sla_reward = -mean_severity / job.epochs
        if terminated:
            bonus = v["completion_bonus"]
            sla_reward += bonus * (0.5 * info["deadline_met"] + 0.5 * info["budget_met"])
        clip = v["reward_clip"]
        reward = (
            -min(interval / job.time_ref_s, clip),
            -min(interval_cost / job.cost_ref_usd, clip),
            sla_reward,
        )
        info["step_weights"] = step_weights
        info["severities"] = severities
        info["sla_met"] = tuple(s <= 0.0 for s in severities)
        info["reallocated"] = changed
        info["projected_remaining_time_s"] = remaining_time
        info["projected_remaining_cost_usd"] = remaining_cost
        return reward, terminated, info

    # Readings -------------------------------------------------------------------------------
    def episode_figures(self) -> Info:
        """Job-level figures of the episode so far (``job_env.episode_figures``) and their slack."""
        job = self.job
        deadline, budget, min_throughput, max_memory, min_gpu_util, min_cpu_util = job.targets
        elapsed = self.elapsed_s if self.elapsed_s > 1e-9 else 1e-9
        slack = (
            (deadline - self.elapsed_s) / max(abs(deadline), 1e-9),
            (budget - self.cost_usd) / max(abs(budget), 1e-9),
            (self.epoch * job.constants.samples_per_epoch / elapsed - min_throughput)
            / max(abs(min_throughput), 1e-9),
            (max_memory - self.peak_memory_gib) / max(abs(max_memory), 1e-9),
            (self.gpu_busy_s / elapsed - min_gpu_util) / max(abs(min_gpu_util), 1e-9),
            (self.cpu_busy_s / elapsed - min_cpu_util) / max(abs(min_cpu_util), 1e-9),
        )
        met = tuple(s >= 0.0 for s in slack)
        return {
            "episode_time_s": self.elapsed_s,
            "episode_cost_usd": self.cost_usd,
            "time_ref_s": job.time_ref_s,
            "cost_ref_usd": job.cost_ref_usd,
            "deadline_met": met[0],
            "budget_met": met[1],
            "job_sla_met": met,
            "all_slas_met": all(met),
            "sla_compliance": sum(met) / len(met),
            "mean_severity": self.severity_sum / max(self.epoch, 1),
            "mean_gpu_util": self.gpu_busy_s / elapsed,
            "mean_cpu_util": self.cpu_busy_s / elapsed,
            "reallocations": self.reallocations,
            "epochs": job.epochs,
            "workload": job.workload,
            "gpu_type": job.gpu_type,
            "scenario": job.scenario,
            "preference": job.preference,
            "job_sla_slack": slack,
        }

    def observation(self) -> list[float]:
        """The 21 features of the current state (``observation.FEATURE_NAMES`` order), in [0, 1]."""
        v, job = self._v, self.job
        relative = self.throughput / max(job.throughput_ref, 1e-9)
        scalars = (
            self.gpus / v["max_gpus"],
            self.cpus / (v["max_nodes"] * v["cpus_per_node"]),
            self.gpu_util,
            self.cpu_util,
            self.memory_util,
            self.epoch / job.epochs,
            relative / (1.0 + relative),
            self.elapsed_s / job.targets[0],
            self.cost_usd / job.targets[1],
        )
        met = [1.0 if s <= 0.0 else 0.0 for s in self.severities]
        return [_unit(x) for x in scalars] + met + [_unit(s) for s in self.severities]

    @property
    def allocation(self) -> tuple[int, int]:
        """Current (GPUs, CPUs)."""
        return self.gpus, self.cpus


class NumpyUniforms:
    """Uniforms and random actions for a :class:`PythonJob` from ``numpy.random.default_rng``.

    Draws blocks of rows (one row = ``STEP_DRAWS`` + ``RESET_DRAWS`` uniforms and an action) and
    hands them out one step at a time, so the single-job loop pays NumPy's call overhead once per block.
    """

    def __init__(self, seed: int, block: int = 1024) -> None:
        self.rng = np.random.default_rng(seed)
        self.block = block
        self._rows: list[list[float]] = []
        self._actions: list[int] = []

    def reset_draws(self) -> list[float]:
        """``RESET_DRAWS`` uniforms for a reset."""
        return self.rng.random(d.RESET_DRAWS).tolist()

    def next_step(self) -> tuple[list[float], list[float], int]:
        """(step uniforms, reset uniforms, action) for one step."""
        if not self._rows:
            self._rows = self.rng.random((self.block, d.STEP_DRAWS + d.RESET_DRAWS)).tolist()
            self._actions = self.rng.integers(0, NUM_ACTIONS, self.block).tolist()
        row = self._rows.pop()
        return row[: d.STEP_DRAWS], row[d.STEP_DRAWS :], self._actions.pop()


def run_random_steps(job: PythonJob, source: NumpyUniforms, num_steps: int) -> float:
    """Step ``job`` (already reset) ``num_steps`` times with random actions; the summed reward."""
    total = 0.0
    for _ in range(num_steps):
        u_step, u_reset, action = source.next_step()
        _, reward, _, _, _ = job.step(u_step, u_reset, action)
        total += reward[0] + reward[1] + reward[2]
    return total
