"""The observation's second block: what a platform honestly knows about where the job could go.

For each absolute target of the action grid (``action_sets.py``; the same features in every action
set) and for keeping the current allocation, the job's **projected outcome** if it moved there now and
stayed: the workload profile's forecast at that allocation, corrected by this job's measured epochs
(``online_model.py``), plus the re-allocation pause it would pay. Never the job's true constants.

Per target ``k`` (and ``keep``), four features in [0, 1]:

=============  ===========================================================================
``time``       projected completion time / deadline, clipped to [0, 2] and halved (0.5 = on time)
``cost``       projected total cost / budget, the same way
``other_slas`` fraction of the four other job-level SLAs (throughput, memory, GPU and CPU
               utilisation) the projected job would meet
``suggested``  1 for the one candidate (keep or a target) the forecast ranks first, else 0
=============  ===========================================================================

Projected completion = elapsed + pause + epochs left x corrected epoch time; cost adds that
interval at the allocation's price; the other SLAs are the job-level checks of ``episode_figures``
on the projected whole job (past epochs included: samples / total time, peak memory, time-weighted
utilisation).

The suggestion ranks the candidates the way evaluation's best-static oracle ranks allocations
(``evaluation/baselines.py``), on the forecast instead of the hidden truth: most job-level SLAs
projected to hold first (deadline, budget and the four others), then the user's preference-weighted
time and cost (``w_time x time + w_cost x cost``, cost in hours of the request's price, so the weights
trade time against money the way the oracle's request-relative objective does), then the lower cost
(a time-only preference is indifferent between CPU counts past saturation), objectives and costs
within ``RANK_TOLERANCE`` (2e-6) of each other counting as tied, then keep, then the first target.
A target at the current allocation is the same choice as keep and is left to keep, so "stay" is
always named keep.
It is a forecast, not an order: the policy learns when to follow it (a short job may not earn back
the pause; the forecast may still be wrong early in a job).

Then six job features:

=================== ======================================================================
``pause_share``     GPU re-allocation pause / (pause + corrected epoch time): what a move costs
``epochs_left``     epochs left / (epochs left + 10): resolution where few decisions remain
``data_parallel``   1 if extra GPUs can speed the job up
``compute_dev``     0.5 + 0.5 tanh(2 mu_compute): the online model's compute deviation
``sync_dev``        0.5 + 0.5 tanh(2 mu_sync)
``surprise``        0.5 + 0.5 tanh(2 x), x = log(last epoch's time / the online model's forecast
                    of it from the epochs before it) (``online_model.epoch_surprise``; 0.5 at
                    reset): a job suddenly slower than it has measured is being slowed by its
                    nodes (contention, a slower node), which a GPU change leaves (``shifts.py``)
=================== ======================================================================
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from slamorl_jax.env.action_sets import NUM_TARGETS
from slamorl_jax.env.derived import TARGET_PROFILE_FIELDS, TARGET_PROFILE_ROWS
from slamorl_jax.env.job_model import SECONDS_PER_HOUR, EpochMetrics, allocation_price_per_hour, billed_usd
from slamorl_jax.env.lookup import take_small
from slamorl_jax.env.online_model import corrected_epoch_time, posterior_deviation
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.pauses import move_pause_s
from slamorl_jax.env.state import EnvState, SlaTargets

OUTCOME_FEATURES = ("time", "cost", "other_slas", "suggested")
JOB_FEATURES = ("pause_share", "epochs_left", "data_parallel", "compute_dev", "sync_dev", "surprise")
FORECAST_FEATURE_NAMES = (
    *(f"target{k}_{name}" for name in OUTCOME_FEATURES for k in range(NUM_TARGETS)),
    *(f"keep_{name}" for name in OUTCOME_FEATURES),
    *JOB_FEATURES,
)
NUM_FORECAST_FEATURES = len(FORECAST_FEATURE_NAMES)
EPOCHS_LEFT_SCALE = 10.0
RATIO_CAP = 2.0
# Candidates whose objectives (then costs) are within this relative distance of the best rank as
# tied (a few float32 roundings; the env tests' Python reference treats gaps under 1e-5 as ties).
RANK_TOLERANCE = 2e-6


def projected_totals(
    state: EnvState,
    epoch_s: jax.Array,
    price_per_hour: jax.Array,
    memory_used_gib: jax.Array,
    gpu_util: jax.Array,
    cpu_util: jax.Array,
    pause_s: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(total time s, total cost $, other SLAs met of 4) of moving now to an allocation and staying
    (broadcasts). Written without divisions by per-target values, as it runs for every target of
    every job at every step."""
    job = state.job
    targets = job.sla_targets
    left = (job.epochs - state.epoch).astype(jnp.float32)
    work = left * epoch_s
    spend = pause_s + work
    total_time = state.elapsed_s + spend
    total_cost = state.cost_usd + billed_usd(spend, price_per_hour)
    samples = job.epochs.astype(jnp.float32) * job.profile.samples_per_epoch
    memory_ok = jnp.logical_and(
        memory_used_gib <= targets.max_memory_gib, state.peak_memory_gib <= targets.max_memory_gib
    )
    others = (
        (samples >= targets.min_throughput * total_time).astype(jnp.float32)
        + memory_ok.astype(jnp.float32)
        + (state.gpu_busy_s + work * gpu_util >= targets.min_gpu_util * total_time).astype(jnp.float32)
        + (state.cpu_busy_s + work * cpu_util >= targets.min_cpu_util * total_time).astype(jnp.float32)
    )
    return total_time, total_cost, others


