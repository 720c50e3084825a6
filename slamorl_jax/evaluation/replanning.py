"""The re-planning oracle: the anchor of jobs whose world changes mid-run (``env/shifts.py``).

It knows each job's noise-free model and its event in advance (when, what, how large) and plans
the whole run at once: an allocation ``a`` from the start, placed before the first epoch for
free as the best-static oracle's is, and an allocation ``b`` the job moves to right after the
event (or keeping what it holds), ranked as the best-static oracle ranks allocations (most
job-level SLAs met, then the lowest preference-weighted time and cost; ``env/plans.py`` gives the
model, in which a move to other GPUs leaves a contention spell or a slower node behind). With one
change point per job and the world constant on each side of it, re-planning every epoch with
hindsight comes down to this choice, up to splitting a phase between two allocations. ``a`` ranges
over the absolute targets of the action grid and the best-static oracle's own choice, ``b`` over
keep and the targets (the moves the ``targets`` action set makes in one step), and with
``relocate`` (the anchor of ``targets_relocate`` policies) also relocating right after the event
(the same allocation on fresh nodes, one GPU pause), so the plan "the best static allocation, kept"
is always a candidate and the anchor is never worse than the best static choice on the model.

It is an ``episodes`` start rule (``__call__``, the first allocation) and ``Controller`` (``plan``
picks ``b`` for the allocation the job started at; ``act`` moves there once the event has
happened). As for the other anchors, the run carries the epoch noise and random contention the
plan does not see; a controller that leaves contended nodes when it meets them (a GPU change,
``env/job_env.py``) can do better than any of them. A job without an event runs the best-static
oracle's allocation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from slamorl_jax.env import shifts
from slamorl_jax.env.action_sets import NUM_TARGETS, RELOCATE_ACTION
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.actions import NUM_ACTIONS as NUM_MOVES
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.plans import best_index, plan_outcomes
from slamorl_jax.env.state import EnvState
from slamorl_jax.evaluation.baselines import BestStatic


@dataclasses.dataclass(frozen=True)
class Replanning:
    """The re-planning oracle (module docstring); hashable, so its runner compiles once."""

    static: BestStatic
    relocate: bool = False  # may relocate after the event (targets_relocate's action)

    @classmethod
    def for_params(cls, params: EnvParams, relocate: bool = False) -> Replanning:
        """The oracle over the targets of ``params`` and the static oracle's lattice."""
        return cls(BestStatic.for_params(params), relocate)

    def _outcomes(
        self, state: EnvState, gpus: jax.Array, cpus: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Checks ``[6, A, C]`` and objectives ``[A, C]`` of every plan from the first allocations
        ``(gpus, cpus)`` (``[A]``): column 0 keeps, column ``1 + k`` moves to target ``k``, and with
        ``relocate`` a last column ``1 + K`` relocates."""
        then_gpus = params.target_allocation[:, 0]
        then_cpus = params.target_allocation[:, 1]
        first_gpus, first_cpus = gpus[:, None], cpus[:, None]
        job = state.job
        kept = plan_outcomes(job, gpus, cpus, gpus, cpus, False, params)
        moved = plan_outcomes(job, first_gpus, first_cpus, then_gpus[None], then_cpus[None], True, params)
        plans = [(kept[0][:, :, None], kept[1][:, None]), moved]
        if self.relocate:
            met, objective = plan_outcomes(job, gpus, cpus, gpus, cpus, True, params, relocate=True)
            plans.append((met[:, :, None], objective[:, None]))
        met = jnp.concatenate([m for m, _ in plans], axis=2)
        objective = jnp.concatenate([o for _, o in plans], axis=1)
        return met, objective

    def __call__(self, state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
        """The first allocation of the job's best plan (a start rule)."""
        static_gpus, static_cpus = self.static(state, params)
        gpus = jnp.concatenate([params.target_allocation[:, 0], static_gpus[None]])
        cpus = jnp.concatenate([params.target_allocation[:, 1], static_cpus[None]])
        met, objective = self._outcomes(state, gpus, cpus, params)
        first = best_index(met, objective) // objective.shape[1]
        return gpus[first], cpus[first]

    def plan(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Where the job goes after its event from where it starts: 0 = keep, ``1 + k`` = target ``k``,
        ``1 + K`` = relocate."""
        met, objective = self._outcomes(state, state.gpus[None], state.cpus[None], params)
        # Without an event every move ties with keep (nothing moves): name it keep.
        return jnp.where(shifts.happens(state.job), best_index(met, objective), 0).astype(jnp.int32)

    def act(self, plan: jax.Array, state: EnvState, params: EnvParams) -> jax.Array:
        """Keep until the event has happened, then take the planned target (kept once reached), or
        relocate once, right after the event."""
        after = jnp.logical_and(shifts.happens(state.job), state.epoch >= state.job.shift_epoch)
        relocating = plan == 1 + NUM_TARGETS
        at_once = jnp.logical_and(after, state.epoch == state.job.shift_epoch)
        target = jnp.where(jnp.logical_and(after, plan > 0), NUM_MOVES - 1 + plan, NO_OP_ACTION)
        return jnp.where(relocating, jnp.where(at_once, RELOCATE_ACTION, NO_OP_ACTION), target).astype(
            jnp.int32
        )
