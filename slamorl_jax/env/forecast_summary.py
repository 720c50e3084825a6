"""What the forecast projects for a live answer, in seconds, dollars and SLAs.

The observation carries the forecast block (``forecast.py``) as features in [0, 1]: projected time
over the deadline halved and clipped, cost over the budget the same way, a share of the other SLAs.
A platform engineer reading an answer wants them in the job's own units. For one job this gives, on
the same projections the policy's observation was built from (the profile corrected by the job's
measured epochs, the pause of a move paid, the job launched, as the observation assumes even for a
job that has run nothing yet, which ``probes.first_placement`` places for free instead):

* **keep**: stay where the job is;
* **the forecast's first choice** (``forecast.ranked_candidates``: most SLAs projected to hold, then
  the preference's time and cost), with its allocation;
* **the answer**, where it is one of the forecast's candidates: keep, or an allocation one of the
  absolute targets lands on. A one-step move to an allocation no target reaches, and a relocation
  (whose pause keep's projection leaves out), are not projected.

Each as total time (s), total cost ($), whether the deadline and the budget would hold, and how
many of the six job-level SLAs would. :func:`forecast_summary` is a pure function of arrays (jit and
vmap it); :func:`forecast_dicts` reads a batch of them back on the host.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.forecast import Projection, candidate_allocation, ranked_candidates, sla_count
from slamorl_jax.env.online_model import posterior_deviation
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState

#: Where an answer is not one of the forecast's candidates (:func:`answer_candidate`).
NOT_PROJECTED = -1


class CandidateOutcome(NamedTuple):
    """One candidate's allocation and projected outcome (scalars for one job)."""

    gpus: jax.Array
    cpus: jax.Array
    time_s: jax.Array
    cost_usd: jax.Array
    deadline_met: jax.Array
    budget_met: jax.Array
    slas_met: jax.Array  # of the six job-level SLAs


class ForecastSummary(NamedTuple):
    """Keep, the forecast's first choice and the answer's candidate (``answer_projected`` false where
    the answer is none: its outcome is then keep's, to be ignored)."""

    keep: CandidateOutcome
    first_choice: CandidateOutcome
    answer: CandidateOutcome
    answer_projected: jax.Array


def answer_candidate(
    state: EnvState, params: EnvParams, gpus: jax.Array, cpus: jax.Array, relocate: jax.Array
) -> jax.Array:
    """The forecast candidate an answer ``(gpus, cpus, relocate)`` is: 0 for keep (the job's own
    allocation, not relocated), ``1 + k`` for the first target ``k`` at that allocation, else
    :data:`NOT_PROJECTED`."""
    targets = params.target_allocation
    at_target = (targets[:, 0] == gpus) & (targets[:, 1] == cpus)
    stays = (gpus == state.gpus) & (cpus == state.cpus)
    target = jnp.where(jnp.any(at_target), 1 + jnp.argmax(at_target), NOT_PROJECTED)
    candidate = jnp.where(stays, 0, target)
    return jnp.where(relocate, NOT_PROJECTED, candidate).astype(jnp.int32)


def forecast_summary(
    state: EnvState, params: EnvParams, gpus: jax.Array, cpus: jax.Array, relocate: jax.Array
) -> ForecastSummary:
    """The forecast's projections (module docstring) for one job ``state`` answered with
    ``(gpus, cpus, relocate)``."""
    first, keep, targets = ranked_candidates(state, params, *posterior_deviation(state.model_stats, params))
    every = Projection(*(jnp.concatenate([k[None], t]) for k, t in zip(keep, targets, strict=True)))
    slas = state.job.sla_targets

    def outcome(candidate: jax.Array) -> CandidateOutcome:
        one = Projection(*(field[candidate] for field in every))
        at_gpus, at_cpus = candidate_allocation(state, params, candidate)
        return CandidateOutcome(
            at_gpus,
            at_cpus,
            one.time_s,
            one.cost_usd,
            one.time_s <= slas.deadline_s,
            one.cost_usd <= slas.budget_usd,
            sla_count(one, slas),
        )

    answer = answer_candidate(state, params, gpus, cpus, relocate)
    projected = answer != NOT_PROJECTED
    return ForecastSummary(outcome(0), outcome(first), outcome(jnp.maximum(answer, 0)), projected)


def forecast_dicts(summary: ForecastSummary, jobs: int) -> list[dict[str, Any]]:
    """JSON-ready blocks of the first ``jobs`` jobs of a batched :class:`ForecastSummary` (host
    arrays with a leading batch axis): ``keep``, ``first_choice`` and ``answer`` (``None`` where not
    projected), each with the fields of :class:`CandidateOutcome`, ``slas_met`` an int. Every field
    is read off the arrays once, not job by job (a platform answers thousands of jobs a call)."""

    def columns(outcome: CandidateOutcome) -> list[dict[str, Any]]:
        values = {
            name: np.asarray(getattr(outcome, name))[:jobs].tolist() for name in CandidateOutcome._fields
        }
        values["slas_met"] = [round(x) for x in values["slas_met"]]
        return [dict(zip(values, row, strict=True)) for row in zip(*values.values(), strict=True)]

    keep, first, answer = (columns(o) for o in (summary.keep, summary.first_choice, summary.answer))
    projected = np.asarray(summary.answer_projected)[:jobs].tolist()
    return [
        {"keep": keep[i], "first_choice": first[i], "answer": answer[i] if projected[i] else None}
        for i in range(jobs)
    ]
