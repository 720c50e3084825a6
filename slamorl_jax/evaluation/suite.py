"""One evaluation: every method on every scenario and seed, the headline figures and the front.

:func:`run_suite` returns a JSON-ready payload (``report.py`` turns it into tables and plots) and
the per-job figures it was computed from.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

import jax
import numpy as np

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.env.action_sets import RELOCATE_ACTION, WIDEST_ACTION_SET, can_relocate
from slamorl_jax.env.catalog import same_catalog
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.scenarios import DEFAULT_FRONT_SCENARIO, SCENARIO_KINDS, with_preference, with_scenario
from slamorl_jax.env.target_grid import grid_flag
from slamorl_jax.episodes import StartRule, summarise_episodes
from slamorl_jax.evaluation import pareto
from slamorl_jax.evaluation.baselines import BestStatic, ProfileBestStatic
from slamorl_jax.evaluation.headline import Results, anchor_gap, headline_figures, oracle_gap
from slamorl_jax.evaluation.methods import (
    FOCUS_METHODS,
    FORECAST_START,
    ORACLE,
    PROFILE_ORACLE,
    REACHABLE,
    REQUEST,
    Method,
    baseline_methods,
    compared_method,
    history_method,
    policy_methods,
    run_methods,
)
from slamorl_jax.evaluation.reachable import BestReachable
from slamorl_jax.evaluation.replanning import Replanning
from slamorl_jax.policy_checkpoint import LoadedPolicy
from slamorl_jax.quality_bar import greedy_policy, greedy_policy_without, objective

HEADLINE_BASELINES = (REQUEST, "static_max", "static_min")
FRONT_STATIC = (REQUEST, "static_min", "static_max")
REPLANNING = "replanning_oracle"


def replanning_description(relocate: bool) -> str:
    """The re-planning oracle's description (``relocate``: it may relocate after the event too)."""
    how = " (to a target, or relocating)" if relocate else ""
    return (
        f"re-planning oracle: knows the job's mid-run event and moves once after it{how} "
        "(scenarios with events)"
    )


@dataclasses.dataclass(frozen=True)
class SuiteConfig:
    """What to evaluate: scenarios, jobs per scenario and seed, seeds, and the preference front."""

    scenarios: tuple[str, ...] = SCENARIO_KINDS
    episodes: int = 2048
    seeds: int = 3
    seed: int = 0
    front_points: int = 11
    front_scenario: str = DEFAULT_FRONT_SCENARIO


# The config fields that set the world a policy's jobs run in and that a suite does not set per
# method or per scenario (``env_params_from_config``; the scenario, preference, weights and eta are).
WORLD_FIELDS = ("moves_leave_contention", "prices", "reallocation_pause_s")


def world_difference(trained: TrainConfig, judged: TrainConfig) -> str | None:
    """How the env a compared policy was trained in differs from the one this run judges every
    method in (the main policy's), as ``name=value`` of the trained config for each differing
    :data:`WORLD_FIELDS` entry, or ``None``."""
    differing = [
        f"{name}={getattr(trained, name)}"
        for name in WORLD_FIELDS
        if getattr(trained, name) != getattr(judged, name)
    ]
    return ", ".join(differing) or None


def check_compared_policies(policy: LoadedPolicy, compare: dict[str, LoadedPolicy] | None) -> None:
    """``ValueError`` naming a compared policy trained on another catalogue or target grid than
    ``policy``: one evaluation runs every method on the main policy's env params, whose workloads
    or grid another policy's features and targets do not describe (``env/target_grid.py``)."""
    grid = policy.config.target_cpus_per_gpu
    for name, other in (compare or {}).items():
        if not same_catalog(other.catalog, policy.catalog):
            raise ValueError(
                f"--compare {name}: trained on another catalogue (workloads, GPU types, prices) than "
                "the policy: evaluate them apart"
            )
        if other.config.target_cpus_per_gpu != grid:
            raise ValueError(
                f"--compare {name}: trained with --target_cpus_per_gpu="
                f"{grid_flag(other.config.target_cpus_per_gpu)}, the policy with {grid_flag(grid)}: "
                "evaluate them apart"
            )


