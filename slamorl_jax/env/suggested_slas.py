"""SLA targets suggested for a job whose user gave none: the forecast's first choice with margins.

The paper's baseline runs also set a job's SLA targets when its user gives none; the SLA-MORL
reference code's ``SLAConfig.forecast_sla_values`` (GitHub ``sammgithub/SLA-MORL`` at 33952eb,
``main-rl-slamorl.py`` L118-123) takes the forecast time and cost x 1.1 and throughput x 0.9. Here
the forecast is the one the observation's forecast block uses (``forecast.py``: the workload's
profile corrected by what the job has measured, such as probe runs), at the allocation it ranks
first for the job's preference with the targets being suggested counting as no limit
(:func:`without_limits`):

* deadline = :data:`TIME_MARGIN` x that choice's projected completion time,
* budget = :data:`COST_MARGIN` x its projected total cost,
* minimum throughput = :data:`THROUGHPUT_MARGIN` x its projected samples per second.

A move from the job's current allocation pays its pause in the projection when the job has run
probes there (it switches from the last probe, as ``ProbingEnv`` bills it); a job that has run
nothing starts wherever it is placed, so no candidate pays one (``probes.first_placement``). The
memory and utilisation SLAs are never suggested.

The reference code's margins ignore how sure the forecast is, and a job's hidden deviations from
its profile are larger than 10 % for many jobs (``benchmarks/suggested_slas.py`` measures how often
jobs meet the suggested targets). With a ``confidence`` ``c`` instead, the margins come from the
online model's own uncertainty and from contention, which the forecast (an uncontended profile)
leaves out: ``factor = (1 + p x slowdown) exp(z_c sd)``, with ``p`` the long-run share of contended
epochs, ``slowdown`` the profile's contended over uncontended epoch time at the chosen allocation
minus 1 (multi-node jobs slow down most), ``z_c`` the standard normal quantile of ``c`` and ``sd^2``
the posterior variance of the log-time correction at the allocation's compute and sync shares
(``online_model.posterior_log_time_variance``) + the epoch noise's and the contended share's
variances over the epochs left (the contention chain's autocorrelation widening the latter). The
deadline and budget are the projection x ``factor``, the minimum throughput / ``factor``. Before any
measurement ``sd`` holds the profile's spread; probe runs shrink it, so a probed job gets tighter
targets at the same confidence. Pure functions of arrays: jit and vmap
them (``slamorl_jax.live_slas`` answers a real job with them; ``benchmarks/suggested_slas.py``
measures how often simulated jobs meet them).
"""

from __future__ import annotations

from collections.abc import Iterable

import jax
import jax.numpy as jnp

from slamorl_jax.env.forecast import candidate_allocation, ranked_candidates, target_profile
from slamorl_jax.env.job_model import epoch_metrics
from slamorl_jax.env.online_model import posterior_deviation, posterior_log_time_variance
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.relocation_payback import contention_persistence
from slamorl_jax.env.state import EnvState, SlaTargets

TIME_MARGIN = 1.1
COST_MARGIN = 1.1
THROUGHPUT_MARGIN = 0.9
SUGGESTIBLE = ("deadline_s", "budget_usd", "min_throughput")
#: The confidences a suggestion takes: the normal quantile of a probability nearer 0 or 1 runs
#: past float32 (0.99999999 rounds to 1, an infinite margin; 1e-40 to 0) or gives a margin near 0.
CONFIDENCE_RANGE = (0.001, 0.999)


def check_confidence(confidence: float | None) -> None:
    """``ValueError`` unless ``confidence`` is ``None`` or a probability in :data:`CONFIDENCE_RANGE`."""
    low, high = CONFIDENCE_RANGE
    if confidence is not None and not low <= confidence <= high:
        raise ValueError(f"an SLA confidence is a probability in [{low}, {high}], got {confidence}")


NO_LIMIT = 1e30  # a deadline or budget never reached
UNLIMITED = {"deadline_s": NO_LIMIT, "budget_usd": NO_LIMIT, "min_throughput": 0.0}


