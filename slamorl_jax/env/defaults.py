"""Default ``EnvParams``: the calibration cluster, AWS prices, the ``mixed`` generator, cold start."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.calibration.workloads import POLLUX_HARDWARE
from slamorl_jax.env.action_sets import NUM_TARGETS
from slamorl_jax.env.catalog import Catalog, load_catalog
from slamorl_jax.env.derived import TARGET_PROFILE_FIELDS, with_derived_tables
from slamorl_jax.env.dual_weights import DEFAULT_DUAL_MAX
from slamorl_jax.env.job_truth import DEFAULT_DEVIATION_LIMIT_SD
from slamorl_jax.env.objectives import PREFERENCES
from slamorl_jax.env.params import (
    INIT_STRATEGIES,
    NUM_SCENARIO_KINDS,
    WEIGHT_MODES,
    EnvParams,
    WorkloadParams,
)
from slamorl_jax.env.scenario_kinds import (
    MIXED_OPPOSED_PREFERENCE_PROB,
    MIXED_RANDOM_PREFERENCE_PROB,
    kind_preferences,
    opposed_preferences,
)
from slamorl_jax.env.shifts import (
    DEFAULT_MIXED_SHIFT_PROB,
    DEFAULT_SHIFT_AT,
    DEFAULT_SHIFT_SIZE_HIGH,
    DEFAULT_SHIFT_SIZE_LOW,
    event_probs,
)

# Default SLA factor ranges, rows = scenario kind, columns = SLA (objectives.SLA_NAMES):
# deadline x T_plan, budget x C_plan, throughput x thr_ref, memory x mem_ref, GPU util min, CPU util min
# (T_plan and C_plan: the profile's forecast of the request's time and cost, job_generator.py; the
# reward's T_ref and C_ref are the job's true ones).
DEFAULT_SLA_FACTOR_LOW = np.array(
    [
        [0.30, 1.50, 0.50, 4.00, 0.20, 0.05],  # deadline-critical
        [1.50, 0.30, 0.20, 1.50, 0.40, 0.05],  # budget-constrained
        [0.60, 0.60, 0.40, 2.00, 0.30, 0.05],  # balanced
    ],
    dtype=np.float32,
)
DEFAULT_SLA_FACTOR_HIGH = np.array(
    [
        [0.70, 3.00, 1.00, 8.00, 0.40, 0.20],
        [3.00, 0.70, 0.50, 3.00, 0.70, 0.20],
        [1.00, 1.00, 0.80, 4.00, 0.50, 0.20],
    ],
    dtype=np.float32,
)


# Absolute targets of the ``targets`` action set (action_sets.py explains the choice).
# The simulated cluster's nodes: those the Pollux measurements were taken on (4 T4 and 48 vCPUs a
# node, 128 Gb/s within it, 50 Gb/s between nodes), so the calibrated sync terms hold as fitted.
NODE = POLLUX_HARDWARE
DEFAULT_TARGET_GPUS = tuple(range(1, 17))
DEFAULT_TARGET_CPUS_PER_GPU = (0.0, 2.0, 4.0, 8.0, 12.0)
# Per-job log-space spread of the true compute and sync terms around the workload's profile, sized
# from the vendored data (``python -m slamorl_jax.calibration.job_spread``, docs/calibration.md).
DEFAULT_COMPUTE_SPREAD = 0.23
DEFAULT_SYNC_SPREAD = 0.14
# Std of a measured epoch's log time around the online model: 3 % epoch noise plus contention
# (compute x 1.3 for 1/6 of epochs at the default rates: std of the log about 0.1).
DEFAULT_FORECAST_NOISE = 0.1
# The relocation gate (agent/networks.py, ``relocate_allowed``): relocate only after an epoch slower
# than the job's model forecast by at least one such std in log time (x 1.105). Epoch noise alone
# passes it about once in 2,300 epochs; contention's x 1.3 on compute passes it wherever compute is
# 35 % of the epoch or more, less on several nodes, where it also triples the sync (README,
# "Relocation gate").
DEFAULT_RELOCATE_GATE = DEFAULT_FORECAST_NOISE
# Random contention of a job's nodes (job_env.py): a two-state chain per epoch, started with the
# first probability and ended with the second (a spell lasts 4 epochs on average; docs/calibration.md).
DEFAULT_CONTENTION_START_PROB = 0.05
DEFAULT_CONTENTION_END_PROB = 0.25
# The relocation payback rule (agent/networks.py, ``relocation_pays``): relocate only where a
# relocation after contention is expected to save at least one pause (env/relocation_payback.py;
# README, "Relocation payback").
DEFAULT_RELOCATE_PAYBACK = 1.0
# End-of-job SLA reward (job_env.py explains the sizes): per job-level SLA met, and for all six.
DEFAULT_SLA_MET_BONUS = 2.0
DEFAULT_ALL_SLAS_BONUS = 4.0
# The severity weights' tilt eta per unit of severity (adaptive_weights.py; the paper's form).
DEFAULT_ADAPT_STRENGTH = 1.5
# The dual weights' multiplier gain per unit of severity and decay per reading (dual_weights.py).
DEFAULT_DUAL_STEP = 1.0
DEFAULT_DUAL_DECAY = 0.2
# Under ``init_strategy="mixed"``: cold, requested, random starts.
DEFAULT_INIT_MIX_PROBS = (0.2, 0.5, 0.3)


def _f32(x: Any) -> jax.Array:
    return jnp.asarray(np.asarray(x, dtype=np.float32))


def _i32(x: Any) -> jax.Array:
    return jnp.asarray(np.asarray(x, dtype=np.int32))


def workload_params(catalog: Catalog) -> WorkloadParams:
    """Traced workload table from the calibrated catalogue."""
    c = catalog
    return WorkloadParams(
        samples_per_epoch=_f32(c.samples_per_epoch),
        local_batch=_f32(c.local_batch),
        epochs_min=_i32(c.epochs_min),
        epochs_max=_i32(c.epochs_max),
        data_parallel=jnp.asarray(np.asarray(c.data_parallel, dtype=bool)),
        compute_alpha_s=_f32(c.compute_alpha_s),
        compute_beta_s=_f32(c.compute_beta_s),
        sync_local_alpha_s=_f32(c.sync_local_alpha_s),
        sync_local_beta_s=_f32(c.sync_local_beta_s),
        sync_node_alpha_s=_f32(c.sync_node_alpha_s),
        sync_node_beta_s=_f32(c.sync_node_beta_s),
        sync_two_node_factor=_f32(c.sync_two_node_factor),
        gamma=_f32(c.gamma),
        calibration_intra_node_gbps=_f32(c.calibration_intra_node_gbps),
        calibration_inter_node_gbps=_f32(c.calibration_inter_node_gbps),
        calibration_cpus_per_gpu=_f32(c.calibration_cpus_per_gpu),
        compute_speed=_f32(c.compute_speed),
        cpu_c_sat=_f32(c.cpu_c_sat),
        cpu_p=_f32(c.cpu_p),
        requested_gpu_probs=_f32(c.requested_gpu_probs),
    )


def catalog_or_default(catalog: Catalog | None) -> Catalog:
    """``catalog``, or the shipped one (``load_catalog()``) when ``None``; ``TypeError`` for anything
    that is not a :class:`Catalog`."""
    if catalog is not None and not isinstance(catalog, Catalog):
        raise TypeError(f"catalog must be a Catalog (load_catalog()), got {type(catalog).__name__}")
    return catalog or load_catalog()


def default_params(catalog: Catalog | None = None) -> EnvParams:
    """Defaults: the calibration cluster, AWS prices, the ``mixed`` scenario, cold start.

    ``catalog``: a :class:`Catalog` (``load_catalog()``, the default); ``TypeError`` for anything else."""
    c = catalog_or_default(catalog)
    num_types = c.num_gpu_types
    params = EnvParams(
        workloads=workload_params(c),
        gpus_per_node=_i32(NODE.gpus_per_node),
        cpus_per_node=_i32(NODE.gpus_per_node * NODE.cpus_per_gpu),
        max_nodes=_i32(4),
        max_gpus_per_job=_i32(16),
        cpu_step=_i32(4),
        intra_node_gbps=_f32(NODE.intra_node_gbps),
        inter_node_gbps=_f32(NODE.inter_node_gbps),
        host_memory_gib_per_gpu=_f32(8.0),
        memory_gib_per_vcpu=_f32(4.0),
        worker_memory_gib_per_busy_cpu=_f32(2.0),
        gpu_price_per_hour=_f32(c.gpu_price_per_hour),
        vcpu_price_per_hour=_f32(c.vcpu_price_per_hour),
        gib_price_per_hour=_f32(c.gib_price_per_hour),
        workload_probs=_f32(np.full(c.num_workloads, 1.0 / c.num_workloads)),
        gpu_type_probs=_f32(np.full(num_types, 1.0 / num_types)),
        scenario_probs=_f32(np.full(NUM_SCENARIO_KINDS, 1.0 / NUM_SCENARIO_KINDS)),
        random_preference_prob=_f32(MIXED_RANDOM_PREFERENCE_PROB),
        use_fixed_preference=jnp.asarray(False),
        fixed_preference=_f32(PREFERENCES["balanced"]),
        kind_preference=_f32(kind_preferences()),
        opposed_preference_prob=_f32(MIXED_OPPOSED_PREFERENCE_PROB),
        opposed_preference=_f32(opposed_preferences()),
        sla_factor_low=_f32(DEFAULT_SLA_FACTOR_LOW),
        sla_factor_high=_f32(DEFAULT_SLA_FACTOR_HIGH),
        feasibility_margin=_f32(1.1),
        requested_gpu_bins=_i32(c.requested_gpu_bins),
        requested_cpus_per_gpu_values=_f32(c.requested_cpus_per_gpu_values),
        requested_cpus_per_gpu_probs=_f32(c.requested_cpus_per_gpu_probs),
        init_strategy=_i32(INIT_STRATEGIES.index("cold")),
        init_mix_probs=_f32(DEFAULT_INIT_MIX_PROBS),
        compute_spread=_f32(DEFAULT_COMPUTE_SPREAD),
        sync_spread=_f32(DEFAULT_SYNC_SPREAD),
        deviation_limit_sd=_f32(DEFAULT_DEVIATION_LIMIT_SD),
        forecast_noise=_f32(DEFAULT_FORECAST_NOISE),
        target_gpus=_i32(DEFAULT_TARGET_GPUS),
        target_cpus_per_gpu=_f32(DEFAULT_TARGET_CPUS_PER_GPU),
        reallocation_pause_s=_f32(30.0),
        cpu_reallocation_pause_s=_f32(5.0),
        epoch_time_noise=_f32(0.03),
        util_noise=_f32(0.03),
        contention_start_prob=_f32(DEFAULT_CONTENTION_START_PROB),
        contention_end_prob=_f32(DEFAULT_CONTENTION_END_PROB),
        contention_compute_slowdown=_f32(0.3),
        contention_network_slowdown=_f32(2.0),
        moves_leave_contention=jnp.asarray(True),
        shift_probs=_f32(event_probs(DEFAULT_MIXED_SHIFT_PROB)),
        shift_at_low=_f32(DEFAULT_SHIFT_AT[0]),
        shift_at_high=_f32(DEFAULT_SHIFT_AT[1]),
        shift_size_low=_f32(DEFAULT_SHIFT_SIZE_LOW),
        shift_size_high=_f32(DEFAULT_SHIFT_SIZE_HIGH),
        adapt_strength=_f32(DEFAULT_ADAPT_STRENGTH),
        weights_mode=_i32(WEIGHT_MODES.index("severity")),
        dual_step=_f32(DEFAULT_DUAL_STEP),
        dual_decay=_f32(DEFAULT_DUAL_DECAY),
        dual_max=_f32(DEFAULT_DUAL_MAX),
        reward_clip=_f32(10.0),
        sla_met_bonus=_f32(DEFAULT_SLA_MET_BONUS),
        all_slas_bonus=_f32(DEFAULT_ALL_SLAS_BONUS),
        max_steps_in_episode=_i32(200),
        fastest_epoch_s=_f32(np.zeros(c.compute_speed.shape)),
        cheapest_epoch_usd=_f32(np.zeros(c.compute_speed.shape)),
        target_allocation=_i32(np.ones((NUM_TARGETS, 2))),
        target_profile=_f32(np.zeros((c.compute_speed.size, TARGET_PROFILE_FIELDS * NUM_TARGETS))),
        job_rows=_f32(np.zeros((0, 0))),  # a placeholder until its shape is known (below)
    )
    # The placeholder takes the table's own shape first, so these params and every later refresh of
    # them (``with_prices``, ``with_values`` then ``with_derived_tables``) share one compiled program.
    rows = jax.eval_shape(with_derived_tables, params).job_rows
    return with_derived_tables(params.replace(job_rows=jnp.zeros(rows.shape, rows.dtype)))
