"""Up-front validation of ``EnvParams``: a bad value raises ``ValueError`` naming the field and range.

Runs on concrete (host) values, before anything is compiled. ``slamorl_jax.env.make`` calls it on
the params it returns (the CLIs build theirs from validated flags and the shipped catalogue);
``JobAllocationEnv.reset``, ``step`` and ``step_batch`` do not (they run under ``jit``, on traced
values, and a check per step would cost more than the step); they check only what is static, the
ranks of the fields (:func:`check_one_configuration`: a sweep's axis left unmapped). Call it
yourself on params you change (``with_values``, ``.replace``, a ``vmap`` sweep): unchecked, NaN or
out-of-range values turn into NaN rewards without an error. ``with_values`` already refuses casts
that would change a value (2.5 GPUs per node for an integer field).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.action_sets import NUM_TARGET_CPUS_PER_GPU, NUM_TARGET_GPUS
from slamorl_jax.env.derived import (
    DERIVED_FIELDS,
    non_finite_derived_fields,
    stale_derived_fields,
    with_derived_tables,
)
from slamorl_jax.env.objectives import NUM_OBJECTIVES, NUM_SLAS
from slamorl_jax.env.params import (
    FIELD_ALIASES,
    INIT_STRATEGIES,
    MAX_GPUS,
    MIXED_INIT_STRATEGIES,
    NUM_SCENARIO_KINDS,
    WEIGHT_MODES,
    EnvParams,
    WorkloadParams,
)
from slamorl_jax.env.shifts import NUM_SHIFT_KINDS, PREEMPTION, SLOW_NODE

INF = float("inf")

# field: (low, high, integer?) — inclusive bounds on every element of the field.
SCALAR_RANGES: dict[str, tuple[float, float, bool]] = {
    "gpus_per_node": (1, MAX_GPUS, True),
    "cpus_per_node": (1, 1024, True),
    "max_nodes": (1, MAX_GPUS, True),
    "max_gpus_per_job": (1, MAX_GPUS, True),
    "cpu_step": (1, 64, True),
    "intra_node_gbps": (1e-3, 1e6, False),
    "inter_node_gbps": (1e-3, 1e6, False),
    "host_memory_gib_per_gpu": (0.0, 4096.0, False),
    "memory_gib_per_vcpu": (1e-3, 1024.0, False),
    "worker_memory_gib_per_busy_cpu": (0.0, 1024.0, False),
    "gpu_price_per_hour": (0.0, 1e4, False),
    "vcpu_price_per_hour": (0.0, 1e4, False),
    "gib_price_per_hour": (0.0, 1e4, False),
    "random_preference_prob": (0.0, 1.0, False),
    "opposed_preference_prob": (0.0, 1.0, False),
    "fixed_preference": (0.0, 1.0, False),
    "sla_factor_low": (0.0, 1e3, False),
    "sla_factor_high": (0.0, 1e3, False),
    "feasibility_margin": (1.0, 10.0, False),
    "requested_gpu_bins": (1, 1_000_000, True),
    "requested_cpus_per_gpu_values": (0.0, 1024.0, False),
    "init_strategy": (0, len(INIT_STRATEGIES) - 1, True),
    "reallocation_pause_s": (0.0, 86_400.0, False),
    "cpu_reallocation_pause_s": (0.0, 86_400.0, False),
    "epoch_time_noise": (0.0, 1.0, False),
    "util_noise": (0.0, 0.5, False),
    "contention_start_prob": (0.0, 1.0, False),
    "contention_end_prob": (0.0, 1.0, False),
    "contention_compute_slowdown": (0.0, 100.0, False),
    "contention_network_slowdown": (0.0, 100.0, False),
    "shift_at_low": (0.0, 1.0, False),
    "shift_at_high": (0.0, 1.0, False),
    "shift_size_low": (0.0, 100.0, False),
    "shift_size_high": (0.0, 100.0, False),
    "adapt_strength": (0.0, 100.0, False),
    "weights_mode": (0, len(WEIGHT_MODES) - 1, True),
    "dual_step": (0.0, 100.0, False),
    "dual_decay": (0.0, 1.0, False),
    "dual_max": (0.0, 1000.0, False),
    "reward_clip": (1e-3, 1e6, False),
    "sla_met_bonus": (0.0, 100.0, False),
    "all_slas_bonus": (0.0, 100.0, False),
    "compute_spread": (0.0, 2.0, False),
    "sync_spread": (0.0, 2.0, False),
    "deviation_limit_sd": (0.1, 10.0, False),
    "forecast_noise": (1e-3, 10.0, False),
    "target_gpus": (1, MAX_GPUS, True),
    "target_cpus_per_gpu": (0.0, 1024.0, False),
    "max_steps_in_episode": (1, 1_000_000, True),
}
DERIVED = DERIVED_FIELDS
PROBABILITY_FIELDS = (
    "workload_probs",
    "gpu_type_probs",
    "scenario_probs",
    "requested_cpus_per_gpu_probs",
    "init_mix_probs",
    "kind_preference",  # each kind's preset preference: a row on the simplex
    "opposed_preference",
    "shift_probs",
)
WORKLOAD_RANGES: dict[str, tuple[float, float, bool]] = {
    "samples_per_epoch": (1.0, 1e12, False),
    "local_batch": (1.0, 1e9, False),
    "epochs_min": (1, 100_000, True),
    "epochs_max": (1, 100_000, True),
    "compute_alpha_s": (0.0, 1e5, False),
    "compute_beta_s": (0.0, 1e5, False),
    "sync_local_alpha_s": (-1e5, 1e5, False),
    "sync_local_beta_s": (-1e5, 1e5, False),
    "sync_node_alpha_s": (-1e5, 1e5, False),
    "sync_node_beta_s": (-1e5, 1e5, False),
    "sync_two_node_factor": (1.0, 100.0, False),
    "gamma": (1.0, 100.0, False),
    "calibration_intra_node_gbps": (1e-3, 1e6, False),
    "calibration_inter_node_gbps": (1e-3, 1e6, False),
    "calibration_cpus_per_gpu": (1e-3, 1024.0, False),
    "compute_speed": (1e-6, 1e6, False),
    "cpu_c_sat": (0.0, 1024.0, False),
    "cpu_p": (1e-3, 100.0, False),
}

# The cheapest allocation's price floor ($ an hour): far below any real price, and far above the
# float32 values XLA:CPU flushes to zero (a denormal price passed a "> 0" check, then the job's
# budget and cost reference came out 0 and its observations NaN).
MIN_CHEAPEST_PRICE = 1e-6


# Fields whose length the static shapes of the env fix (the action grid, the mixed starts).
FIXED_SHAPES: dict[str, tuple[int, ...]] = {
    "target_gpus": (NUM_TARGET_GPUS,),
    "target_cpus_per_gpu": (NUM_TARGET_CPUS_PER_GPU,),
    "init_mix_probs": (len(MIXED_INIT_STRATEGIES),),
    "kind_preference": (NUM_SCENARIO_KINDS, NUM_OBJECTIVES),
    "opposed_preference": (NUM_SCENARIO_KINDS, NUM_OBJECTIVES),
    "shift_probs": (NUM_SHIFT_KINDS,),
    "shift_size_low": (NUM_SHIFT_KINDS,),
    "shift_size_high": (NUM_SHIFT_KINDS,),
}


# Flags (bool fields): any other value would be read as True under ``jnp.where``, NaN included.
FLAG_FIELDS = ("use_fixed_preference", "moves_leave_contention", "workloads.data_parallel")
# Fields whose length is the catalogue's: W workloads, T GPU types, B request bins, R request ratios
# (sized by ``workloads.compute_speed`` (W, T), ``requested_gpu_bins`` (B,) and
# ``requested_cpus_per_gpu_values`` (R,), which must agree with every other field).
SIZED_SHAPES: dict[str, tuple[int | str, ...]] = {
    "gpu_price_per_hour": ("T",),
    "workload_probs": ("W",),
    "gpu_type_probs": ("T",),
    "scenario_probs": (NUM_SCENARIO_KINDS,),
    "fixed_preference": (NUM_OBJECTIVES,),
    "sla_factor_low": (NUM_SCENARIO_KINDS, NUM_SLAS),
    "sla_factor_high": (NUM_SCENARIO_KINDS, NUM_SLAS),
    "requested_gpu_bins": ("B",),
    "requested_cpus_per_gpu_values": ("R",),
    "requested_cpus_per_gpu_probs": ("R",),
    "workloads.compute_speed": ("W", "T"),
    "workloads.requested_gpu_probs": ("W", "B"),
}


# What each size letter of ``SIZED_SHAPES`` counts, for the error message.
SIZE_NAMES = {
    "W": "workload",
    "T": "GPU type",
    "B": "entry of requested_gpu_bins",
    "R": "entry of requested_cpus_per_gpu_values",
}


def _leaves(params: EnvParams) -> dict[str, np.ndarray]:
    """Every non-derived field of ``params`` as a host array, workload fields as ``workloads.<name>``;
    ``TypeError`` naming a field that is not an array of numbers."""
    if not isinstance(params, EnvParams):
        raise TypeError(f"params must be EnvParams, got {type(params).__name__}")
    if not isinstance(params.workloads, WorkloadParams):
        raise TypeError(f"EnvParams.workloads must be WorkloadParams, got {type(params.workloads).__name__}")
    host = {}
    integer_fields = _integer_fields()
    for name, value in _fields(params).items():
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"EnvParams.{name} must hold numbers, got {array.dtype} {_short(value)}")
        if name in integer_fields and (isinstance(value, int | float) or array.dtype.kind == "f"):
            # A Python int has no .astype and a float array turns the job's counts into floats.
            raise TypeError(
                f"EnvParams.{name} must be an integer array such as jnp.int32(4), got "
                f"{type(value).__name__} {_short(value)}"
            )
        host[name] = array
    return host


@functools.cache
def _integer_fields() -> frozenset[str]:
    """The fields the default params hold as integer arrays (the job's counts and sizes)."""
    from slamorl_jax.env.defaults import default_params

    fields = _fields(default_params())
    return frozenset(name for name, value in fields.items() if np.asarray(value).dtype.kind in "iu")


def _fields(params: EnvParams) -> dict[str, object]:
    """Every non-derived field of ``params`` by name, workload fields as ``workloads.<name>``."""
    fields = {k: v for k, v in vars(params).items() if k != "workloads" and k not in DERIVED}
    fields.update({f"workloads.{k}": v for k, v in vars(params.workloads).items()})
    return fields


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _field_dims(name: str) -> tuple[int | str, ...]:
    """The dimensions of one configuration's field ``name`` (``workloads.<name>`` for a workload's)."""
    return FIXED_SHAPES.get(name) or SIZED_SHAPES.get(name) or (("W",) if "." in name else ())


def check_one_configuration(params: EnvParams) -> None:
    """``ValueError`` naming the first field of ``params`` with more dimensions than one
    configuration's: a sweep's params (``with_values(..., same_shape=False)``, stacked) given to a
    function that steps under one, which failed deep in ``jnp.stack``. Ranks are static: under
    ``jit`` this runs when traced and costs nothing."""
    for name, value in _fields(params).items():
        if jnp.ndim(value) > (ndim := len(_field_dims(name))):
            raise ValueError(
                f"EnvParams.{name} has shape {jnp.shape(value)}, one configuration's {ndim} dimension(s): "
                "map the sweep's axis with jax.vmap (in_axes 0 for that field, None for the others)"
            )


def _check_shapes(host: dict[str, np.ndarray]) -> None:
    """Every field's shape: a scalar unless it is listed in ``FIXED_SHAPES`` or ``SIZED_SHAPES``."""
    speed, bins = host["workloads.compute_speed"], host["requested_gpu_bins"]
    ratios = host["requested_cpus_per_gpu_values"]
    for name, value, ndim in (("workloads.compute_speed", speed, 2), ("requested_gpu_bins", bins, 1)):
        if value.ndim != ndim:
            raise ValueError(
                f"EnvParams.{name} must have {ndim} dimension(s), got shape {value.shape} (validate a "
                "stacked sweep of params one configuration at a time)"
            )
    if ratios.ndim != 1:
        raise ValueError(f"EnvParams.requested_cpus_per_gpu_values must be a vector, got {ratios.shape}")
    sizes = {"W": speed.shape[0], "T": speed.shape[1], "B": bins.shape[0], "R": ratios.shape[0]}
    for name, value in host.items():
        dims = _field_dims(name)
        shape = tuple(sizes[d] if isinstance(d, str) else d for d in dims)
        if value.shape != shape:
            per = [SIZE_NAMES[d] for d in dims if isinstance(d, str)]
            note = f" (one per {' x '.join(per)})" if per else ""
            raise ValueError(f"EnvParams.{name} must have shape {shape}{note}, got {value.shape}")


def _check_range(name: str, value: np.ndarray, low: float, high: float, integer: bool) -> None:
    if not np.all(finite := np.isfinite(value)):
        raise ValueError(f"EnvParams.{name} must be finite, got {_first_of(value, ~finite)}")
    if integer and not np.all(whole := np.equal(np.round(value), value)):
        raise ValueError(f"EnvParams.{name} must be an integer, got {_first_of(value, ~whole)}")
    # A bound as float32 holds it (1e-6 rounds to 9.99999997e-07) is within it too.
    lowest, highest = min(low, float(np.float32(low))), max(high, float(np.float32(high)))
    if np.any(outside := (value < lowest) | (value > highest)):
        shown = value.astype(np.int64) if integer else value  # a count as a count: 0, not 0.0
        raise ValueError(f"EnvParams.{name} must lie in [{low}, {high}], got {_first_of(shown, outside)}")


def _first_of(value: np.ndarray, wrong: np.ndarray) -> str:
    """``value`` where it is one number, else its first ``wrong`` entry, where it lies and how many
    are wrong (a workload table's whole array made a line of a kilobyte)."""
    if value.ndim == 0:
        return str(value.tolist())
    where = tuple(int(i) for i in np.argwhere(wrong)[0])
    index = where[0] if len(where) == 1 else list(where)
    return f"{value[where].tolist()} at index {index} ({int(wrong.sum())} of {value.size} entries)"


def _check_probabilities(name: str, value: np.ndarray) -> None:
    if value.ndim == 0 or not np.all(np.isfinite(value)) or np.any(value < 0):
        raise ValueError(f"EnvParams.{name} must be non-negative probabilities, got {value.tolist()}")
    sums = value.sum(axis=-1)
    off = np.abs(sums - 1.0) > 1e-4
    if np.any(off):
        if sums.ndim == 0:
            raise ValueError(f"EnvParams.{name} must sum to 1 (got sum {sums.tolist()})")
        rows = np.argwhere(off)  # one distribution per row: name the first that is off
        first = tuple(int(i) for i in rows[0])
        where = first[0] if len(first) == 1 else list(first)
        raise ValueError(
            f"EnvParams.{name} must sum to 1 in each row: row {where} sums to {float(sums[first]):.6g}"
            + (f" ({len(rows)} rows are off)" if len(rows) > 1 else "")
        )


def validate_params(params: EnvParams) -> EnvParams:
    """Check every field of concrete ``params``; return them unchanged or raise ``ValueError``
    (``TypeError`` for something that is not ``EnvParams`` or a field that does not hold numbers).

    Shapes are checked first: a scalar field must be a scalar (a stacked sweep of params is checked one
    configuration at a time) and the catalogue-sized ones (``SIZED_SHAPES``) must agree."""
    host = _leaves(params)
    _check_shapes(host)
    for name in FLAG_FIELDS:
        if not np.all(np.isin(host[name], (0, 1))):
            raise ValueError(f"EnvParams.{name} is a flag: True or False, got {host[name].tolist()}")
    former = {new: old for old, new in FIELD_ALIASES.items()}
    for name, (low, high, integer) in SCALAR_RANGES.items():
        label = f"{name} (formerly {former[name]})" if name in former else name
        _check_range(label, host[name].astype(np.float64), low, high, integer)
    for name in PROBABILITY_FIELDS:
        _check_probabilities(name, host[name].astype(np.float64))
    workloads = {k.removeprefix("workloads."): v for k, v in host.items() if k.startswith("workloads.")}
    for name, (low, high, integer) in WORKLOAD_RANGES.items():
        _check_range(f"workloads.{name}", workloads[name].astype(np.float64), low, high, integer)
    _check_probabilities("workloads.requested_gpu_probs", workloads["requested_gpu_probs"])
    if np.any(workloads["epochs_min"] > workloads["epochs_max"]):
        raise ValueError("EnvParams.workloads.epochs_min must not exceed epochs_max")
    if np.any(host["shift_at_low"] > host["shift_at_high"]):
        raise ValueError("EnvParams.shift_at_low must not exceed shift_at_high")
    if np.any(host["shift_size_low"] > host["shift_size_high"]):
        raise ValueError("EnvParams.shift_size_low must not exceed shift_size_high")
    if np.any(host["shift_size_low"][..., PREEMPTION] <= 0) or np.any(
        host["shift_size_high"][..., PREEMPTION] > 1
    ):
        raise ValueError("EnvParams.shift_size_* of a preemption (the share of GPUs kept) must lie in (0, 1]")
    if np.any(host["shift_size_low"][..., SLOW_NODE] <= 0):
        raise ValueError(
            "EnvParams.shift_size_low of a slow_node event (the factor on the job's compute time) must be > 0"
        )
    if np.any(host["sla_factor_low"] > host["sla_factor_high"]):
        raise ValueError("EnvParams.sla_factor_low must not exceed sla_factor_high")
    if host["sla_factor_low"][:, :4].min() <= 0:
        raise ValueError("EnvParams.sla_factor_low for time, cost, throughput, memory must be > 0")
    if host["sla_factor_high"][:, 4:].max() > 1.0:
        raise ValueError("EnvParams.sla_factor_high for gpu_util and cpu_util must be <= 1")
    cluster_gpus = int(np.max(host["gpus_per_node"] * host["max_nodes"]))
    if cluster_gpus > MAX_GPUS:
        raise ValueError(
            f"EnvParams.gpus_per_node x max_nodes = {cluster_gpus} exceeds the lattice bound "
            f"MAX_GPUS = {MAX_GPUS}"
        )
    if np.any(host["cpus_per_node"] < host["cpu_step"]):
        raise ValueError("EnvParams.cpus_per_node must be at least cpu_step")
    cheapest = (
        host["gpu_price_per_hour"].min(axis=-1) + host["vcpu_price_per_hour"] + host["gib_price_per_hour"]
    )
    if np.any(cheapest < MIN_CHEAPEST_PRICE):
        raise ValueError(
            "EnvParams prices must not all be zero (min gpu_price_per_hour + vcpu_price_per_hour + "
            f"gib_price_per_hour >= {MIN_CHEAPEST_PRICE:g} $/h): budgets and cost rewards are relative "
            "to the job's cost"
        )
    if np.any(host["fixed_preference"].sum(axis=-1) <= 0):
        raise ValueError("EnvParams.fixed_preference must have a positive sum")
    preference_share = host["random_preference_prob"] + host["opposed_preference_prob"]
    if np.any(preference_share > 1.0 + 1e-6):
        raise ValueError(
            "EnvParams.random_preference_prob + opposed_preference_prob must be at most 1 (a job takes "
            "the opposed preference when random_preference_prob <= u < their sum), got "
            f"{preference_share.max():g}"
        )
    fresh = with_derived_tables(params)
    broken = non_finite_derived_fields(fresh)
    if broken:
        raise ValueError(
            f"EnvParams.{', '.join(broken)} come out non-finite from the workload, cluster and price "
            "fields (a workload without compute time, or a CPU supply curve that vanishes): no job could "
            "run on them"
        )
    stale = stale_derived_fields(params, fresh=fresh)
    if stale:
        raise ValueError(
            f"EnvParams.{', '.join(stale)} are stale: call "
            "slamorl_jax.env.with_derived_tables(params) after changing workload, cluster, price, "
            "target or request fields"
        )
    return params


#: The params objects :func:`validate_params_once` passed lately, newest last (identity, not value).
_RECENTLY_VALIDATED: list[EnvParams] = []
RECENTLY_VALIDATED_KEPT = 8


def validate_params_once(params: EnvParams) -> EnvParams:
    """:func:`validate_params`, skipped for an object it passed lately: the host-side entry points
    (``recommend``, ``run_episodes``) check their caller's params, and a loop that passes the same
    object pays the check (a few milliseconds) once. ``EnvParams`` are frozen, so an object that
    passed stays valid, unless a NumPy array given as a field is written into afterwards (replace a
    field's value, do not write into it)."""
    if any(params is seen for seen in _RECENTLY_VALIDATED):
        return params
    validate_params(params)
    _RECENTLY_VALIDATED.append(params)
    del _RECENTLY_VALIDATED[:-RECENTLY_VALIDATED_KEPT]
    return params


def validate_params_if_concrete(params: EnvParams) -> EnvParams:
    """:func:`validate_params_once` for concrete params, even inside a traced function (a scan body
    closing over them), and a no-op for params traced under ``jit`` or ``vmap`` (nothing to read
    there; their caller's host-side entry checks them): what a public function that may run either
    way (``Trainer.init``, ``update_chunk``) calls."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(params)):
        return params
    with jax.ensure_compile_time_eval():  # concrete params inside a trace (a scan body): still checked
        return validate_params_once(params)