def run_suite(
    policy: LoadedPolicy,
    config: SuiteConfig,
    env: JobAllocationEnv | None = None,
    progress: Callable[[str], None] = lambda message: None,
    compare: dict[str, LoadedPolicy] | None = None,
    history: StartRule | None = None,
) -> tuple[dict, Results]:
    """Evaluate ``policy`` against the baselines, the two anchors (the static oracle and the best
    controller reachable with the paper's moves) and ablations, and the ``compare`` policies
    (e.g. a run trained with static weights) on the same jobs; with a ``history`` start rule
    (``slamorl_jax.history.HistoryStart``) also the policy started where it puts each job;
    ``(payload, per-job figures)``."""
    check_compared_policies(policy, compare)
    # The ``targets`` set is a superset with the paper's moves at the same indices, so policies of
    # either action set (and every baseline) run unchanged on one env, on the same jobs.
    env = env or JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=policy.catalog)
    started = time.perf_counter()
    # The policy's (a policy saved with env params of its own refuses the config's, ValueError).
    trained = (
        policy.env_params
        if same_catalog(env.catalog, policy.catalog)
        else env_params_from_config(policy.config, env.catalog)
    )
    base = with_preference(trained, None)
    greedy = greedy_policy(policy.network, policy.hold_below)
    compared = tuple(
        compared_method(
            name,
            greedy_policy(other.network, other.hold_below),
            other.params,
            other.config,
            world_difference(other.config, policy.config),
        )
        for name, other in (compare or {}).items()
    )
    oracle = BestStatic.for_params(base)
    reachable = BestReachable.for_params(base)
    profile_oracle = ProfileBestStatic(oracle)
    warm = (history_method(greedy, history),) if history is not None else ()
    relocating = can_relocate(policy.config.actions)
    without_relocate = (
        greedy_policy_without(policy.network, RELOCATE_ACTION, policy.hold_below) if relocating else None
    )
    methods = (
        policy_methods(greedy, oracle, without_relocate)
        + warm
        + compared
        + baseline_methods(oracle, reachable, profile_oracle)
    )
    # A policy that can relocate is judged against an anchor that may relocate too.
    anchor = Replanning(oracle, relocating)
    replanning = Method(REPLANNING, replanning_description(anchor.relocate), start=anchor, controller=anchor)
    keys = [jax.random.fold_in(jax.random.key(config.seed), index) for index in range(config.seeds)]

    results: Results = {}
    for scenario in config.scenarios:
        params = with_scenario(base, scenario)
        results[scenario] = {}
        with_events = float(np.asarray(params.shift_probs)[0]) < 1.0
        scenario_methods = methods + ((replanning,) if with_events else ())
        progress(f"{scenario}: {len(scenario_methods)} methods")
        figures = run_methods(
            env, [(method, params) for method in scenario_methods], keys, config.episodes, policy.params
        )
        for method, by_job in zip(scenario_methods, figures, strict=True):
            results[scenario][method.name] = by_job

    payload = {
        "config": {
            **dataclasses.asdict(config),
            "checkpoint_step": policy.step,
            "hold_below": policy.hold_below,
            "relocate_payback": policy.network.config.relocate_payback,
            "compare_hold_below": {name: other.hold_below for name, other in (compare or {}).items()},
        },
        "machine": f"jax {jax.__version__}, backend {jax.default_backend()}, {os.cpu_count()} CPUs",
        "methods": {
            m.name: m.description
            for m in (*methods, replanning)
            if any(m.name in by_method for by_method in results.values())
        },
        "summaries": {
            scenario: {name: summarise_episodes(figures) for name, figures in by_method.items()}
            for scenario, by_method in results.items()
        },
        "per_seed_objective": _per_seed_objectives(results),
        "per_workload_objective": _per_workload_objectives(results, env.catalog.workload_names),
        "headline": headline_figures(results, "policy", HEADLINE_BASELINES),
        "oracle_gap": oracle_gap(results, "policy", ORACLE),
        "forecast_start_oracle_gap": oracle_gap(results, FORECAST_START, ORACLE),
        "reachable_gap": anchor_gap(results, "policy", REACHABLE),
        "profile_oracle_gap": oracle_gap(results, PROFILE_ORACLE, ORACLE),
        "replanning": _replanning_figures(results),
    }
    if config.front_points > 0:
        progress("preference front")
        summaries = payload["summaries"].get(config.front_scenario, {})
        payload["front"] = _front(env, base, policy, methods, keys, config, summaries)
    payload["wall_s"] = time.perf_counter() - started
    return payload, results


def _replanning_figures(results: Results) -> dict[str, dict[str, float]]:
    """Where the re-planning oracle ran (scenarios with mid-run events): the scenario's objective and
    all-SLAs-met rate of the policy, the best static allocation and the re-planning oracle, and the
    policy's objective over each anchor's."""
    out = {}
    for scenario, by_method in results.items():
        if REPLANNING not in by_method:
            continue
        row = {}
        for name in ("policy", ORACLE, REPLANNING):
            summary = summarise_episodes(by_method[name])
            row[f"{name}_objective"] = objective(scenario, summary)
            row[f"{name}_all_slas_met"] = summary["all_slas_met"]
        row["policy_over_static_oracle"] = row["policy_objective"] / row[f"{ORACLE}_objective"]
        row["policy_over_replanning"] = row["policy_objective"] / row[f"{REPLANNING}_objective"]
        out[scenario] = row
    return out


