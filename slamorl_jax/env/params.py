"""``EnvParams``: every numeric knob of the environment as a traced leaf, with defaults and validation.

One compiled ``reset``/``step`` serves every configuration, and ``vmap`` can sweep any field. The
calibrated workload constants live in ``EnvParams.workloads`` (from :mod:`slamorl_jax.env.catalog`).
Static sizes (13 workloads, 4 GPU types, 6 request bins, the 32-GPU lattice bound) are fixed by the
catalogue and :data:`MAX_GPUS`.

Cluster defaults describe the Pollux cluster the calibration data came from: AWS g4dn.12xlarge nodes
(4 x T4 on PCIe 3.0, 48 vCPU, 192 GiB, 50 Gb/s network), up to 4 nodes per job.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

# Static bound of the allocation lattice (GPUs per job); validated against the cluster size.
MAX_GPUS = 32
NUM_SCENARIO_KINDS = 3  # deadline-critical, budget-constrained, balanced (see scenarios.py)
INIT_STRATEGIES = ("cold", "requested", "random", "max", "mixed")
# The strategies a ``mixed`` start draws from, in the order of ``EnvParams.init_mix_probs``.
MIXED_INIT_STRATEGIES = ("cold", "requested", "random")
# Forms of the objective weights (dual_weights.py); ``EnvParams.weights_mode`` indexes this.
WEIGHT_MODES = ("static", "severity", "dual")
T = TypeVar("T")


@struct.dataclass
class WorkloadParams:
    """Calibrated per-workload constants, shape (W,) unless noted (see ``docs/calibration.md``)."""

    samples_per_epoch: jax.Array
    local_batch: jax.Array
    epochs_min: jax.Array  # int32
    epochs_max: jax.Array  # int32
    data_parallel: jax.Array  # bool: extra GPUs speed the job up
    compute_alpha_s: jax.Array
    compute_beta_s: jax.Array
    sync_local_alpha_s: jax.Array
    sync_local_beta_s: jax.Array
    sync_node_alpha_s: jax.Array
    sync_node_beta_s: jax.Array
    sync_two_node_factor: jax.Array
    gamma: jax.Array
    calibration_intra_node_gbps: jax.Array
    calibration_inter_node_gbps: jax.Array
    calibration_cpus_per_gpu: jax.Array
    compute_speed: jax.Array  # (W, T) speed of each GPU type relative to the calibration GPU
    cpu_c_sat: jax.Array
    cpu_p: jax.Array
    requested_gpu_probs: jax.Array  # (W, B) over ``EnvParams.requested_gpu_bins``


@struct.dataclass
class EnvParams:
    """All knobs of :class:`slamorl_jax.env.job_env.JobAllocationEnv` (units in the names)."""

    workloads: WorkloadParams
    # Cluster: nodes of fixed shape; a job of g GPUs spans ceil(g / gpus_per_node) nodes.
    gpus_per_node: jax.Array
    cpus_per_node: jax.Array
    max_nodes: jax.Array
    max_gpus_per_job: jax.Array
    cpu_step: jax.Array  # CPUs added or removed by one action
    intra_node_gbps: jax.Array  # GPU-to-GPU link inside a node (PCIe 3.0 x16 ~ 128, NVLink more)
    inter_node_gbps: jax.Array  # network between nodes
    host_memory_gib_per_gpu: jax.Array  # host memory a training process holds per GPU
    memory_gib_per_vcpu: jax.Array  # memory allocated (and billed) with each vCPU
    worker_memory_gib_per_busy_cpu: jax.Array  # memory a busy data-loading worker uses
    # Prices.
    gpu_price_per_hour: jax.Array  # (T,) $ per GPU-hour by GPU type
    vcpu_price_per_hour: jax.Array
    gib_price_per_hour: jax.Array
    # Job generator (see scenarios.py).
    workload_probs: jax.Array  # (W,)
    gpu_type_probs: jax.Array  # (T,)
    scenario_probs: jax.Array  # (3,) deadline-critical, budget-constrained, balanced
    random_preference_prob: jax.Array  # chance of a uniform random preference on the simplex
    use_fixed_preference: jax.Array  # bool: every job gets ``fixed_preference``
    fixed_preference: jax.Array  # (3,) time, cost, sla
    kind_preference: jax.Array  # (3, 3) preset preference of each scenario kind (scenarios.py)
    opposed_preference_prob: jax.Array  # chance of the kind's opposed preference (``conflict``), after
    # the random one: a job takes it when random_preference_prob <= u < the two summed
    opposed_preference: jax.Array  # (3, 3) per kind: the preference that opposes its tight SLA
    sla_factor_low: jax.Array  # (3, 6) per scenario kind and SLA
    sla_factor_high: jax.Array  # (3, 6)
    feasibility_margin: jax.Array  # deadline/budget >= margin x fastest/cheapest static job
    requested_gpu_bins: jax.Array  # (B,) int32
    requested_cpus_per_gpu_values: jax.Array  # (R,)
    requested_cpus_per_gpu_probs: jax.Array  # (R,)
    init_strategy: jax.Array  # int32 index into INIT_STRATEGIES
    init_mix_probs: jax.Array  # (3,) chance of each of MIXED_INIT_STRATEGIES under ``mixed``
    # Hidden truth (job_truth.py): log-space spread of a job's true compute and sync terms around its
    # workload's calibrated profile; the agent sees only the profile and its own measurements.
    compute_spread: jax.Array
    sync_spread: jax.Array
    deviation_limit_sd: jax.Array  # the hidden deviations are clipped at +- this many spreads
    # Online model (online_model.py): std of a measured epoch's log time around the model.
    forecast_noise: jax.Array
    # Absolute targets of the ``targets`` action set (action_sets.py).
    target_gpus: jax.Array  # (16,) int32 GPU counts
    target_cpus_per_gpu: jax.Array  # (5,) CPUs per GPU
    # Dynamics.
    reallocation_pause_s: jax.Array  # checkpoint-restart pause when the GPU count changes (billed)
    cpu_reallocation_pause_s: jax.Array  # data-loader restart when only the CPUs change (billed)
    epoch_time_noise: jax.Array  # std of the log-normal epoch-time noise
    util_noise: jax.Array  # half-width of the uniform noise on utilisation readings
    contention_start_prob: jax.Array  # per epoch, uncontended -> contended
    contention_end_prob: jax.Array  # per epoch, contended -> uncontended
    contention_compute_slowdown: jax.Array  # compute time x (1 + this) under contention
    contention_network_slowdown: jax.Array  # inter-node sync x (1 + this) under contention
    # bool: a GPU change leaves the contention and node events of the old nodes (shifts.py)
    moves_leave_contention: jax.Array
    # Mid-run events (shifts.py): one per job at most.
    shift_probs: jax.Array  # (7,) over shifts.SHIFT_KINDS (first: none)
    shift_at_low: jax.Array  # the event's epoch, as a fraction of the job's epochs
    shift_at_high: jax.Array
    shift_size_low: jax.Array  # (7,) per kind
    shift_size_high: jax.Array  # (7,)
    # Objectives.
    adapt_strength: jax.Array  # eta of adaptive_weights.adapt; 0 = static weights
    weights_mode: jax.Array  # int32 index into WEIGHT_MODES (dual_weights.py)
    dual_step: jax.Array  # dual weights: multiplier gain per unit of severity
    dual_decay: jax.Array  # dual weights: fraction of a multiplier lost per reading its SLA holds
    dual_max: jax.Array  # dual weights: the cap on every multiplier (anti-windup)
    reward_clip: jax.Array  # |time| and |cost| reward of one step are clipped to this
    sla_met_bonus: jax.Array  # SLA reward at the last epoch per job-level SLA met (of six)
    all_slas_bonus: jax.Array  # extra SLA reward at the last epoch when all six are met
    max_steps_in_episode: jax.Array  # truncation limit (int32; gymnax's name, ``max_episode_steps`` reads it)
    # Derived tables: functions of the fields above, cached so a vectorised step need not search the
    # allocation lattice. ``derived.with_derived_tables`` recomputes them; ``validate_params``
    # refuses params whose tables are stale.
    fastest_epoch_s: jax.Array  # (W, T) shortest epoch over static allocations (the profile's)
    cheapest_epoch_usd: jax.Array  # (W, T) lowest epoch cost over static allocations
    target_allocation: jax.Array  # (K, 2) int32 (GPUs, CPUs) of every target (action_sets.py)
    target_profile: jax.Array  # (W * T, 6 * K) the profile's metrics at every target (forecast.py)
    job_rows: jax.Array  # (W * T * B * R, F) job_generator.job_table, packed (lookup.pack_table)

    @property
    def max_episode_steps(self) -> jax.Array:
        """The former name of ``max_steps_in_episode`` (kept so existing code and ``replace`` calls work)."""
        return self.max_steps_in_episode


# Former field names still accepted by ``EnvParams.replace`` (and so by ``with_values``).
FIELD_ALIASES = {"max_episode_steps": "max_steps_in_episode"}


def _replace(self: EnvParams, **updates: Any) -> EnvParams:
    """A new ``EnvParams`` with the named fields replaced; former names (``FIELD_ALIASES``) work too."""
    for old, new in FIELD_ALIASES.items():
        if old in updates:
            if new in updates:
                raise ValueError(f"give {new} or its former name {old}, not both")
            updates[new] = updates.pop(old)
    return dataclasses.replace(self, **updates)


EnvParams.replace = _replace  # flax's struct.dataclass installs its own replace; this one knows the aliases


def with_values(tree: T, *, same_shape: bool = True, **values: Any) -> T:
    """``tree.replace(**values)`` with every value cast to its field's dtype.

    Keeping dtypes (and, with ``same_shape``, shapes) means functions jitted on ``EnvParams`` or
    ``WorkloadParams`` do not retrace when a value changes. Raises ``ValueError`` on a shape change
    and on a cast that would change a value (a fraction, NaN or out-of-range number for an integer
    field, anything but 0 or 1 for a flag). It checks no ranges: call
    :func:`slamorl_jax.env.validate_params` on the result (``reset`` and ``step`` run under ``jit``
    and do not). ``TypeError`` for a name that is not a field, ``ValueError`` for a nested group
    (``workloads``: edit its fields with ``params.replace(workloads=with_values(params.workloads,
    ...))``). A host-side edit: the values are cast on the host, so under ``jit`` or ``vmap`` (a sweep
    over a field) use ``params.replace(name=value)`` instead.
    """
    known = {field.name for field in dataclasses.fields(tree)}
    if isinstance(tree, EnvParams):
        known |= set(FIELD_ALIASES)
    new = {}
    for name, value in values.items():
        if name not in known:
            raise TypeError(f"{type(tree).__name__} has no field {name!r}")
        old = getattr(tree, name)
        if not hasattr(old, "dtype"):  # a nested group of fields (EnvParams.workloads)
            raise ValueError(
                f"{name} is a group of fields: edit them with with_values(params.{name}, ...) and "
                f"params.replace({name}=...)"
            )
        array = _exact_cast(name, value, old.dtype)
        if same_shape and array.shape != old.shape:
            raise ValueError(f"{name}: shape {array.shape} does not match {old.shape}")
        new[name] = jnp.asarray(array)
    return tree.replace(**new)


def _exact_cast(name: str, value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` as an array of ``dtype``; ``ValueError`` naming ``name`` if the cast changes it."""
    source = np.asarray(value)
    if source.dtype.kind not in "biuf":  # strings, None, objects: no number to cast
        raise ValueError(f"{name} holds {np.dtype(dtype).name} values, got {source.dtype} {value!r:.60}")
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        numbers = source.astype(np.float64)
        if not np.all(np.isfinite(numbers)) or np.any(numbers != np.round(numbers)):
            raise ValueError(f"{name} holds {np.dtype(dtype).name} values, got {source.tolist()}")
        low, high = (0, 1) if dtype == np.bool_ else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        if np.any(numbers < low) or np.any(numbers > high):
            raise ValueError(
                f"{name} must lie in [{low}, {high}] ({np.dtype(dtype).name}), got {source.tolist()}"
            )
    return np.asarray(value, dtype=dtype)


def max_gpus(params: EnvParams) -> jax.Array:
    """Largest GPU count a job may hold under ``params``."""
    return jnp.minimum(params.max_gpus_per_job, params.gpus_per_node * params.max_nodes)


def cluster_bounds(params: EnvParams) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(max GPUs, GPUs per node, CPUs per node, CPU step)``: the trailing arguments of
    ``actions.apply_action`` and ``actions.clip_allocation``."""
    return max_gpus(params), params.gpus_per_node, params.cpus_per_node, params.cpu_step
