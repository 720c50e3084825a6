"""The best static allocation in hindsight, per job: the oracle's start rule.

It knows the simulator's noise-free model of the job: over every allocation of the lattice it computes
the job's expected total time and cost (epochs x epoch time, no pauses; with a mid-run event,
``env/shifts.py``, the run through it: ``env/plans.py``), throughput, memory and utilisations, and
picks the allocation that meets the most of the six job-level SLAs, ties broken by the lowest
preference-weighted time and cost relative to the request. The evaluation judges policies against it
(``evaluation/baselines.py``), and the history store and the imitation's demonstrations record its
choices (``history/``), so it lives with the environment they all build on.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.plans import best_index, plan_outcomes
from slamorl_jax.env.state import EnvState
from slamorl_jax.env.static_allocations import full_lattice
from slamorl_jax.env.validation import validate_params_once


@dataclasses.dataclass(frozen=True)
class BestStatic:
    """The oracle's start rule over a fixed allocation lattice (hashable, so its runner compiles once).

    Build it with :meth:`for_params` from concrete params; see the module docstring for the choice.
    """

    gpus: tuple[int, ...]
    cpus: tuple[int, ...]

    @classmethod
    def for_params(cls, params: EnvParams) -> BestStatic:
        """The rule over every allocation that actions can reach under ``params`` (``ValueError`` for
        params :func:`~slamorl_jax.env.validate_params` refuses)."""
        validate_params_once(params)
        gpus, cpus = full_lattice(params)
        return cls(tuple(int(g) for g in gpus), tuple(int(c) for c in cpus))

    def __call__(self, state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
        """The job's best static allocation."""
        gpus = jnp.asarray(self.gpus, jnp.int32)
        cpus = jnp.asarray(self.cpus, jnp.int32)
        best = best_index(*expected_static_outcomes(state, gpus, cpus, params))
        return gpus[best], cpus[best]


def expected_static_outcomes(
    state: EnvState, gpus: jax.Array, cpus: jax.Array, params: EnvParams
) -> tuple[jax.Array, jax.Array]:
    """For one job and allocations ``(gpus, cpus)`` (shape ``[L]``): the six job-level SLA checks of
    a noise-free static run (``[6, L]``) and the preference-weighted time and cost relative to the
    request (``[L]``). A job with a mid-run event (``env/shifts.py``) meets it: the static run holds
    its allocation through it (``plans.plan_outcomes`` without a move)."""
    return plan_outcomes(state.job, gpus, cpus, gpus, cpus, False, params)