def check_suggestible(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` without repeats; ``ValueError`` for one outside :data:`SUGGESTIBLE`."""
    names = tuple(dict.fromkeys(names))
    unknown = [name for name in names if name not in SUGGESTIBLE]
    if unknown:
        raise ValueError(f"only {', '.join(SUGGESTIBLE)} can be suggested, not {', '.join(unknown)}")
    return names


def without_limits(state: EnvState, names: Iterable[str]) -> EnvState:
    """``state`` with the SLA targets ``names`` (of :data:`SUGGESTIBLE`) set to no limit."""
    return with_targets(state, {name: jnp.float32(UNLIMITED[name]) for name in check_suggestible(names)})


def with_targets(state: EnvState, values: dict[str, jax.Array]) -> EnvState:
    """``state`` with its job's SLA targets ``values`` (by ``SlaTargets`` field) replaced."""
    return state.replace(job=state.job.replace(sla_targets=state.job.sla_targets.replace(**values)))


def forecast_choice(
    state: EnvState, params: EnvParams, launched: jax.Array | bool = True
) -> dict[str, jax.Array]:
    """The forecast's first choice for ``state`` and its projection: ``gpus``, ``cpus``, ``time_s``
    (completion), ``cost_usd`` (total), ``throughput`` (the job's samples over ``time_s``, as the
    SLA judges it) and the choice's ``compute_share`` and ``sync_share``; a move pays its pause
    only from a ``launched`` job (``forecast.candidate_totals``)."""
    mu_compute, mu_sync = posterior_deviation(state.model_stats, params)
    first, keep, targets = ranked_candidates(state, params, mu_compute, mu_sync, launched)
    gpus, cpus = candidate_allocation(state, params, first)
    k = jnp.maximum(first - 1, 0)
    profile = target_profile(state, params)

    def chosen(keep_value: jax.Array, target_values: jax.Array) -> jax.Array:
        return jnp.where(first == 0, keep_value, target_values[k])

    time_s = chosen(keep.time_s, targets.time_s)
    return {
        "gpus": gpus,
        "cpus": cpus,
        "time_s": time_s,
        "cost_usd": chosen(keep.cost_usd, targets.cost_usd),
        # Job-level, as the SLA is judged: all its samples over its whole time.
        "throughput": state.job.epochs.astype(jnp.float32)
        * state.job.profile.samples_per_epoch
        / jnp.maximum(time_s, 1e-9),
        "compute_share": chosen(state.profile_now.compute_share, profile["compute_share"]),
        "sync_share": chosen(state.profile_now.sync_share, profile["sync_share"]),
    }


def contention_share(params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """The long-run share of contended epochs of the env's two-state contention chain, and the
    chain's one-epoch autocorrelation ``1 - start - end``."""
    start, end = params.contention_start_prob, params.contention_end_prob
    return start / jnp.maximum(start + end, 1e-9), contention_persistence(start, end)


def margin_factor(
    state: EnvState, params: EnvParams, choice: dict[str, jax.Array], confidence: float
) -> jax.Array:
    """The time factor of the module docstring for the forecast's ``choice`` (:func:`forecast_choice`):
    the mean contention slowdown times ``exp(z_c sd)``."""
    left = jnp.maximum(state.job.epochs - state.epoch, 1).astype(jnp.float32)
    share, rho = contention_share(params)
    gpus, cpus = choice["gpus"], choice["cpus"]
    calm = epoch_metrics(state.job.profile, gpus, cpus, params).epoch_time_s
    busy = epoch_metrics(state.job.profile, gpus, cpus, params, True).epoch_time_s
    slowdown = busy / jnp.maximum(calm, 1e-9) - 1.0
    mean = 1.0 + share * slowdown
    # Variance of the contended share of ``left`` epochs of a chain with autocorrelation ``rho``.
    share_variance = share * (1.0 - share) / left * (1.0 + rho) / jnp.maximum(1.0 - rho, 1e-3)
    variance = (
        posterior_log_time_variance(state.model_stats, params, choice["compute_share"], choice["sync_share"])
        + jnp.square(params.epoch_time_noise) / left
        + jnp.square(slowdown / mean) * share_variance
    )
    return mean * jnp.exp(jax.scipy.special.ndtri(jnp.float32(confidence)) * jnp.sqrt(variance))


def suggested_targets(
    state: EnvState,
    params: EnvParams,
    names: Iterable[str] = SUGGESTIBLE,
    confidence: float | None = None,
    launched: jax.Array | bool = True,
) -> tuple[SlaTargets, dict[str, jax.Array]]:
    """The job's SLA targets with ``names`` suggested (module docstring: the reference code's margins,
    or margins for ``confidence`` in :data:`CONFIDENCE_RANGE`) and the others kept, and the
    forecast's choice they come from (:func:`forecast_choice`, with ``names`` unlimited and
    ``launched`` as there; ``margin`` is the time factor used)."""
    names = check_suggestible(names)
    check_confidence(confidence)
    choice = forecast_choice(without_limits(state, names), params, launched)
    if confidence is None:
        time_margin, cost_margin, throughput_margin = TIME_MARGIN, COST_MARGIN, THROUGHPUT_MARGIN
    else:
        factor = margin_factor(state, params, choice, confidence)
        time_margin, cost_margin, throughput_margin = factor, factor, 1.0 / factor
    choice["margin"] = jnp.asarray(time_margin, jnp.float32)
    margins = {
        "deadline_s": time_margin * choice["time_s"],
        "budget_usd": cost_margin * choice["cost_usd"],
        "min_throughput": throughput_margin * choice["throughput"],
    }
    targets = state.job.sla_targets.replace(**{name: margins[name] for name in names})
    return targets, choice
