"""Name lookup through gymnax: ``gymnax.make("JobAllocation-v0", ...)`` after ``import slamorl_jax.env``
(vector reward), or ``"JobAllocationScalar-v0"`` (the adaptive-weight scalar reward).

gymnax 1.x keeps a registry of factories (``gymnax.register``); this module adds ours once, when
``slamorl_jax.env`` is imported (gymnax has no plugin entry points, so the import is needed).
``gymnax.make`` passes its keyword arguments to :func:`gymnax_factory` and returns the env with its
``default_params`` (the chosen scenario's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnax

from slamorl_jax.env.action_sets import DEFAULT_ACTION_SET
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.scalar_reward import ADAPTIVE, VECTOR, with_reward

GYMNAX_ID = JobAllocationEnv.name
# The same env paying the adaptive-weight scalar reward by default, for code that takes only an env
# name (PureJaxRL's ``config["ENV_NAME"]``) and needs a scalar reward for ``LogWrapper``.
GYMNAX_SCALAR_ID = "JobAllocationScalar-v0"


def gymnax_factory(
    scenario: str = "mixed",
    action_set: str = DEFAULT_ACTION_SET,
    reward: str | Sequence[float] = VECTOR,
) -> Any:
    """The env for ``gymnax.make(GYMNAX_ID, scenario=..., action_set=..., reward=...)`` (see ``make``)."""
    return with_reward(JobAllocationEnv(action_set=action_set, scenario=scenario), reward)


def scalar_gymnax_factory(
    scenario: str = "mixed",
    action_set: str = DEFAULT_ACTION_SET,
    reward: str | Sequence[float] = ADAPTIVE,
) -> Any:
    """The env for ``gymnax.make(GYMNAX_SCALAR_ID, ...)``: ``gymnax_factory`` with ``reward="adaptive"``."""
    return gymnax_factory(scenario, action_set, reward)


def register_with_gymnax() -> None:
    """Register :data:`GYMNAX_ID` and :data:`GYMNAX_SCALAR_ID` with gymnax unless they are (idempotent)."""
    for env_id, factory in ((GYMNAX_ID, gymnax_factory), (GYMNAX_SCALAR_ID, scalar_gymnax_factory)):
        if env_id not in gymnax.registered_envs:
            gymnax.register(env_id, factory)
