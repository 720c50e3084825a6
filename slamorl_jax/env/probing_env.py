"""``ProbingEnv``: ``JobAllocationEnv`` whose every new job starts with probe runs (``probes.py``).

A reset strategy as a subclass: each reset draws the job exactly as ``JobAllocationEnv`` does with the
same key (the same job, request and initial allocation, so runs compare job by job with any other
start), then :func:`probe_start` probes the default set and places the job at the forecast's first
choice, with the probes' time and cost billed. Steps are unchanged; the auto-reset of a finished job
probes too. Use it wherever an env goes: ``episodes.run_episodes(ProbingEnv(), ...)`` (without a
start rule, which would place the probed jobs anew: refused), the trainer.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env import draws as d
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.probes import (
    NUM_PROBES,
    PROBE_BUDGET,
    PROBE_FRACTION,
    probe_allocations,
    probes_worth_running,
    run_probes,
    start_at,
    suggested_allocation,
)
from slamorl_jax.env.state import EnvState

# Mixed into the reset draws' bits to seed the probes' noise, so it is independent of the job's draws.
PROBE_SALT = 0x70726F62


def probe_start(
    env: JobAllocationEnv,
    u: jax.Array | tuple[jax.Array, ...],
    state: EnvState,
    params: EnvParams,
    fraction: float | jax.Array = PROBE_FRACTION,
    budget: float | jax.Array = PROBE_BUDGET,
) -> EnvState:
    """``state`` (a fresh job: ``reset``/``place``) probed on the default set when they are worth
    running (``probes.probes_worth_running`` with ``budget``), ``NUM_PROBES`` uniforms ``u`` giving
    the probes' noise, and placed (``env.place``) at the forecast's first choice after them (on the
    profile alone and with no pause to rank when the probes were skipped: ``probes.first_placement``);
    ``env.step`` continues from it."""
    probed, enabled = default_probes(u, state, params, fraction, budget)
    first_gpus, first_cpus = suggested_allocation(probed, params, launched=enabled)
    return start_at(probed, env.place(state, first_gpus, first_cpus, params), params, enabled)


def default_probes(
    u: jax.Array | tuple[jax.Array, ...],
    state: EnvState,
    params: EnvParams,
    fraction: float | jax.Array = PROBE_FRACTION,
    budget: float | jax.Array = PROBE_BUDGET,
) -> tuple[EnvState, jax.Array]:
    """``(probed, enabled)``: ``state`` (a fresh job) after the default probe set when the probes are
    worth running under ``budget`` (``enabled``), else ``state`` itself; ``u`` as in
    :func:`probe_start`. ``probes.start_at`` then places the job."""
    gpus, cpus = probe_allocations(state, params)
    enabled = probes_worth_running(state, gpus, cpus, params, fraction, budget)
    return run_probes(u, state, gpus, cpus, params, fraction, enabled), enabled


def probe_uniforms(u_reset: jax.Array | tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
    """``NUM_PROBES`` uniforms for a reset's probes, hashed from its ``RESET_DRAWS`` uniforms."""
    u = d.as_tuple(u_reset)
    scale = float(1 << d.UNIFORM_BITS)
    words = [(u[slot] * scale).astype(jnp.uint32) for slot in (d.INIT_GPUS, d.INIT_CPUS, d.INIT_MIX)]
    seed = jnp.stack([words[0] ^ jnp.uint32(PROBE_SALT), words[1] ^ (words[2] << 8)])
    return d.uniforms(seed, NUM_PROBES)


def _is_number(value: object) -> bool:
    """A real number, NumPy's and JAX's scalars included; not a bool (``True`` probed as a budget
    of 1), a string or anything else ``float`` refuses."""
    if isinstance(value, bool | np.bool_ | str | bytes) or np.ndim(value) != 0:
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not np.issubdtype(np.asarray(value).dtype, np.bool_)


class ProbingEnv(JobAllocationEnv):
    """``JobAllocationEnv`` whose jobs start with probe runs (module docstring); ``fraction`` of an
    epoch per probe."""

    name = "JobAllocationProbing-v0"

    def __init__(
        self, *args: object, fraction: float = PROBE_FRACTION, budget: float = PROBE_BUDGET, **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)
        for name, value in (("fraction", fraction), ("budget", budget)):
            if not _is_number(value):
                raise TypeError(f"probe {name} must be a number, got {value!r}")
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"probe fraction must be in (0, 1], got {fraction}")
        if not budget >= 0.0:
            raise ValueError(f"probe budget must be >= 0 (math.inf: always probe), got {budget}")
        self.fraction = fraction
        self.budget = budget

    def __repr__(self) -> str:
        return (
            f"ProbingEnv(action_set={self.action_set!r}, scenario={self.scenario!r}, "
            f"fraction={self.fraction}, budget={self.budget})"
        )

    def reset_from_draws(self, u: jax.Array, params: EnvParams) -> EnvState:
        """The parent's reset state for the draws ``u``, probed and placed (:func:`probe_start`)."""
        state = super().reset_from_draws(u, params)
        return probe_start(self, probe_uniforms(u), state, params, self.fraction, self.budget)