def outcome_features(
    state: EnvState, total_time: jax.Array, total_cost: jax.Array, others: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The (time, cost, other_slas) features of projected totals (module docstring)."""
    targets = state.job.sla_targets
    return (
        0.5 * jnp.clip(total_time * (1.0 / targets.deadline_s), 0.0, RATIO_CAP),
        0.5 * jnp.clip(total_cost * (1.0 / targets.budget_usd), 0.0, RATIO_CAP),
        0.25 * others,
    )


class Projection(NamedTuple):
    """Projected totals of moving now to a candidate and staying (scalars for keep, ``[K]`` for the
    targets)."""

    time_s: jax.Array
    cost_usd: jax.Array
    other_slas: jax.Array


def sla_count(p: Projection, slas: SlaTargets) -> jax.Array:
    """How many of the six job-level SLAs a projection meets: the deadline, the budget and the four
    others (float32, broadcasts)."""
    on_time = (p.time_s <= slas.deadline_s).astype(jnp.float32)
    in_budget = (p.cost_usd <= slas.budget_usd).astype(jnp.float32)
    return on_time + in_budget + p.other_slas


def suggestion(
    state: EnvState, params: EnvParams, keep: Projection, targets: Projection, duplicate: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The forecast's first choice (module docstring) as one-hot flags ``(keep, targets [K])``;
    ``duplicate`` marks the targets that are the current allocation again (left to keep).

    The candidates are the targets' leading axis, so the same function ranks one job (targets
    ``[K]``, as ``vmap`` calls it) or a batch laid out candidate-major (targets ``[K, envs]``, every
    job field ``[envs]``): ``benchmarks.ranking_layout`` times the two layouts on the env's own
    states.

    Keep's projection stays apart from the targets': under ``vmap`` over thousands of jobs every
    materialised ``[jobs, candidates]`` array is a pass over memory. Dropping the keep-first
    concatenation of every projection, and of every feature computed from them, was one of the two
    changes that took the env step from 637k to 794k steps/s at 4,096 envs (``benchmarks.step_breakdown`` on
    2a78082; the other is ``action_sets.apply``'s row gather)."""
    job = state.job
    slas = job.sla_targets
    request_price = allocation_price_per_hour(
        job.profile.gpu_price_per_hour,
        job.requested_gpus.astype(jnp.float32),
        job.requested_cpus.astype(jnp.float32),
        params,
    )
    money_in_hours = SECONDS_PER_HOUR / jnp.maximum(request_price, 1e-9)

    def objective(p: Projection) -> jax.Array:
        return job.preference[..., 0] * p.time_s + job.preference[..., 1] * p.cost_usd * money_in_hours

    # The best target by plain min and max reductions over the targets (argmin, a variadic reduction
    # and concatenating keep to the targets are all much slower on XLA:CPU), then keep against it.
    # Values within RANK_TOLERANCE of the best count as tied: XLA may compute one value in two
    # fusions rounded differently (a fused multiply-add in one, its own exp in a library fusion),
    # and an exact comparison with its own minimum would then leave no candidate flagged.
    near = 1.0 + RANK_TOLERANCE
    target_slas = jnp.where(duplicate, -1.0, sla_count(targets, slas))
    most = jnp.max(target_slas, axis=0)
    ranked = jnp.where(target_slas == most, objective(targets), jnp.inf)
    lowest = jnp.min(ranked, axis=0)
    best = ranked <= lowest * near
    # Ties (e.g. a time-only preference and CPU counts past saturation) go to the cheapest, then to
    # keep, then to the first target.
    cheapest = jnp.min(jnp.where(best, targets.cost_usd, jnp.inf), axis=0)
    best = jnp.logical_and(best, targets.cost_usd <= cheapest * near)
    index = jnp.arange(best.shape[0]).reshape((-1,) + (1,) * (best.ndim - 1))
    first = jnp.min(jnp.where(best, index, best.shape[0]), axis=0)
    keep_slas = sla_count(keep, slas)
    keep_objective = objective(keep)
    keep_ahead = jnp.logical_or(
        keep_objective * near < lowest,
        jnp.logical_and(keep_objective <= lowest * near, keep.cost_usd <= cheapest * near),
    )
    keep_wins = jnp.logical_or(keep_slas > most, jnp.logical_and(keep_slas == most, keep_ahead))
    target_flags = jnp.logical_and(index == first, jnp.logical_not(keep_wins))
    return keep_wins.astype(jnp.float32), target_flags.astype(jnp.float32)


def target_profile(state: EnvState, params: EnvParams) -> dict[str, jax.Array]:
    """The profile's metrics of the job's (workload, GPU type) at every absolute target, by name
    (``derived.TARGET_PROFILE_ROWS``, each ``[K]``).

    One gather per field, not one of the whole ``6 x K`` row: under ``vmap`` XLA:CPU materialises a
    whole-row gather as a ``[jobs, 6 K]`` array, while each field's gather is fused into the loop
    that reads it. The same values, so the same forecasts; at 4,096 envs the trainer's env step went
    from 0.13x / 0.14x CartPole to 0.15x / 0.18x (``benchmarks.step_breakdown`` before and after,
    run in turn twice)."""
    num_types = params.gpu_type_probs.shape[0]
    index = state.job.workload * num_types + state.job.gpu_type
    table = params.target_profile.reshape(-1, TARGET_PROFILE_FIELDS, NUM_TARGETS)
    return {name: table[:, field][index] for field, name in enumerate(TARGET_PROFILE_ROWS)}


def candidate_totals(
    state: EnvState,
    params: EnvParams,
    mu_compute: jax.Array,
    mu_sync: jax.Array,
    launched: jax.Array | bool = True,
) -> tuple[Projection, Projection, jax.Array, jax.Array]:
    """Projected totals of keeping the allocation and of every target under the log deviations
    ``(mu_compute, mu_sync)``: ``(keep, targets, duplicate, now_epoch_s)``, where ``duplicate``
    marks the targets that repeat the current allocation and ``now_epoch_s`` is the corrected epoch
    time where the job is now. A move pays the re-allocation pause only from a ``launched`` job's
    allocation: a job placed before it has run anything (``probes.first_placement``) starts
    wherever it is placed for free."""
    job = state.job
    profile = target_profile(state, params)
    target_gpus = params.target_allocation[:, 0]
    target_cpus = params.target_allocation[:, 1]
    duplicate = jnp.logical_and(target_gpus == state.gpus, target_cpus == state.cpus)
    pause = move_pause_s(state.gpus, state.cpus, target_gpus, target_cpus, params)
    if launched is not True:  # the observation's ranking (always launched) stays one expression
        pause = jnp.where(launched, pause, 0.0)
    now: EpochMetrics = state.profile_now
    now_epoch_s = corrected_epoch_time(
        now.epoch_time_s, now.compute_share, now.sync_share, mu_compute, mu_sync
    )
    # The table prices the GPU type's list price; a job whose GPU price moved (a price rise,
    # shifts.py) pays the difference on every GPU (exactly 0 otherwise).
    price_change = job.profile.gpu_price_per_hour - take_small(params.gpu_price_per_hour, job.gpu_type)
    targets = Projection(
        *projected_totals(
            state,
            corrected_epoch_time(
                profile["epoch_time_s"], profile["compute_share"], profile["sync_share"], mu_compute, mu_sync
            ),
            profile["price_per_hour"] + price_change * target_gpus.astype(jnp.float32),
            profile["memory_used_gib"],
            profile["gpu_util"],
            profile["cpu_util"],
            pause,
        )
    )
    keep = Projection(
        *projected_totals(
            state, now_epoch_s, now.price_per_hour, now.memory_used_gib, now.gpu_util, now.cpu_util, 0.0
        )
    )
    return keep, targets, duplicate, now_epoch_s


def ranked_candidates(
    state: EnvState,
    params: EnvParams,
    mu_compute: jax.Array,
    mu_sync: jax.Array,
    launched: jax.Array | bool = True,
) -> tuple[jax.Array, Projection, Projection]:
    """The candidate the forecast ranks first under the log deviations ``(mu_compute, mu_sync)`` (0
    for keep, ``1 + k`` for target ``k``) and the projections it was ranked on: ``(first, keep,
    targets)``; ``launched`` as in :func:`candidate_totals`."""
    keep, targets, duplicate, _ = candidate_totals(state, params, mu_compute, mu_sync, launched)
    keep_flag, target_flags = suggestion(state, params, keep, targets, duplicate)
    first = jnp.where(keep_flag > 0, 0, 1 + jnp.argmax(target_flags)).astype(jnp.int32)
    return first, keep, targets


def first_choice(
    state: EnvState,
    params: EnvParams,
    mu_compute: jax.Array,
    mu_sync: jax.Array,
    launched: jax.Array | bool = True,
) -> jax.Array:
    """The candidate the forecast ranks first under the log deviations ``(mu_compute, mu_sync)``:
    0 for keep, ``1 + k`` for target ``k``; ``launched`` as in :func:`candidate_totals`."""
    return ranked_candidates(state, params, mu_compute, mu_sync, launched)[0]


def candidate_allocation(state: EnvState, params: EnvParams, first: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The ``(gpus, cpus)`` of candidate ``first`` (0: keep, the job's own allocation; ``1 + k``:
    target ``k``)."""
    target = params.target_allocation[jnp.maximum(first - 1, 0)]
    keep = first == 0
    return jnp.where(keep, state.gpus, target[0]), jnp.where(keep, state.cpus, target[1])


def forecast_parts(state: EnvState, params: EnvParams) -> list[jax.Array]:
    """The ``NUM_FORECAST_FEATURES`` float32 features of one job (module docstring) in the pieces that
    concatenate to them: every target's time, cost, other SLAs and suggestion (field-major), then
    keep's four and the job's six. ``observation.observe`` concatenates them with the paper's
    features in one go (one pass over the observation, where concatenating twice copies it twice)."""
    job = state.job
    mu_compute, mu_sync = posterior_deviation(state.model_stats, params)
    keep, targets, duplicate, now_epoch_s = candidate_totals(state, params, mu_compute, mu_sync)
    keep_suggested, target_suggested = suggestion(state, params, keep, targets, duplicate)
    left = (job.epochs - state.epoch).astype(jnp.float32)
    tail = jnp.stack(
        [
            *outcome_features(state, *keep),
            keep_suggested,
            params.reallocation_pause_s / jnp.maximum(params.reallocation_pause_s + now_epoch_s, 1e-9),
            left / (left + EPOCHS_LEFT_SCALE),
            job.profile.data_parallel.astype(jnp.float32),
            0.5 + 0.5 * jnp.tanh(2.0 * mu_compute),
            0.5 + 0.5 * jnp.tanh(2.0 * mu_sync),
            0.5 + 0.5 * jnp.tanh(2.0 * state.surprise),
        ]
    )
    return [*outcome_features(state, *targets), target_suggested, tail]
