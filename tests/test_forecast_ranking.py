"""The forecast's ranking (``forecast.suggestion``) on hand-made candidates: most SLAs first however
far apart the objectives (0 included), then the preference's objective, then the cheapest, then
keep, then the first target; a target repeating the current allocation is left to keep."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.action_sets import NUM_TARGETS
from slamorl_jax.env.forecast import Projection, suggestion
from slamorl_jax.env.state import EnvState

# A cost-only preference makes the objective proportional to the cost; a time-only one to the time.
TIME_ONLY = (1.0, 0.0, 0.0)
COST_ONLY = (0.0, 1.0, 0.0)


@pytest.fixture(scope="module")
def job_state(env: JobAllocationEnv) -> Callable[[tuple[float, float, float]], EnvState]:
    """A freshly reset job with the given preference."""
    _, state = env.reset(jax.random.key(0), env.default_params)

    def with_preference(preference: tuple[float, float, float]) -> EnvState:
        return state.replace(job=state.job.replace(preference=jnp.asarray(preference, jnp.float32)))

    return with_preference


@pytest.fixture(scope="module")
def rank(env: JobAllocationEnv) -> Callable[..., int]:
    """``rank(state, keep, targets, duplicate=None)`` -> the flagged candidate: -1 for keep, else the
    target's index; asserts exactly one is flagged. ``keep`` is ``(time, cost, other SLAs)``,
    ``targets`` a list of them for the first targets (the rest far worse: over the deadline and
    the budget, no other SLA, the largest objective)."""
    ranked = jax.jit(suggestion)

    def call(
        state: EnvState,
        keep: tuple[float, float, float],
        targets: list[tuple[float, float, float]],
        duplicate: int | None = None,
    ) -> int:
        slas = state.job.sla_targets
        worst = (10.0 * float(slas.deadline_s), 10.0 * float(slas.budget_usd), 0.0)
        rows = np.array(targets + [worst] * (NUM_TARGETS - len(targets)), np.float32)
        marks = np.zeros(NUM_TARGETS, bool)
        if duplicate is not None:
            marks[duplicate] = True
        keep_flag, target_flags = ranked(
            state,
            env.default_params,
            Projection(*(jnp.float32(v) for v in keep)),
            Projection(*(jnp.asarray(rows[:, i]) for i in range(3))),
            jnp.asarray(marks),
        )
        flags = np.concatenate([[float(keep_flag)], np.asarray(target_flags)])
        assert flags.sum() == 1.0, f"{flags.sum()} candidates flagged"
        return int(np.argmax(flags)) - 1

    return call


def _fractions(state: EnvState, time: float, cost: float, others: float) -> tuple[float, float, float]:
    """A candidate at ``time`` x the deadline and ``cost`` x the budget."""
    slas = state.job.sla_targets
    return (time * float(slas.deadline_s), cost * float(slas.budget_usd), others)


def test_more_slas_rank_first_however_far_apart_the_objectives(job_state: Callable, rank: Callable) -> None:
    """All six SLAs at the deadline beat five at a thousandth of it, and beat two at no time and no
    cost (objective 0); keep is flagged when it meets more SLAs than every target."""
    for preference in (TIME_ONLY, COST_ONLY):
        state = job_state(preference)
        all_six = _fractions(state, 1.0, 1.0, 4.0)
        five = _fractions(state, 1e-3, 1e-3, 3.0)
        assert rank(state, five, [five, five, all_six, five]) == 2
        assert rank(state, all_six, [five, five, five]) == -1
        free = (0.0, 0.0, 0.0)  # on time and in budget: two SLAs, objective 0
        assert rank(state, free, [free, free, all_six]) == 2
        assert rank(state, free, [free, _fractions(state, 2.0, 2.0, 0.0)]) == -1


def test_equal_slas_rank_by_the_preference_then_the_cost(job_state: Callable, rank: Callable) -> None:
    """Among candidates meeting as many SLAs the lower objective wins (time for a time-only
    preference, cost for a cost-only one); at equal time the cheaper target wins."""
    time_only, cost_only = job_state(TIME_ONLY), job_state(COST_ONLY)
    fast_dear = _fractions(time_only, 0.5, 0.9, 4.0)
    slow_cheap = _fractions(time_only, 0.8, 0.3, 4.0)
    assert rank(time_only, slow_cheap, [slow_cheap, fast_dear]) == 1
    assert rank(cost_only, fast_dear, [fast_dear, slow_cheap]) == 1
    same_time_cheaper = _fractions(time_only, 0.5, 0.7, 4.0)
    assert rank(time_only, slow_cheap, [fast_dear, same_time_cheaper, fast_dear]) == 1


def test_ties_go_to_keep_then_the_first_target_and_duplicates_to_keep(
    job_state: Callable, rank: Callable
) -> None:
    """A target no better than keep leaves the flag on keep; equal targets flag the first; a target
    that repeats the current allocation is never flagged, however good."""
    state = job_state(TIME_ONLY)
    good = _fractions(state, 0.5, 0.5, 4.0)
    worse = _fractions(state, 0.9, 0.9, 4.0)
    assert rank(state, good, [worse, good, good]) == -1
    assert rank(state, worse, [worse, good, good]) == 1
    better = _fractions(state, 0.1, 0.1, 4.0)
    assert rank(state, worse, [good, better], duplicate=1) == 0
