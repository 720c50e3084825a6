"""One ``JobAllocationEnv`` job in plain Python: a test oracle and a benchmark peer.

This is how the authors' reference code runs an environment: one job at a time, one epoch per Python
call. :class:`PythonJob` re-implements the dynamics of :class:`slamorl_jax.env.job_env.JobAllocationEnv`
from the model's formulas with Python floats, ``math`` and loops; it never calls the JAX
functions. Given the same uniforms (slot layout in :mod:`slamorl_jax.env.draws`) it replays the episode
of ``reset_from_draws`` / ``step_from_draws``, so the tests use it as an independent oracle of the JAX
env, and ``benchmarks/env_throughput.py`` times it, drawing its uniforms with NumPy
(``python_uniforms.py``), as the single-job loop the vectorised env is measured against. Its
parameters are read into Python numbers by ``python_params.py``.

What it re-writes from the formulas (nothing of it imported): the job model (epoch time, throughput,
utilisation, memory, price, and the compute and sync shares, each computed directly), each job's
hidden truth (its two log deviations from its workload's profile and the true constants they give),
the job generator (request, SLA targets planned on the profile's forecast with feasibility floors
from the profile, references from the truth), the initial allocation of every init strategy
(``mixed`` included), both action sets (the absolute targets are computed here from ``target_gpus``
x ``target_cpus_per_gpu``),
the online model (its five sums and Bayesian posterior mean, each term clipped to the range the truth
is drawn from), the whole observation (the paper's 21 features and the forecast block, whose
per-target profile metrics are evaluated here), the adaptive weights, the reward and every ``info``
entry.

What it reads from ``EnvParams`` besides the plain fields: two derived tables, the profile's
fastest and cheapest static epoch per (workload, GPU type) (``fastest_epoch_s``,
``cheapest_epoch_usd``): they are lattice searches whose argmin it does not repeat. It reads no
other derived table (not ``target_allocation``, ``target_profile``, nor the job generator's packed
rows). From the JAX modules it imports only constants and names (slot layout, move deltas, action-set
sizes, strategy and derived-table names, clip bounds, feature counts and scales, preset preferences).

Arithmetic is float64, except where a discrete outcome hangs on float32 rounding (integer draws, the
rounding of CPU requests and targets, thresholds compared with uniforms): there values are rounded to
float32 as the JAX env rounds them. Continuous results agree to float32 precision (about 1e-6
relative; the online model's posterior, a 2x2 solve on sums the JAX env accumulates in float32, to
about 1e-5 at the default spreads and 1e-4 with wide ones), so a met-flag or a forecast SLA check
can only differ where its value sits on its limit within that precision; the ``*_slack`` entries of
``info`` say where.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from slamorl_jax.env import draws as d
from slamorl_jax.env import shifts
from slamorl_jax.env.action_sets import ACTION_SETS, DEFAULT_ACTION_SET, NUM_TARGETS, RELOCATE_ACTION
from slamorl_jax.env.actions import CPU_STEP_DELTAS, GPU_DELTAS
from slamorl_jax.env.actions import NUM_ACTIONS as NUM_MOVES
from slamorl_jax.env.forecast import EPOCHS_LEFT_SCALE, RATIO_CAP
from slamorl_jax.env.observation import NUM_PAPER_FEATURES
from slamorl_jax.env.online_model import MIN_SPREAD, ROUNDING
from slamorl_jax.env.params import INIT_STRATEGIES, MIXED_INIT_STRATEGIES, WEIGHT_MODES, EnvParams
from slamorl_jax.env.python_params import (
    HostParams,
    JobOnCluster,
    clip_allocation,
    cpu_supply,
    f32,
    on_cpu_lattice,
)

Info = dict[str, Any]
_LOGISTIC_SCALE = float(np.float32(math.sqrt(3.0) / math.pi))
_DELTAS = tuple(zip(GPU_DELTAS.tolist(), CPU_STEP_DELTAS.tolist(), strict=True))  # (GPUs, CPU steps)
INF = float("inf")
# ``EnvState`` fields that are plain attributes of a ``PythonJob`` (``state_dict``).
_STATE_FIELDS = (
    "steps", "epoch", "gpus", "cpus", "contended", "event_left", "elapsed_s", "cost_usd", "epoch_time_s",
    "throughput", "gpu_util", "cpu_util", "memory_util", "memory_used_gib", "price_per_hour", "severities",
    "weights", "multipliers", "projected_remaining_time_s", "projected_remaining_cost_usd", "gpu_busy_s",
    "cpu_busy_s", "peak_memory_gib", "reallocations", "severity_sum", "surprise",
)  # fmt: skip


def action_count(action_set: str) -> int:
    """Actions of the named set: the 9 moves, plus the absolute targets for ``targets``, plus
    relocate for ``targets_relocate``."""
    if action_set not in ACTION_SETS:
        raise ValueError(f"unknown action set {action_set!r}; choose one of: {', '.join(ACTION_SETS)}")
    targets = NUM_TARGETS if action_set != "paper" else 0
    return NUM_MOVES + targets + (1 if action_set == "targets_relocate" else 0)


def _categorical(u: float, thresholds: tuple[float, ...]) -> int:
    """Inverse-CDF index: how many thresholds are <= ``u``."""
    index = 0
    for c in thresholds:
        if u >= c:
            index += 1
    return index


def _uniform_int(u: float, low: int, high: int) -> int:
    """Integer uniform on ``[low, high]`` (the product rounded to float32, as in the JAX env)."""
    return min(low + math.floor(f32(u * (high - low + 1))), high)


def _logistic(u: float) -> float:
    """The unit-variance logistic deviate of a uniform (the env's stand-in for a normal)."""
    u = min(max(u, 1e-5), 1.0 - 1e-5)
    return math.log(u / (1.0 - u)) * _LOGISTIC_SCALE


def _round_half_even(x: float) -> int:
    """``x`` rounded to the nearest integer, halves to even (as ``jnp.round``)."""
    return round(float(x))


# (epoch time, throughput, GPU util, CPU util, memory used, memory allocated, $/h, compute share,
# sync share): ``EpochMetrics``' fields in order.
Metrics = tuple[float, float, float, float, float, float, float, float, float]
METRIC_NAMES = ("epoch_time_s", "throughput", "gpu_util", "cpu_util", "memory_used_gib",
                "memory_alloc_gib", "price_per_hour", "compute_share", "sync_share")  # fmt: skip


@dataclasses.dataclass
class Job:
    """What reset drew for one episode (the Python ``JobSpec``)."""

    workload: int
    gpu_type: int
    scenario: int
    epochs: int
    constants: JobOnCluster  # the job's TRUE constants (the dynamics run on them)
    profile: JobOnCluster  # its workload's profile on its GPU type (all the agent sees)
    deviation: tuple[float, float]  # hidden log deviations (compute, sync)
    requested: tuple[int, int]
    preference: tuple[float, float, float]
    targets: tuple[float, ...]  # deadline, budget, min throughput, max memory, min GPU util, min CPU util
    time_ref_s: float
    cost_ref_usd: float
    throughput_ref: float
    shift: tuple[int, int, float]  # the mid-run event: kind, epoch it happens after, value (shifts.py)


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


def _margin(value: float, limit: float) -> float:
    """Relative margin of ``value >= limit`` (>= 0 exactly when it holds)."""
    return (value - limit) / max(abs(limit), 1e-9)


class PythonJob:
    """One training job stepped epoch by epoch in plain Python: a test oracle and a benchmark peer.

    ``PythonJob(params, action_set)`` takes the env's action set (``"targets_relocate"`` by
    default, ``"targets"`` or ``"paper"``; indices as in ``action_sets.py``, out-of-range ones
    clipped to the set as the env clips them). ``reset(u_reset, params)`` draws a new job from
    ``draws.RESET_DRAWS`` uniforms and returns its first observation; ``step(u_step, u_reset,
    action)`` applies the action, runs one epoch from ``draws.STEP_DRAWS`` uniforms and auto-resets
    from ``u_reset`` when the job ends, returning ``(observation, reward, terminated, truncated,
    info)`` exactly as ``JobAllocationEnv.step_from_draws`` does: every observation feature (the
    paper's 21 and the forecast block), the (time, cost, sla) reward, and ``info`` with the same
    keys (``weights``, ``final_weights``, ``step_weights``, severities, flags and episode figures;
    ``final_state`` is the pre-reset state as :meth:`state_dict`) plus three for tie-aware tests:
    ``job_sla_slack``, each job-level check's relative margin (>= 0 when met), and
    ``observation_slack`` / ``final_observation_slack``, per feature of the returned and the final
    observation the smallest relative margin of the forecast SLA checks it counts (``inf`` for the
    features that count none); ``observation_slack`` of the current state is also an attribute.
    Parameters are read into Python numbers once (:class:`HostParams`); nothing here calls JAX.
    """

    def __init__(self, params: EnvParams | HostParams, action_set: str = DEFAULT_ACTION_SET) -> None:
        self.num_actions = action_count(action_set)
        self.action_set = action_set
        self._use(params)

    def _use(self, params: EnvParams | HostParams) -> None:
        """Take ``params`` (read once into Python numbers unless already ``HostParams``)."""
        self.params = params if isinstance(params, HostParams) else HostParams.from_env_params(params)
        self._v = self.params.values
        self._target_metrics: dict[tuple[int, int], list[Metrics]] = {}

    # Model ----------------------------------------------------------------------------------
    def _epoch_metrics(self, c: JobOnCluster, gpus: int, cpus: int, contended: bool) -> Metrics:
        """Noise-free (epoch time, throughput, GPU util, CPU util, memory used, allocated, $/h,
        compute share, sync share) of ``c`` on ``(gpus, cpus)``."""
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
        # d log t_step / d log t_comp (and t_sync): the share of a compute (sync) change that reaches
        # the step time. Each on its own: they sum to 1, but 1 - compute_share loses a small sync share.
        compute_share = (t_comp / t_step) ** c.gamma
        sync_share = (t_sync / t_step) ** c.gamma
        cpu_scale = cpu_supply(cpus / replicas, c.c_sat, c.cpu_p) / c.supply_at_calibration
        samples_per_s = replicas * c.local_batch / t_step * cpu_scale
        busy = t_comp / t_step * (cpu_scale if cpu_scale < 1.0 else 1.0)
        gpu_util = _unit(busy * replicas / gpus)
        cpu_util = _unit(replicas * (1.0 + c.c_sat * busy) / cpus)
        process_memory = gpus * v["host_memory_gib_per_gpu"]
        memory_alloc = process_memory + cpus * v["memory_gib_per_vcpu"]
        memory_used = process_memory + cpu_util * cpus * v["worker_memory_gib_per_busy_cpu"]
        price = self._price(c, gpus, cpus)
        epoch_time = c.samples_per_epoch / samples_per_s
        return (epoch_time, samples_per_s, gpu_util, cpu_util, memory_used, memory_alloc, price,
                compute_share, sync_share)  # fmt: skip

    def _price(self, c: JobOnCluster, gpus: float, cpus: float) -> float:
        """Dollars per hour of an allocation (``job_model.allocation_price_per_hour``)."""
        v = self._v
        memory_alloc = gpus * v["host_memory_gib_per_gpu"] + cpus * v["memory_gib_per_vcpu"]
        return gpus * c.gpu_price + cpus * v["vcpu_price_per_hour"] + memory_alloc * v["gib_price_per_hour"]

    def _clip_allocation(self, gpus: int, cpus: int) -> tuple[int, int]:
        """Allocation clipped to the cluster, CPUs snapped down to the ``cpu_step`` lattice."""
        return clip_allocation(self._v, gpus, cpus)

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
        # Per-SLA dual multipliers (dual_weights.py), then the weights of the configured form.
        v = self._v
        self.multipliers = tuple(
            min(lam + v["dual_step"] * si, v["dual_max"]) if si > 0.0 else (1.0 - v["dual_decay"]) * lam
            for lam, si in zip(self.multipliers, s, strict=True)
        )
        mode = WEIGHT_MODES[v["weights_mode"]]
        eta = 0.0 if mode == "static" else v["adapt_strength"]
        p = self.multipliers if mode == "dual" else s
        tilt = (eta * max(p[0], p[2]), eta * p[1], eta * max(p[3], p[4], p[5]))
        # Normalise against the largest tilt of an objective the user weighs; unweighted ones stay 0.
        top = max(t for w, t in zip(job.preference, tilt, strict=True) if w > 0.0)
        raw = [w * math.exp(t - top) if w > 0.0 else 0.0 for w, t in zip(job.preference, tilt, strict=True)]
        total = raw[0] + raw[1] + raw[2]
        return s, (raw[0] / total, raw[1] / total, raw[2] / total), remaining_time, remaining_cost

    def _take_readings(self, m: Metrics, epoch_time: float, throughput: float, gpu_util: float,
                       cpu_util: float, elapsed: float, cost: float, epoch: int) -> None:  # fmt: skip
        """Store the readings of the latest epoch (or the forecast at reset) and what they imply."""
        _, _, _, _, memory, alloc, price, _, _ = m
        self.epoch_time_s, self.throughput, self.gpu_util, self.cpu_util = (
            epoch_time,
            throughput,
            gpu_util,
            cpu_util,
        )
        self.memory_used_gib, self.memory_util, self.price_per_hour = memory, memory / alloc, price
        self.severities, self.weights, *projections = self._severities_and_weights(
            price, memory, gpu_util, cpu_util, throughput, epoch_time, elapsed, cost, epoch
        )
        self.projected_remaining_time_s, self.projected_remaining_cost_usd = projections

    # Hidden truth and online model ----------------------------------------------------------
    def _deviation(self, u: list[float]) -> tuple[float, float]:
        """The job's hidden log deviations: spread x a logistic deviate clipped at +-deviation_limit_sd."""
        v = self._v
        limit = v["deviation_limit_sd"]
        z_compute = min(max(_logistic(u[d.COMPUTE_DEVIATION]), -limit), limit)
        z_sync = min(max(_logistic(u[d.SYNC_DEVIATION]), -limit), limit)
        return v["compute_spread"] * z_compute, v["sync_spread"] * z_sync

    def _record_epoch(self, measured_s: float, profile_s: float, s: float, q: float) -> None:
        """Rotate one measured epoch, where the profile forecast ``profile_s`` with compute and sync
        shares ``s`` and ``q``, into the online model's square-root statistics
        (``online_model.MODEL_STATS``: ``R`` and ``z``, two Givens rotations)."""
        r = math.log(max(measured_s, 1e-9)) - math.log(max(profile_s, 1e-9))
        r11, r12, r22, z1, z2 = self.model_stats
        radius1 = math.hypot(r11, s)
        cos1, sin1 = (r11 / radius1, s / radius1) if radius1 > 0 else (1.0, 0.0)
        q_left, r_left = cos1 * q - sin1 * r12, cos1 * r - sin1 * z1
        if abs(q_left) <= ROUNDING * (abs(cos1 * q) + abs(sin1 * r12)):
            q_left = 0.0  # a repeated allocation (online_model.record_epoch)
        radius2 = math.hypot(r22, q_left)
        cos2, sin2 = (r22 / radius2, q_left / radius2) if radius2 > 0 else (1.0, 0.0)
        new_r12, new_z1, new_z2 = cos1 * r12 + sin1 * q, cos1 * z1 + sin1 * r, cos2 * z2 + sin2 * r_left
        self.model_stats = [radius1, new_r12, radius2, new_z1, new_z2]

    def posterior_deviation(self) -> tuple[float, float]:
        """Posterior mean of the (compute, sync) log deviations: prior N(0, spread^2) per term,
        each epoch ``log(measured / profile) = s dc + q ds + N(0, forecast_noise^2)``; each mean
        clipped to +-``deviation_limit_sd`` spreads (the range the truth is drawn from)."""
        v = self._v
        n = 1.0 / max(v["forecast_noise"], MIN_SPREAD) ** 2
        spread_c, spread_s = max(v["compute_spread"], MIN_SPREAD), max(v["sync_spread"], MIN_SPREAD)
        d1, d2 = 1.0 / spread_c**2, 1.0 / spread_s**2
        r11, r12, r22, z1, z2 = self.model_stats
        # (D + n R'R) mu = n R'z by Cramer, written in R's entries so that no two large terms cancel
        # (online_model.posterior_deviation's docstring).
        det = d1 * d2 + n * (d1 * (r12 * r12 + r22 * r22) + d2 * r11 * r11) + (n * r11 * r22) ** 2
        compute = n * r11 * (d2 * z1 + n * r22 * (r22 * z1 - r12 * z2))
        sync = n * (d1 * (r12 * z1 + r22 * z2) + n * r11 * r11 * r22 * z2)
        limit_c, limit_s = v["deviation_limit_sd"] * spread_c, v["deviation_limit_sd"] * spread_s
        mu_compute = min(max(compute / det, -limit_c), limit_c)
        mu_sync = min(max(sync / det, -limit_s), limit_s)
        return mu_compute, mu_sync

    # Reset ----------------------------------------------------------------------------------
    def _sample_job(self, u: list[float]) -> Job:
        """Draw the job, its truth, request, preference and SLA targets (``job_generator.sample_job``)."""
        p, v = self.params, self._v
        workload = _categorical(u[d.WORKLOAD], p.workload_cdf)
        gpu_type = _categorical(u[d.GPU_TYPE], p.gpu_type_cdf)
        kind = _categorical(u[d.SCENARIO], p.scenario_cdf)
        profile = p.jobs[workload][gpu_type]
        deviation = self._deviation(u)
        truth = profile.deviated(*deviation)
        epochs = _uniform_int(u[d.EPOCHS], v["epochs_min"][workload], v["epochs_max"][workload])
        gpus = v["requested_gpu_bins"][_categorical(u[d.REQUESTED_GPUS], p.requested_gpu_cdf[workload])]
        gpus = min(gpus if profile.data_parallel else 1, v["max_gpus"])  # CPUs from the GPUs it gets
        ratio = v["requested_cpus_per_gpu_values"][_categorical(u[d.REQUESTED_CPUS], p.cpus_per_gpu_cdf)]
        requested = self._clip_allocation(gpus, on_cpu_lattice(v, gpus, ratio))
        # The user plans with the profile's forecast of the request.
        epoch_time, throughput, _, _, memory, _, price, _, _ = self._epoch_metrics(profile, *requested, False)
        planned_time = epochs * epoch_time
        planned_cost = planned_time * price / 3600.0
        f = [
            lo + (hi - lo) * u[i]
            for lo, hi, i in zip(
                v["sla_factor_low"][kind], v["sla_factor_high"][kind], d.SLA_FACTORS, strict=True
            )
        ]
        # Feasibility floors: the profile's fastest and cheapest static epochs (never the truth).
        margin = v["feasibility_margin"]
        fastest = v["fastest_epoch_s"][workload][gpu_type]
        cheapest = v["cheapest_epoch_usd"][workload][gpu_type]
        targets = (
            max(f[0] * planned_time, margin * epochs * fastest),
            max(f[1] * planned_cost, margin * epochs * cheapest),
            min(f[2] * throughput, profile.samples_per_epoch / fastest / margin),
            f[3] * memory,
            f[4],
            f[5],
        )
        # References: the true job at its request (evaluated on the true constants).
        time_ref = epochs * self._epoch_metrics(truth, *requested, False)[0]
        if v["use_fixed_preference"]:
            preference = p.fixed_preference
        elif u[d.RANDOM_PREFERENCE] < v["random_preference_prob"]:
            low, high = sorted(u[i] for i in d.PREFERENCE)
            preference = (low, high - low, 1.0 - high)
        elif u[d.RANDOM_PREFERENCE] < np.float32(v["random_preference_prob"]) + np.float32(
            v["opposed_preference_prob"]
        ):
            preference = p.opposed_preferences[kind]
        else:
            preference = p.kind_preferences[kind]
        shift = self._draw_shift(u, epochs, targets[0], targets[1], margin * epochs * fastest,
                                 margin * epochs * cheapest)  # fmt: skip
        return Job(
            workload, gpu_type, kind, epochs, truth, profile, deviation, requested, tuple(preference),
            targets, time_ref, time_ref * price / 3600.0, throughput, shift,
        )  # fmt: skip

    def _draw_shift(
        self, u: list[float], epochs: int, deadline: float, budget: float, deadline_floor: float,
        budget_floor: float,
    ) -> tuple[int, int, float]:  # fmt: skip
        """The job's mid-run event (``shifts.draw_shift``): kind, epoch it happens after, value."""
        v = self._v
        kind = _categorical(u[d.SHIFT_KIND], self.params.shift_cdf)
        low = max(_round_half_even(np.float32(v["shift_at_low"]) * np.float32(epochs)), 1)
        high = max(_round_half_even(np.float32(v["shift_at_high"]) * np.float32(epochs)), low)
        at = _uniform_int(u[d.SHIFT_EPOCH], low, high)
        size_low, size_high = v["shift_size_low"][kind], v["shift_size_high"][kind]
        size = size_low + (size_high - size_low) * u[d.SHIFT_SIZE]
        if kind == shifts.DEADLINE_CUT:
            return kind, at, min(deadline, max(size * deadline, deadline_floor))
        if kind == shifts.BUDGET_CUT:
            return kind, at, min(budget, max(size * budget, budget_floor))
        return kind, at, size

    def _event_fires(self, epoch_after: int) -> bool:
        """Whether the job's event happens at the end of the epoch that reaches ``epoch_after``."""
        kind, at, _ = self.job.shift
        return kind != shifts.NONE and at < self.job.epochs and epoch_after == at

    def _shift_job(self) -> None:
        """Apply the job's event to its world (``shifts.shifted_job``): targets and prices."""
        job = self.job
        kind, _, value = job.shift
        if kind == shifts.PRICE_RISE:
            job.constants = dataclasses.replace(job.constants, gpu_price=job.constants.gpu_price * value)
            job.profile = dataclasses.replace(job.profile, gpu_price=job.profile.gpu_price * value)
        elif kind in (shifts.DEADLINE_CUT, shifts.BUDGET_CUT):
            targets = list(job.targets)
            targets[0 if kind == shifts.DEADLINE_CUT else 1] = value
            job.targets = tuple(targets)

    def _preempted_allocation(self, gpus: int, cpus: int, keep_share: float) -> tuple[int, int]:
        """Where a preemption restarts the job (``shifts.preempted_allocation``)."""
        new_gpus = max(math.floor(keep_share * gpus), 1)
        step = self._v["cpu_step"]
        return self._clip_allocation(new_gpus, _round_half_even(cpus / gpus * new_gpus / step) * step)

    def _initial_allocation(self, u: list[float]) -> tuple[int, int]:
        """Allocation at the first epoch by the init strategy (``params.INIT_STRATEGIES`` order)."""
        v = self._v
        strategy, g_max, step = INIT_STRATEGIES[v["init_strategy"]], v["max_gpus"], v["cpu_step"]
        if strategy == "mixed":
            strategy = MIXED_INIT_STRATEGIES[_categorical(u[d.INIT_MIX], self.params.init_mix_cdf)]
        if strategy == "cold":
            return self._clip_allocation(1, step)
        if strategy == "requested":
            return self._clip_allocation(*self.job.requested)
        if strategy == "random":
            gpus = _uniform_int(u[d.INIT_GPUS], 1, g_max)
            levels = -(-gpus // v["gpus_per_node"]) * v["cpus_per_node"] // step * step
            return self._clip_allocation(gpus, step * _uniform_int(u[d.INIT_CPUS], 1, levels // step))
        assert strategy == "max", strategy
        return self._clip_allocation(g_max, 1 << 20)

    def reset(
        self, u_reset: Sequence[float] | Any, params: EnvParams | HostParams | None = None
    ) -> list[float]:
        """Start a new job from ``RESET_DRAWS`` uniforms (optionally under new params); its observation."""
        if params is not None:
            self._use(params)
        u = _floats(u_reset)
        self.job = job = self._sample_job(u)
        key = (job.workload, job.gpu_type)
        if key not in self._target_metrics:  # the profile at every target, once per (workload, GPU type)
            self._target_metrics[key] = [
                self._epoch_metrics(job.profile, g, c, False) for g, c in self.params.targets
            ]
        self.gpus, self.cpus = self._initial_allocation(u)
        self.contended = u[d.CONTENTION_AT_START] < self.params.contention_stationary
        self.event_left = False
        self.steps = self.epoch = self.reallocations = 0
        self.elapsed_s = self.cost_usd = self.gpu_busy_s = self.cpu_busy_s = 0.0
        self.peak_memory_gib = self.severity_sum = 0.0
        # Nothing measured yet: the readings are the profile's forecast for the first allocation.
        m = self.profile_now = self._epoch_metrics(job.profile, self.gpus, self.cpus, False)
        self.model_stats = [0.0] * 5
        self.surprise = 0.0
        self.multipliers = (0.0,) * 6
        self._take_readings(m, m[0], m[1], m[2], m[3], 0.0, 0.0, 0)
        return self.observation()

    # Step -----------------------------------------------------------------------------------
    def step(
        self, u_step: Sequence[float] | Any, u_reset: Sequence[float] | Any, action: int
    ) -> tuple[list[float], tuple[float, float, float], bool, bool, Info]:
        """One decision and one epoch; auto-resets from ``u_reset`` when the job ends (see class)."""
        reward, terminated, info = self._transition(_floats(u_step), int(action))
        truncated = self.steps >= self._v["max_steps_in_episode"] and not terminated
        obs = final_obs = self.observation()
        final_slack = self.observation_slack
        final_state = self.state_dict()
        info["final_weights"] = self.weights
        if terminated or truncated:
            obs = self.reset(u_reset)
        info["weights"] = self.weights
        info["terminated"] = terminated
        info["truncated"] = truncated
        info["final_observation"] = final_obs
        info["final_state"] = final_state
        info["final_observation_slack"] = final_slack
        info["observation_slack"] = self.observation_slack
        return obs, reward, terminated, truncated, info

    def _apply(self, action: int) -> tuple[int, int]:
        """Allocation after ``action`` (already clipped to the set): a move 0-8, an absolute target,
        or relocate (the same allocation)."""
        if action == RELOCATE_ACTION:
            return self.gpus, self.cpus
        if action >= NUM_MOVES:
            return self.params.targets[action - NUM_MOVES]
        gpu_delta, cpu_steps = _DELTAS[action]
        return self._clip_allocation(self.gpus + gpu_delta, self.cpus + cpu_steps * self._v["cpu_step"])

    def _transition(self, u: list[float], action: int) -> tuple[tuple[float, float, float], bool, Info]:
        """Apply ``action`` and run one epoch (no reset): reward, terminated, info."""
        v, job = self._v, self.job
        kind, at, shift_value = job.shift
        # A preemption restarts the job on fewer GPUs before this epoch, ahead of the action.
        restart = 0.0
        held_gpus = self.gpus
        if kind == shifts.PREEMPTION and at < job.epochs and self.epoch == at:
            forced = self._preempted_allocation(self.gpus, self.cpus, shift_value)
            if forced != (self.gpus, self.cpus):
                restart = v["reallocation_pause_s"]
            self.gpus, self.cpus = forced
        action = min(max(action, 0), self.num_actions - 1)  # clipped to the set, as the env clips it
        gpus, cpus = self._apply(action)
        relocate = action == RELOCATE_ACTION  # only in targets_relocate
        gpus_changed = gpus != self.gpus
        changed = gpus_changed or cpus != self.cpus or relocate
        # A GPU change or a relocation restarts the job on fresh nodes: it leaves their contention,
        # and its event if that is a contention spell or a slow node that has happened (shifts.py).
        relocated = (gpus_changed or self.gpus != held_gpus or relocate) and bool(v["moves_leave_contention"])
        on_the_nodes = kind in (shifts.CONTENTION, shifts.SLOW_NODE) and at < job.epochs and self.epoch >= at
        self.event_left = self.event_left or (on_the_nodes and relocated)
        switch = u[d.CONTENTION_SWITCH]
        if self.contended and not relocated:
            contended = switch >= v["contention_end_prob"]
        else:
            contended = switch < v["contention_start_prob"]
        # The job runs on its true constants; the agent's model keeps the profile's forecast. A
        # contention spell or a slow node (shifts.py) slows every epoch after its event until the
        # job leaves its nodes.
        holds = on_the_nodes and not self.event_left
        spell = holds and kind == shifts.CONTENTION
        running = job.constants
        if holds and kind == shifts.SLOW_NODE:
            running = dataclasses.replace(running, compute_s=running.compute_s * shift_value)
        m = self._epoch_metrics(running, gpus, cpus, contended or spell)
        base_time, _, gpu_util, cpu_util, memory, _, price, _, _ = m
        profile_now = self._epoch_metrics(job.profile, gpus, cpus, False)
        epoch_time = base_time * math.exp(v["epoch_time_noise"] * _logistic(u[d.EPOCH_NOISE]))
        # A GPU change or a relocation checkpoints and restarts the job; a CPU-only change restarts
        # the data loaders.
        if gpus_changed or relocate:
            pause = v["reallocation_pause_s"]
        else:
            pause = v["cpu_reallocation_pause_s"] if changed else 0.0
        interval = epoch_time + pause + restart
        interval_cost = interval * price / 3600.0
        working = epoch_time / interval
        noise = v["util_noise"]
        gpu_util = _unit(gpu_util * working + noise * (2.0 * u[d.GPU_UTIL_NOISE] - 1.0))
        cpu_util = _unit(cpu_util * working + noise * (2.0 * u[d.CPU_UTIL_NOISE] - 1.0))
        throughput = job.constants.samples_per_epoch / interval
        epoch = self.epoch + 1
        # The job's event happens at the end of this epoch (a price rise reprices it at once).
        profile_ran = profile_now
        if self._event_fires(epoch):
            self._shift_job()
            if kind == shifts.PRICE_RISE:
                profile_now = self._epoch_metrics(job.profile, gpus, cpus, False)
        elapsed = self.elapsed_s + interval
        cost = self.cost_usd + interval_cost
        step_weights = self.weights
        readings = (*m[:6], profile_now[6], *m[7:])  # the price from now on
        self._take_readings(readings, epoch_time, throughput, gpu_util, cpu_util, elapsed, cost, epoch)
        self.steps += 1
        self.epoch, self.gpus, self.cpus, self.contended = epoch, gpus, cpus, contended
        self.elapsed_s, self.cost_usd = elapsed, cost
        self.gpu_busy_s += gpu_util * interval
        self.cpu_busy_s += cpu_util * interval
        self.peak_memory_gib = max(self.peak_memory_gib, memory)
        self.reallocations += changed
        self.profile_now = profile_now
        # The epoch against the model's forecast of it before it ran (online_model.epoch_surprise).
        mu_compute, mu_sync = self.posterior_deviation()
        forecast = profile_ran[0] * math.exp(profile_ran[7] * mu_compute + profile_ran[8] * mu_sync)
        self.surprise = math.log(max(epoch_time, 1e-9)) - math.log(max(forecast, 1e-9))
        self._record_epoch(epoch_time, profile_ran[0], profile_ran[7], profile_ran[8])
        severities = self.severities
        mean_severity = sum(severities) / len(severities)
        self.severity_sum += mean_severity
        terminated = epoch >= job.epochs
        info = self.episode_figures()
        sla_reward = -mean_severity / job.epochs
        if terminated:  # per job-level SLA met, and more for all six
            met = info["job_sla_met"]
            sla_reward += v["sla_met_bonus"] * sum(met) + (v["all_slas_bonus"] if all(met) else 0.0)
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
        info["projected_remaining_time_s"] = self.projected_remaining_time_s
        info["projected_remaining_cost_usd"] = self.projected_remaining_cost_usd
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
            _margin(self.epoch * job.constants.samples_per_epoch / elapsed, min_throughput),
            (max_memory - self.peak_memory_gib) / max(abs(max_memory), 1e-9),
            _margin(self.gpu_busy_s / elapsed, min_gpu_util),
            _margin(self.cpu_busy_s / elapsed, min_cpu_util),
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
        """Every feature of the current state (``observation.FEATURE_NAMES`` order), in [0, 1]:
        the paper's 21, then the forecast block. Sets :attr:`observation_slack`."""
        paper = self._paper_features()
        forecast, slack = self._forecast_features()
        self.observation_slack = [INF] * NUM_PAPER_FEATURES + slack
        return paper + forecast

    def _paper_features(self) -> list[float]:
        """The paper's 21 features."""
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

    def _forecast_features(self) -> tuple[list[float], list[float]]:
        """The forecast block (``forecast.py``'s order: every target's time, every target's cost, every
        target's other SLAs, every target's suggestion flag, keep's four, the six job features), and
        its per-feature slack.

        For each target and for keeping the allocation: the job moved there now and kept there, its
        epochs left at the profile's epoch time corrected by the posterior, plus the pause the move
        costs; its time and cost over the deadline and budget (halved, capped at 2), and the fraction
        of the four other job-level SLAs (samples / total time, peak memory, time-weighted GPU and CPU
        utilisation over the whole job) it would meet, whose smallest |relative margin| is the slack.
        One loop with local names: it is most of a step's cost in the benchmark."""
        v, job = self._v, self.job
        mu_compute, mu_sync = self.posterior_deviation()
        left = job.epochs - self.epoch
        pause_gpu, pause_cpu = v["reallocation_pause_s"], v["cpu_reallocation_pause_s"]
        deadline, budget, min_throughput, max_memory, min_gpu_util, min_cpu_util = job.targets
        samples = job.epochs * job.profile.samples_per_epoch
        elapsed, cost, peak = self.elapsed_s, self.cost_usd, self.peak_memory_gib
        gpu_busy, cpu_busy, gpus_now, cpus_now = self.gpu_busy_s, self.cpu_busy_s, self.gpus, self.cpus
        throughput_scale = 1.0 / max(abs(min_throughput), 1e-9)
        memory_scale = 1.0 / max(abs(max_memory), 1e-9)
        gpu_scale = 1.0 / max(abs(min_gpu_util), 1e-9)
        cpu_scale = 1.0 / max(abs(min_cpu_util), 1e-9)
        times, costs, others, slack = [], [], [], []
        totals = []  # (total time, total cost, SLAs met of 6, smallest relative margin of those checks)
        entries = [*zip(self.params.targets, self._target_metrics[(job.workload, job.gpu_type)], strict=True),
                   ((gpus_now, cpus_now), self.profile_now)]  # fmt: skip
        # The target table prices the GPU type's list price; a price rise adds the difference per GPU.
        price_change = job.profile.gpu_price - v["gpu_price_per_hour"][job.gpu_type]
        epoch_s = 0.0
        for (gpus, cpus), m in entries:
            epoch_time, _, gpu_util, cpu_util, memory, _, price, s, q = m
            if price_change and len(totals) < NUM_TARGETS:
                price = float(np.float32(price) + np.float32(price_change) * np.float32(gpus))
            pause = pause_gpu if gpus != gpus_now else (pause_cpu if cpus != cpus_now else 0.0)
            epoch_s = epoch_time * math.exp(s * mu_compute + q * mu_sync)  # the online model's
            work = left * epoch_s
            total_time = elapsed + pause + work
            total_cost = cost + (pause + work) * price / 3600.0
            safe_time = total_time if total_time > 1e-9 else 1e-9
            m1 = (samples / safe_time - min_throughput) * throughput_scale
            m2 = (max_memory - (peak if peak > memory else memory)) * memory_scale
            m3 = ((gpu_busy + work * gpu_util) / safe_time - min_gpu_util) * gpu_scale
            m4 = ((cpu_busy + work * cpu_util) / safe_time - min_cpu_util) * cpu_scale
            times.append(0.5 * min(max(total_time / deadline, 0.0), RATIO_CAP))
            costs.append(0.5 * min(max(total_cost / budget, 0.0), RATIO_CAP))
            met = (m1 >= 0.0) + (m2 >= 0.0) + (m3 >= 0.0) + (m4 >= 0.0)
            others.append(0.25 * met)
            slack.append(min(abs(m1), abs(m2), abs(m3), abs(m4)))
            met += (total_time <= deadline) + (total_cost <= budget)
            margin = min(slack[-1], abs(total_time / deadline - 1.0), abs(total_cost / budget - 1.0))
            totals.append((total_time, total_cost, met, margin, gpus == gpus_now and cpus == cpus_now))
        now_epoch_s = epoch_s  # the last entry is keep's
        job_features = [
            pause_gpu / max(pause_gpu + now_epoch_s, 1e-9),
            left / (left + EPOCHS_LEFT_SCALE),
            1.0 if job.profile.data_parallel else 0.0,
            0.5 + 0.5 * math.tanh(2.0 * mu_compute),
            0.5 + 0.5 * math.tanh(2.0 * mu_sync),
            0.5 + 0.5 * math.tanh(2.0 * self.surprise),
        ]
        suggested, suggested_slack = self._suggestion([totals[-1][:4], *(
            (t[:4] if not t[4] else None) for t in totals[:-1])])  # fmt: skip
        keep = [times.pop(), costs.pop(), others.pop(), suggested[0]]
        keep_slack = slack.pop()
        features = times + costs + others + suggested[1:] + keep + job_features
        no_check = [INF] * NUM_TARGETS
        slack = (no_check + no_check + slack + [suggested_slack] * NUM_TARGETS
                 + [INF, INF, keep_slack, suggested_slack] + [INF] * len(job_features))  # fmt: skip
        return features, slack

    def _suggestion(
        self, candidates: list[tuple[float, float, int, float] | None]
    ) -> tuple[list[float], float]:
        """``forecast.suggestion``: the one-hot first choice among the candidates (keep first, then
        the targets; ``None`` for a target at the current allocation) and its slack: the smallest
        relative margin of any candidate's SLA checks, or the relative gap to the runner-up (objective,
        then cost). It ranks exactly; the env counts gaps within ``forecast.RANK_TOLERANCE`` (2e-6)
        as ties, far inside the gaps the env tests treat as near ties."""
        job = self.job
        request_price = self._price(job.profile, *job.requested)
        w_time, w_cost = job.preference[0], job.preference[1]
        live = [c for c in candidates if c is not None]
        most = max(c[2] for c in live)
        scored = sorted(
            (w_time * t + w_cost * cost * 3600.0 / max(request_price, 1e-9), cost, index)
            for index, (t, cost, met, _) in enumerate(
                c if c is not None else (0, 0, -1, INF) for c in candidates
            )
            if met == most
        )
        best = scored[0]
        runner_up = next((c for c in scored[1:] if c[:2] != best[:2]), None)  # exact copies rank by index
        gap = INF
        if runner_up is not None:
            key = 0 if runner_up[0] != best[0] else 1  # objective, then cost
            gap = (runner_up[key] - best[key]) / max(abs(best[key]), 1e-30)
        one_hot = [1.0 if index == best[2] else 0.0 for index in range(len(candidates))]
        return one_hot, min(gap, *(c[3] for c in live))

    def state_dict(self) -> Info:
        """The current state under ``EnvState``'s field names (nested dicts for ``job`` and
        ``profile_now``; the job's constants and profile by their compute and four sync terms)."""
        job = self.job

        def constants(c: JobOnCluster) -> dict[str, float]:
            return {
                "compute_s": c.compute_s,
                "sync_local_alpha_s": c.sync_local[0],
                "sync_local_beta_s": c.sync_local[1],
                "sync_node_alpha_s": c.sync_node[0],
                "sync_node_beta_s": c.sync_node[1],
                "gpu_price_per_hour": c.gpu_price,
            }

        return {
            "job": {
                "workload": job.workload,
                "gpu_type": job.gpu_type,
                "scenario": job.scenario,
                "epochs": job.epochs,
                "constants": constants(job.constants),
                "profile": constants(job.profile),
                "deviation": job.deviation,
                "requested_gpus": job.requested[0],
                "requested_cpus": job.requested[1],
                "preference": job.preference,
                "sla_targets": job.targets,
                "time_ref_s": job.time_ref_s,
                "cost_ref_usd": job.cost_ref_usd,
                "throughput_ref": job.throughput_ref,
                "shift_kind": job.shift[0],
                "shift_epoch": job.shift[1],
                "shift_value": job.shift[2],
            },
            **{name: getattr(self, name) for name in _STATE_FIELDS},
            "profile_now": dict(zip(METRIC_NAMES, self.profile_now, strict=True)),
            "model_stats": tuple(self.model_stats),
        }

    @property
    def allocation(self) -> tuple[int, int]:
        """Current (GPUs, CPUs)."""
        return self.gpus, self.cpus