def _per_seed_objectives(results: Results) -> dict[str, dict[str, list[float]]]:
    """Each scenario's objective (``quality_bar.objective``: time, cost or their mean, relative to
    the request) per method and seed, so the spread between seeds is visible."""
    out: dict[str, dict[str, list[float]]] = {}
    for scenario, by_method in results.items():
        out[scenario] = {}
        for name, figures in by_method.items():
            seeds = figures["seed"]
            out[scenario][name] = [
                objective(scenario, summarise_episodes({k: v[seeds == s] for k, v in figures.items()}))
                for s in np.unique(seeds)
            ]
    return out


def _per_workload_objectives(
    results: Results, workload_names: tuple[str, ...]
) -> dict[str, dict[str, dict[str, float]]]:
    """Each scenario's objective per workload for the ``FOCUS_METHODS`` that ran (the policy, the
    policy without relocating, the policy from the forecast's start, the request, the oracle, the
    oracle's choice from the profile alone and the reachable anchor: where a workload's jobs are
    hard for the policy, and whether relocating, the start or what is known before the job runs
    costs it), with the number of finished policy jobs."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for scenario, by_method in results.items():
        out[scenario] = {}
        for index, name in enumerate(workload_names):
            row: dict[str, float] = {}
            for method in FOCUS_METHODS:
                if method not in by_method:
                    continue
                figures = by_method[method]
                mine = figures["workload"] == index
                if not np.any(mine & figures["finished"].astype(bool)):
                    continue
                summary = summarise_episodes({k: v[mine] for k, v in figures.items()})
                row[method] = objective(scenario, summary)
                if method == "policy":
                    row["jobs"] = summary["episodes"]
            if row:
                out[scenario][name] = row
    return out


def _front(
    env: JobAllocationEnv,
    base: EnvParams,
    policy: LoadedPolicy,
    methods: tuple[Method, ...],
    keys: list[jax.Array],
    config: SuiteConfig,
    scenario_summaries: dict[str, dict[str, float]],
) -> dict:
    """The policy's and the oracle's (time, cost) per preference, static points, hypervolume and
    expected utility. Static methods do not depend on the preference, so their points are taken
    from ``scenario_summaries`` (the front scenario's summaries) when it was evaluated already."""
    by_name = {m.name: m for m in methods}
    share, vectors = pareto.preference_grid(config.front_points)
    scenario_params = with_scenario(base, config.front_scenario)
    curves: dict[str, dict[str, list[float]]] = {}
    names = ("policy", ORACLE)
    runs = [(by_name[name], with_preference(scenario_params, vector)) for name in names for vector in vectors]
    # Static points not evaluated yet run in the same call: beside the oracle's runs, which also
    # keep their start, they share its compiled program.
    missing = [name for name in FRONT_STATIC if name not in scenario_summaries]
    runs += [(by_name[name], scenario_params) for name in missing]
    figures = iter(run_methods(env, runs, keys, config.episodes, policy.params))
    for name in names:
        summaries = [summarise_episodes(next(figures)) for _ in vectors]
        curves[name] = {
            "time": [summary["time_vs_request"] for summary in summaries],
            "cost": [summary["cost_vs_request"] for summary in summaries],
        }
    static_summaries = {**scenario_summaries, **{name: summarise_episodes(next(figures)) for name in missing}}
    points = {}
    for name in FRONT_STATIC:
        summary = static_summaries[name]
        points[name] = {"time": summary["time_vs_request"], "cost": summary["cost_vs_request"]}

    def stats(time: np.ndarray, cost: np.ndarray) -> dict[str, float]:
        xy = np.stack([np.atleast_1d(time), np.atleast_1d(cost)], axis=1)
        return {
            "hypervolume": pareto.hypervolume(xy),
            "expected_utility": pareto.expected_utility(share, time, cost),
        }

    return {
        "scenario": config.front_scenario,
        "time_share": share.tolist(),
        "preferences": vectors.tolist(),
        "reference_point": list(pareto.REFERENCE_POINT),
        "curves": curves,
        "static_points": points,
        "figures": {
            **{name: stats(np.array(c["time"]), np.array(c["cost"])) for name, c in curves.items()},
            **{name: stats(np.array(p["time"]), np.array(p["cost"])) for name, p in points.items()},
        },
    }
