"""The pure-JAX job-and-cluster environment (see ``job_env.JobAllocationEnv``), a gymnax environment
registered as ``GYMNAX_ID`` (``gymnax.make("JobAllocation-v0")``) on import.

``NUM_ACTIONS`` and ``ACTION_NAMES`` are the paper's 9 moves (the ``paper`` action set); an env's own
count is ``env.num_actions`` (90 for the default ``targets_relocate``), and ``num_actions(set)`` /
``action_names(set, params)`` give any set's."""

from collections.abc import Sequence

from slamorl_jax.cli_start import require_backend

# ``python -m slamorl_jax.env.feasibility`` imports this package first, and gymnax computes arrays on
# import: a platform the machine lacks is one line and status 2 (a no-op unless run as a program).
require_backend()
# ruff: noqa: E402
from slamorl_jax.env.gymnax_import import import_gymnax

import_gymnax()  # before any module below imports gymnax: without its renderers' plotting libraries
from slamorl_jax.env.action_sets import ACTION_SETS, DEFAULT_ACTION_SET, action_names, num_actions
from slamorl_jax.env.actions import ACTION_NAMES, NO_OP_ACTION, NUM_ACTIONS, encode_action
from slamorl_jax.env.adaptive_weights import adapt
from slamorl_jax.env.catalog import Catalog, load_catalog
from slamorl_jax.env.defaults import default_params
from slamorl_jax.env.derived import with_derived_tables
from slamorl_jax.env.job_env import JobAllocationEnv, episode_figures
from slamorl_jax.env.objectives import OBJECTIVES, PREFERENCES, SLA_NAMES, preference_vector
from slamorl_jax.env.observation import (
    FEATURE_NAMES,
    NUM_FEATURES,
    NUM_PAPER_FEATURES,
    PAPER_FEATURE_NAMES,
    observe,
)
from slamorl_jax.env.params import INIT_STRATEGIES, MAX_GPUS, EnvParams, WorkloadParams, with_values
from slamorl_jax.env.registration import GYMNAX_ID, GYMNAX_SCALAR_ID, register_with_gymnax
from slamorl_jax.env.scalar_reward import REWARDS, VECTOR, ScalarRewardWrapper, with_reward
from slamorl_jax.env.scenarios import SCENARIOS, scenario_params, with_preference, with_scenario
from slamorl_jax.env.state import EnvState, JobSpec, SlaTargets
from slamorl_jax.env.validation import validate_params

__all__ = [
    "ACTION_NAMES",
    "ACTION_SETS",
    "DEFAULT_ACTION_SET",
    "FEATURE_NAMES",
    "GYMNAX_ID",
    "GYMNAX_SCALAR_ID",
    "INIT_STRATEGIES",
    "MAX_GPUS",
    "NO_OP_ACTION",
    "NUM_ACTIONS",
    "NUM_FEATURES",
    "NUM_PAPER_FEATURES",
    "OBJECTIVES",
    "PAPER_FEATURE_NAMES",
    "PREFERENCES",
    "REWARDS",
    "SCENARIOS",
    "SLA_NAMES",
    "Catalog",
    "EnvParams",
    "EnvState",
    "JobAllocationEnv",
    "JobSpec",
    "ScalarRewardWrapper",
    "SlaTargets",
    "WorkloadParams",
    "action_names",
    "adapt",
    "default_params",
    "encode_action",
    "episode_figures",
    "load_catalog",
    "make",
    "num_actions",
    "observe",
    "preference_vector",
    "scenario_params",
    "validate_params",
    "with_derived_tables",
    "with_preference",
    "with_reward",
    "with_scenario",
    "with_values",
]


def make(
    scenario: str = "mixed",
    catalog: Catalog | None = None,
    action_set: str = DEFAULT_ACTION_SET,
    reward: str | Sequence[float] = VECTOR,
) -> tuple[JobAllocationEnv | ScalarRewardWrapper, EnvParams]:
    """The environment (with the named action set) and validated default params for a named
    scenario (gymnax's ``make``).

    ``reward="vector"`` (default) returns the env with its (time, cost, sla) reward vector; any other
    value wraps it in :class:`ScalarRewardWrapper` (one float per step): ``"adaptive"`` (the env's
    SLA-adapted weights), a preference preset (``"time"``, ``"cost"``, ``"balanced"``) or 3
    non-negative weights.
    """
    env = JobAllocationEnv(catalog, action_set, scenario)
    params = validate_params(scenario_params(scenario, env.catalog))
    return with_reward(env, reward), params


register_with_gymnax()
