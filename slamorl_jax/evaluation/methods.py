"""The methods an evaluation compares, and running them on the same jobs with the same noise.

Every method runs the same fresh jobs (one key per seed for all methods: common random numbers),
so their figures compare job by job. The policy starts at each job's request, as a user's job
would; the ablations change one thing each: the cold start (1 GPU, one CPU step), static
weights at evaluation (eta = 0: the policy sees the preference instead of the adapted weights) or,
for a policy that can relocate, relocate masked.
Next to the static baselines run two anchors that know each job's noise-free model: the best
static allocation (``baselines.BestStatic``, placed before the first epoch for free) and the best
walk-then-hold controller with the paper's 9 moves from the request (``reachable.BestReachable``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import WEIGHT_MODES, EnvParams, with_values
from slamorl_jax.env.probes import first_placement
from slamorl_jax.episodes import (
    Controller,
    Policy,
    StartRule,
    keep_allocation,
    run_episode_batches,
    with_init_strategy,
)
from slamorl_jax.evaluation import baselines


@dataclasses.dataclass(frozen=True)
class Method:
    """One way to run jobs: a policy (with or without trained parameters) or a controller with
    hindsight (``episodes.Controller``, which then chooses the actions), where jobs start, and
    evaluation-time changes to the env params."""

    name: str
    description: str
    policy: Policy = keep_allocation
    uses_policy_params: bool = False
    start: StartRule | None = None
    init_strategy: str = "requested"
    adapt_strength: float | None = None
    weights: str | None = None  # form of the objective weights (params.WEIGHT_MODES); None = as trained
    dual_step: float | None = None  # the dual weights' settings (dual_weights.py); None = as trained
    dual_decay: float | None = None
    own_policy_params: Any = None  # parameters of another trained policy (``--compare``)
    controller: Controller | None = None

    def env_params(self, params: EnvParams) -> EnvParams:
        """``params`` as this method runs them."""
        params = with_init_strategy(params, self.init_strategy)
        if self.adapt_strength is not None:
            params = with_values(params, adapt_strength=self.adapt_strength)
        if self.weights is not None:
            params = with_values(params, weights_mode=WEIGHT_MODES.index(self.weights))
        if self.dual_step is not None:
            params = with_values(params, dual_step=self.dual_step)
        if self.dual_decay is not None:
            params = with_values(params, dual_decay=self.dual_decay)
        return params


def policy_methods(
    greedy: Policy, oracle: StartRule, without_relocate: Policy | None = None
) -> tuple[Method, ...]:
    """The trained policy, its ablations (cold start, static weights), the policy started where
    the profile's forecast ranks first (the intelligent initialisation that needs no hindsight and
    no records), and the policy started at the oracle's allocation (does it hold a good allocation,
    or wander off?). For a policy that can relocate, ``without_relocate`` (the same policy with
    relocate masked) adds a third ablation: what its relocations buy."""
    masked: tuple[Method, ...] = ()
    if without_relocate is not None:
        description = (
            "ablation: the policy with relocate masked (its best other action where it would relocate)"
        )
        masked = (Method(NO_RELOCATE, description, without_relocate, True),)
    return (
        Method("policy", "trained policy (greedy), starting at the request", greedy, True),
        Method(
            FORECAST_START,
            "warm start: the policy starting where the profile's forecast ranks first (placed before "
            "the first epoch, no pause, no hindsight)",
            greedy,
            True,
            start=first_placement,
        ),
        Method(
            "policy_cold_start",
            "ablation: the policy starting at 1 GPU and one CPU step",
            greedy,
            True,
            init_strategy="cold",
        ),
        Method(
            "policy_static_weights",
            "ablation: the policy fed static preference weights (eta = 0)",
            greedy,
            True,
            adapt_strength=0.0,
        ),
        *masked,
        Method(
            "policy_from_oracle",
            "diagnostic: the policy starting at the oracle's allocation instead of the request",
            greedy,
            True,
            start=oracle,
        ),
    )


def history_method(greedy: Policy, start: StartRule) -> Method:
    """The policy started at the allocation of each job's nearest record in a history store
    (``slamorl_jax.history.HistoryStart``): intelligent initialisation from finished jobs."""
    return Method(
        HISTORY,
        "warm start: the policy starting at the allocation of the history store's nearest record",
        greedy,
        True,
        start=start,
    )


def compared_method(
    name: str,
    greedy: Policy,
    policy_params: Any,
    trained: TrainConfig,
    other_world: str | None = None,
) -> Method:
    """Another trained policy (its own network and parameters), starting at the request and fed
    weights of the form, eta and dual step and decay of ``trained``, the config it was trained with
    (read here, all of them, so a compared policy never runs with the main policy's). Every method of
    a run is judged in one world (the main policy's env params); ``other_world`` names how the world
    this policy was trained in differs, and the description says so."""
    trained_elsewhere = f"; trained with {other_world}, judged in this run's world" if other_world else ""
    dual = trained.weights == "dual"
    dual_settings = f", dual step {trained.dual_step:g}, decay {trained.dual_decay:g}" if dual else ""
    return Method(
        f"policy[{name}]",
        f"compared checkpoint {name!r} (greedy, {trained.weights} weights, eta = "
        f"{trained.adapt_strength:g}{dual_settings}), starting at the request{trained_elsewhere}",
        greedy,
        True,
        adapt_strength=trained.adapt_strength,
        weights=trained.weights,
        dual_step=trained.dual_step,
        dual_decay=trained.dual_decay,
        own_policy_params=policy_params,
    )


FORECAST_START = "policy_from_forecast"
HISTORY = "policy_from_history"
NO_RELOCATE = "policy_without_relocate"
ORACLE = "best_static_oracle"
PROFILE_ORACLE = "best_static_profile"
REACHABLE = "best_reachable_paper"
REQUEST = "static_request"
# The methods of the report's per-seed and per-workload lines (where they ran).
FOCUS_METHODS = ("policy", NO_RELOCATE, FORECAST_START, REQUEST, ORACLE, PROFILE_ORACLE, REACHABLE)
REACHABLE_DESCRIPTION = (
    "best walk-then-hold controller with the paper's 9 moves in hindsight (noise-free model)"
)


def baseline_methods(
    oracle: StartRule, reachable: Controller | None = None, profile_oracle: StartRule | None = None
) -> tuple[Method, ...]:
    """The static baselines, the reference code's heuristic, the ``oracle`` kept, and (when given)
    the ``reachable`` anchor (``reachable.BestReachable``) from the request and the profile-only
    static choice (``baselines.ProfileBestStatic``)."""
    methods = (
        Method(REQUEST, "the user's requested allocation, kept", start=baselines.requested),
        Method("static_min", "1 GPU and one CPU step, kept", start=baselines.minimum),
        Method(
            "static_max",
            "every GPU and CPU a job may hold, kept (the reference code's static baseline)",
            start=baselines.maximum,
        ),
        Method(
            "reference_heuristic",
            "the reference code's one-shot heuristic option for the preference, kept",
            start=baselines.reference_heuristic,
        ),
        Method(
            ORACLE,
            "best static allocation in hindsight per job (noise-free model, whole lattice)",
            start=oracle,
        ),
    )
    if reachable is not None:  # starts at the request (the default init strategy)
        methods += (Method(REACHABLE, REACHABLE_DESCRIPTION, controller=reachable),)
    if profile_oracle is not None:
        methods += (
            Method(
                PROFILE_ORACLE,
                "the oracle's static choice made from what is known before the job runs: the workload "
                "profile instead of the job's hidden constants, and no mid-run event",
                start=profile_oracle,
            ),
        )
    return methods


def run_method(
    env: JobAllocationEnv,
    params: EnvParams,
    method: Method,
    keys: list[jax.Array],
    num_episodes: int,
    policy_params: Any = None,
) -> dict[str, np.ndarray]:
    """Per-job figures of ``method`` over one batch of ``num_episodes`` jobs per key, concatenated,
    with a ``seed`` entry giving each job's key index."""
    return run_methods(env, [(method, params)], keys, num_episodes, policy_params)[0]


def run_methods(
    env: JobAllocationEnv,
    runs: Sequence[tuple[Method, EnvParams]],
    keys: list[jax.Array],
    num_episodes: int,
    policy_params: Any = None,
) -> list[dict[str, np.ndarray]]:
    """:func:`run_method` for each ``(method, params)`` of ``runs``, in order. Runs that share a policy
    (and its parameters) or a controller step side by side in one compiled program
    (``episodes.run_episode_batches``), whatever their start rules and params: an evaluation
    compiles a few programs instead of one per method, and every run sees the same jobs and noise."""
    groups: dict[tuple, list[int]] = {}
    for index, (method, _) in enumerate(runs):
        own = None if method.own_policy_params is None else id(method.own_policy_params)
        group = (method.policy, method.uses_policy_params, own, method.controller)
        groups.setdefault(group, []).append(index)
    out: list[dict[str, np.ndarray]] = [{} for _ in runs]
    for members in groups.values():
        first = runs[members[0]][0]
        theirs = first.own_policy_params if first.own_policy_params is not None else policy_params
        run_params = [runs[i][0].env_params(runs[i][1]) for i in members]
        starts = [runs[i][0].start for i in members]
        batches: list[list[dict[str, np.ndarray]]] = [[] for _ in members]
        for seed, key in enumerate(keys):
            figures = run_episode_batches(
                env,
                run_params,
                first.policy,
                key,
                num_episodes,
                theirs if first.uses_policy_params else None,
                starts,
                first.controller,
            )
            for slot, one in enumerate(figures):
                one["seed"] = np.full(num_episodes, seed, dtype=np.int32)
                batches[slot].append(one)
        for slot, index in enumerate(members):
            out[index] = {name: np.concatenate([b[name] for b in batches[slot]]) for name in batches[slot][0]}
    return out
