"""SLA targets for a new job whose user gave none: the forecast's first choice with margins (DESIGN §5).

A job submitted without a deadline, a budget or a minimum throughput gets them from the forecast the
policy's observation uses (``env/forecast.py``: the workload's profile corrected by the job's reported
``probes``, the paper's "baseline runs", if any), with the margins of the SLA-MORL reference code's
``SLAConfig.forecast_sla_values`` (``shared/reference``, §6.2: time and cost x 1.1, throughput x 0.9):

1. the SLAs the user left out count as no limit, the ones given stay;
2. the forecast ranks keep and every target of the policy's grid as it always does (most SLAs
   projected to hold, then the preference's time and cost; ``forecast.suggestion``), and its first
   choice is where the job should start;
3. the suggested deadline is :data:`TIME_MARGIN` x that choice's projected completion time, the budget
   :data:`COST_MARGIN` x its projected total cost, the minimum throughput :data:`THROUGHPUT_MARGIN` x
   its projected samples per second (each to 4 significant digits, rounded away from the job's
   side); a move from the job's reported allocation pays its pause in the
   projection, as in the forecast block. The memory and utilisation SLAs are never suggested (no
   limit unless given).

``python -m slamorl_jax.recommend --suggest_slas --job=new_job.json`` answers with them for a job
that has run no epoch, where ``deadline_s`` and ``budget_usd`` may be left out; the job then starts at
the answer's allocation with the answer's SLAs, and asks ``recommend`` after each epoch as usual.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp

from slamorl_jax.env.forecast import candidate_totals, suggestion, target_profile
from slamorl_jax.env.online_model import corrected_epoch_time, posterior_deviation
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState
from slamorl_jax.live import NO_LIMIT, LiveJob, check_recommendable, live_state

# SLAConfig.forecast_sla_values of the reference code (shared/reference §6.2, code L118-123).
TIME_MARGIN = 1.1
COST_MARGIN = 1.1
THROUGHPUT_MARGIN = 0.9
SUGGESTIBLE = ("deadline_s", "budget_usd", "min_throughput")
# What a left-out SLA is while the forecast ranks: never binding.
SIGNIFICANT_DIGITS = 4  # of a suggested target
UNLIMITED = {"deadline_s": NO_LIMIT, "budget_usd": NO_LIMIT, "min_throughput": 0.0}


def without_limits(state: EnvState, names: Iterable[str]) -> EnvState:
    """``state`` with the SLA targets ``names`` (of :data:`SUGGESTIBLE`) set to no limit."""
    targets = state.job.sla_targets.replace(**{name: jnp.float32(UNLIMITED[name]) for name in names})
    return state.replace(job=state.job.replace(sla_targets=targets))


@jax.jit
def forecast_choice(state: EnvState, params: EnvParams) -> dict[str, jax.Array]:
    """The forecast's first choice for ``state`` and its projected totals: ``gpus``, ``cpus``,
    ``time_s`` (completion), ``cost_usd`` (total) and ``throughput`` (samples/s of an epoch there)."""
    mu_compute, mu_sync = posterior_deviation(state.model_stats, params)
    keep, targets, duplicate, now_epoch_s = candidate_totals(state, params, mu_compute, mu_sync)
    keep_flag, target_flags = suggestion(state, params, keep, targets, duplicate)
    k = jnp.argmax(target_flags)
    profile = target_profile(state, params)
    target_epoch_s = corrected_epoch_time(
        profile["epoch_time_s"][k], profile["compute_share"][k], profile["sync_share"][k], mu_compute, mu_sync
    )
    keeps = keep_flag > 0
    epoch_s = jnp.where(keeps, now_epoch_s, target_epoch_s)
    return {
        "gpus": jnp.where(keeps, state.gpus, params.target_allocation[k, 0]),
        "cpus": jnp.where(keeps, state.cpus, params.target_allocation[k, 1]),
        "time_s": jnp.where(keeps, keep.time_s, targets.time_s[k]),
        "cost_usd": jnp.where(keeps, keep.cost_usd, targets.cost_usd[k]),
        "throughput": state.job.profile.samples_per_epoch / jnp.maximum(epoch_s, 1e-9),
    }


def round_outward(value: float, up: bool, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` (> 0) to ``digits`` significant digits, rounded up (a deadline, a budget) or down (a
    minimum): the margin is never eaten by the rounding."""
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(value)))
    return (math.ceil if up else math.floor)(value * scale) / scale


def suggested_slas(job: LiveJob, params: EnvParams, suggest: Iterable[str] = SUGGESTIBLE) -> dict[str, Any]:
    """SLA targets for ``job`` (module docstring): the ones in ``suggest`` from the forecast's first
    choice with the reference code's margins, whatever ``job`` holds for them; the others as ``job``
    gives them. ``ValueError`` for a job that has run an epoch, one ``live.check_recommendable``
    refuses, or a name outside :data:`SUGGESTIBLE`."""
    suggest = tuple(dict.fromkeys(suggest))
    unknown = [name for name in suggest if name not in SUGGESTIBLE]
    if unknown:
        raise ValueError(f"only {', '.join(SUGGESTIBLE)} can be suggested, not {', '.join(unknown)}")
    if job.epochs_done > 0:
        raise ValueError(
            f"SLAs are suggested for a job that has run no epoch yet (epochs_done is {job.epochs_done})"
        )
    check_recommendable(job, params)
    state = without_limits(live_state(job, params), suggest)
    choice = {name: float(value) for name, value in forecast_choice(state, params).items()}
    suggested = {
        "deadline_s": round_outward(TIME_MARGIN * choice["time_s"], up=True),
        "budget_usd": round_outward(COST_MARGIN * choice["cost_usd"], up=True),
        "min_throughput": round_outward(THROUGHPUT_MARGIN * choice["throughput"], up=False),
    }
    slas = {name: suggested[name] if name in suggest else getattr(job, name) for name in SUGGESTIBLE}
    return {
        "source": "forecast_slas",
        "gpus": int(choice["gpus"]),
        "cpus": int(choice["cpus"]),
        **slas,
        "suggested": list(suggest),
        "projected": {name: choice[name] for name in ("time_s", "cost_usd", "throughput")},
        "margins": {"time": TIME_MARGIN, "cost": COST_MARGIN, "throughput": THROUGHPUT_MARGIN},
        "probes_used": len(job.probes or ()),
        "then": "start the job there with these SLAs; after each epoch ask again with its history",
    }
