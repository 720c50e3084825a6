"""Where a trained policy's gap to the oracle sits, per workload: the start, the grid, and SLAs traded.

    python -m benchmarks.workload_gap [--checkpoint checkpoints/default] [--scenario deadline-critical]
        [--episodes 2048] [--seed 0] [--out benchmarks/results/workload_gap.json] [--overwrite]

The same fresh jobs of one scenario kind (one key, common random numbers, the world the policy was
trained in, as ``evaluate`` builds it) run under six methods:

* ``policy``: the trained policy (greedy, as loaded: its hold threshold and relocation rules),
  from the request, so its first move pays the re-allocation pause;
* ``policy_from_forecast``: the same policy placed before the first epoch, for free, where the
  profile's forecast ranks first (``probes.first_placement``, evaluate's forecast start);
* ``forecast_choice_held``: no policy: the forecast's first choice, placed for free and held;
* ``informed_choice_held``: the same with the forecast told the job's hidden true deviations from
  its profile (hindsight), so the two differ only in what the forecast knows before the job runs;
* ``best_static_grid``: the best static allocation in hindsight among the policy's absolute
  targets (``EnvParams.target_allocation``), placed for free;
* ``best_static_oracle``: the oracle, the same over every allocation (evaluate's anchor).

Per workload and over all jobs, each method's objective over the oracle's, per job then averaged
(time for ``deadline-critical``, cost for ``budget-constrained``, the mean of both ratios
otherwise; finished jobs, paired): the gap between the first two is what the first move's pause
costs, the grid's row what the targets alone leave. Of the forecast start's own gap, the two held
choices split what the policy's later moves add (the start against its choice held), what the
profile's error before any epoch costs (the choice held against the informed one: what knowing
the job's two deviations is worth to the forecast), and what the forecast's own model and ranking
leave against the realised best (the informed choice against the grid's: told the deviations, the
forecast still projects with its own correction of the epoch time, ``online_model``'s
``exp(s * dc + q * ds)``, not the truth's curve of ``job_truth``, and keeps the profile's
utilisation and memory); the share of jobs on which the two
first choices differ, with the held choice's ratio on those jobs alone, shows whether that value
sits in a few jobs or in all; those jobs are split by whether the forecast takes more GPUs than
the informed one, fewer or as many (the CPUs differ), with the held choice's ratio and the SLAs
each choice held meets per job on each share. The forecast start's gap is then split by
whether the oracle meets the scenario's own SLA (the deadline, the budget, both otherwise): where
the oracle misses it too, a policy may trade the preferred objective for the other SLAs, which
the six SLAs met per job (policy / forecast start / oracle) show, with the SLA the forecast start
meets on the most jobs more than the oracle does. Last, the share of jobs whose
first greedy action from the request is the forecast's first choice (``forecast.first_choice``:
keep, or the target the forecast flags): near 1, the policy follows the forecast and inherits its
grid and its errors. Writes JSON and a Markdown table.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.common import (
    RESULTS_DIR,
    add_checkpoint_flag,
    add_job_flags,
    check_checkpoint,
    machine_info,
    parse_and_report,
    policy_of,
)
from slamorl_jax.agent.decision import greedy_actions
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.cli_args import OneLineArgumentParser, run_command, summary
from slamorl_jax.env.action_sets import NUM_MOVES, WIDEST_ACTION_SET, has_targets
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.forecast import candidate_allocation, first_choice
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.objectives import NUM_SLAS, SLA_NAMES
from slamorl_jax.env.observation import observe
from slamorl_jax.env.online_model import posterior_deviation
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.probes import first_placement
from slamorl_jax.env.scenarios import SCENARIO_KINDS, with_preference, with_scenario
from slamorl_jax.env.state import EnvState
from slamorl_jax.episodes import with_init_strategy
from slamorl_jax.evaluation.baselines import BestStatic
from slamorl_jax.evaluation.methods import FORECAST_START, ORACLE, Method, run_methods
from slamorl_jax.markdown import markdown_table
from slamorl_jax.policy_checkpoint import LoadedPolicy, load_policy
from slamorl_jax.quality_bar import greedy_policy

PROG = "python -m benchmarks.workload_gap"
GRID = "best_static_grid"
HELD = "forecast_choice_held"
INFORMED = "informed_choice_held"
METHODS = ("policy", FORECAST_START, HELD, INFORMED, GRID, ORACLE)
# The SLA a scenario's preference is about, which splits the forecast start's gap.
OWN_SLAS = {"deadline-critical": ("deadline_met",), "budget-constrained": ("budget_met",)}
BOTH_SLAS = ("deadline_met", "budget_met")


def grid_oracle(params: EnvParams) -> BestStatic:
    """The best-static rule over the distinct absolute targets of ``params`` (as clipped there)."""
    targets = sorted({(int(g), int(c)) for g, c in np.asarray(params.target_allocation)})
    return BestStatic(tuple(g for g, _ in targets), tuple(c for _, c in targets))


def informed_placement(state: EnvState, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """``probes.first_placement`` with the forecast told the job's hidden true log deviations in
    place of its online model's estimate (a start rule with hindsight, for this report only)."""
    deviation = state.job.deviation
    choice = first_choice(state, params, deviation[0], deviation[1], launched=False)
    return candidate_allocation(state, params, choice)


def objective_ratios(scenario: str, ours: dict[str, np.ndarray], oracle: dict[str, np.ndarray]) -> np.ndarray:
    """Per job, the scenario's objective over the oracle's: time, cost, or the mean of both ratios."""
    time = ours["episode_time_s"] / oracle["episode_time_s"]
    cost = ours["episode_cost_usd"] / oracle["episode_cost_usd"]
    return {"deadline-critical": time, "budget-constrained": cost}.get(scenario, 0.5 * (time + cost))


def jobs_at_request(env: JobAllocationEnv, params: EnvParams, key: jax.Array, episodes: int) -> EnvState:
    """The fresh jobs :func:`run_methods` runs for ``key``: its reset keys, each job at its request
    (as ``Method.env_params`` starts a method without a start rule)."""
    reset_key, _ = jax.random.split(key)  # as episodes.run_episode_batches resets its jobs
    requested = with_init_strategy(params, "requested")
    return jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, episodes), requested)[1]


def follows_forecast(
    policy: LoadedPolicy, env: JobAllocationEnv, params: EnvParams, key: jax.Array, episodes: int
) -> np.ndarray | None:
    """Per job of :func:`run_methods`' batch for ``key`` (the same reset keys and, as the ``policy``
    method starts them, at the request), whether the policy's first greedy action is the
    forecast's first choice; ``None`` for a policy without targets (it cannot take them)."""
    if not has_targets(policy.config.actions):
        return None
    params = with_init_strategy(params, "requested")  # as Method.env_params runs the policy

    @jax.jit
    def first_actions(policy_params: Any) -> tuple[jax.Array, jax.Array]:
        state = jobs_at_request(env, params, key, episodes)
        obs = jax.vmap(observe, in_axes=(0, None))(state, params)
        actions = greedy_actions(
            policy.network.apply(policy_params, obs, state.weights)[0], policy.hold_below
        )

        def suggested(one: Any) -> jax.Array:
            candidate = first_choice(one, params, *posterior_deviation(one.model_stats, params))
            return jnp.where(candidate == 0, NO_OP_ACTION, NUM_MOVES + candidate - 1)

        return actions, jax.vmap(suggested)(state)

    actions, suggested = first_actions(policy.params)
    return np.asarray(actions == suggested)


def first_choice_allocations(
    env: JobAllocationEnv, params: EnvParams, key: jax.Array, episodes: int
) -> np.ndarray:
    """Per job of :func:`run_methods`' batch for ``key``, the GPUs and CPUs of the forecast's first
    choice and of the informed forecast's (:func:`informed_placement`): ``[jobs, 4]`` ints."""

    @jax.jit
    def placements() -> jax.Array:
        state = jobs_at_request(env, params, key, episodes)
        own = jax.vmap(first_placement, in_axes=(0, None))(state, params)
        informed = jax.vmap(informed_placement, in_axes=(0, None))(state, params)
        return jnp.stack([*own, *informed], axis=-1)

    return np.asarray(placements())


def informed_differs(choices: np.ndarray) -> np.ndarray:
    """Per job, whether the informed first choice is another allocation than the forecast's own
    (``choices`` as :func:`first_choice_allocations` gives them)."""
    return np.any(choices[:, :2] != choices[:, 2:], axis=-1)


def workload_row(
    scenario: str,
    figures: dict[str, dict[str, np.ndarray]],
    follows: np.ndarray | None,
    choices: np.ndarray,
    mine: np.ndarray,
) -> dict[str, Any]:
    """The figures of the jobs ``mine`` (a mask over the batch) that every method finished;
    ``follows`` and ``choices`` per job as :func:`follows_forecast` and :func:`first_choice_allocations`."""
    done = mine & np.logical_and.reduce([figures[m]["finished"].astype(bool) for m in METHODS])
    oracle = figures[ORACLE]
    row: dict[str, Any] = {"jobs": int(done.sum())}
    if not done.any():
        return row  # no job every method finished: no figure
    for method in METHODS[:-1]:
        row[f"{method}_over_oracle"] = float(objective_ratios(scenario, figures[method], oracle)[done].mean())
    own = np.logical_and.reduce([oracle[name].astype(bool) for name in OWN_SLAS.get(scenario, BOTH_SLAS)])
    start = objective_ratios(scenario, figures[FORECAST_START], oracle)
    for label, where in (("oracle_meets", own), ("oracle_misses", ~own)):
        picked = done & where
        row[f"jobs_{label}"] = int(picked.sum())
        row[f"{FORECAST_START}_over_oracle_{label}"] = _mean(start[picked])
    for method in (*METHODS[:2], ORACLE):
        row[f"{method}_slas_met"] = float(figures[method]["job_sla_met"][done].sum(axis=1).mean())
        rates = figures[method]["job_sla_met"][done].mean(axis=0)
        row[f"{method}_sla_rates"] = dict(zip(SLA_NAMES, map(float, rates), strict=True))
    gains = {
        name: row[f"{FORECAST_START}_sla_rates"][name] - row[f"{ORACLE}_sla_rates"][name]
        for name in SLA_NAMES
    }
    row["largest_sla_gain"] = max(gains.items(), key=lambda item: item[1])
    row["follows_forecast"] = None if follows is None else float(follows[done].mean())
    differ = done & informed_differs(choices)
    row["informed_differs"] = float(differ.sum() / done.sum())
    held = objective_ratios(scenario, figures[HELD], oracle)
    row[f"{HELD}_over_oracle_where_informed_differs"] = _mean(held[differ])
    own_gpus, informed_gpus = choices[:, 0], choices[:, 2]
    sides = {
        "more": own_gpus > informed_gpus,
        "fewer": own_gpus < informed_gpus,
        "as_many": own_gpus == informed_gpus,
    }
    row["where_informed_differs"] = {
        side: {
            "jobs": int((differ & where).sum()),
            f"{HELD}_over_oracle": _mean(held[differ & where]),
            **{
                f"{m}_slas_met": _mean(figures[m]["job_sla_met"][differ & where].sum(axis=1))
                for m in (HELD, INFORMED)
            },
        }
        for side, where in sides.items()
    }
    return row


def _mean(values: np.ndarray) -> float | None:
    """The mean of ``values``, ``None`` for none."""
    return float(values.mean()) if values.size else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The methods on the same jobs; rows per workload and over all jobs."""
    policy = load_policy(args.checkpoint)
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=policy.catalog)
    params = with_scenario(
        with_preference(env_params_from_config(policy.config, env.catalog), None), args.scenario
    )
    greedy = greedy_policy(policy.network, policy.hold_below)
    methods = (
        Method("policy", "trained policy (greedy), from the request", greedy, True),
        Method(
            FORECAST_START,
            "the policy placed where the forecast ranks first",
            greedy,
            True,
            start=first_placement,
        ),
        Method(HELD, "the forecast's first choice, placed and held", start=first_placement),
        Method(
            INFORMED,
            "the first choice of the forecast told the job's true deviations, placed and held",
            start=informed_placement,
        ),
        Method(GRID, "best static target in hindsight", start=grid_oracle(params)),
        Method(ORACLE, "best static allocation in hindsight", start=BestStatic.for_params(params)),
    )
    key = jax.random.key(args.seed)
    per_method = run_methods(env, [(m, params) for m in methods], [key], args.episodes, policy.params)
    figures = dict(zip(METHODS, per_method, strict=True))
    follows = follows_forecast(policy, env, params, key, args.episodes)
    choices = first_choice_allocations(env, params, key, args.episodes)
    workload = figures["policy"]["workload"]
    rows = {
        name: workload_row(args.scenario, figures, follows, choices, workload == index)
        for index, name in enumerate(env.catalog.workload_names)
        if np.any(workload == index)
    }
    rows["all jobs"] = workload_row(args.scenario, figures, follows, choices, np.ones(workload.shape, bool))
    return {
        "checkpoint": args.checkpoint,
        "scenario": args.scenario,
        "episodes": args.episodes,
        "seed": args.seed,
        "num_slas": NUM_SLAS,
        "rows": rows,
        "machine": machine_info(),
    }


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _gain(gain: tuple[str, float] | None) -> str:
    return "-" if gain is None or gain[1] <= 0 else f"{gain[0]} (+{100 * gain[1]:.1f})"


def _side(row: dict[str, Any], side: str) -> str:
    """Of the jobs the informed forecast chooses otherwise, those where the forecast takes ``side``
    GPUs ("more", "fewer", "as_many"): how many, the first choice held over the oracle, and the SLAs
    met per job held and informed."""
    cell = row["where_informed_differs"][side]
    if not cell["jobs"]:
        return "0"
    slas = " / ".join(f"{cell[f'{m}_slas_met']:.2f}" for m in (HELD, INFORMED))
    return f"{cell['jobs']}: {cell[f'{HELD}_over_oracle']:.3f} ({slas})"


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per workload with a job every method finished, then all jobs."""
    own = {"deadline-critical": "deadline", "budget-constrained": "budget"}.get(
        payload["scenario"], "deadline and budget"
    )
    table = [
        [
            name,
            r["jobs"],
            _ratio(r["policy_over_oracle"]),
            _ratio(r[f"{FORECAST_START}_over_oracle"]),
            _ratio(r[f"{HELD}_over_oracle"]),
            _ratio(r[f"{INFORMED}_over_oracle"]),
            f"{100 * r['informed_differs']:.0f}% ({_ratio(r[f'{HELD}_over_oracle_where_informed_differs'])})",
            *(_side(r, side) for side in ("more", "fewer", "as_many")),
            _ratio(r[f"{GRID}_over_oracle"]),
            f"{_ratio(r[f'{FORECAST_START}_over_oracle_oracle_meets'])} ({r['jobs_oracle_meets']})",
            f"{_ratio(r[f'{FORECAST_START}_over_oracle_oracle_misses'])} ({r['jobs_oracle_misses']})",
            " / ".join(f"{r[f'{m}_slas_met']:.2f}" for m in ("policy", FORECAST_START, ORACLE)),
            _gain(r["largest_sla_gain"]),
            "-" if r["follows_forecast"] is None else f"{100 * r['follows_forecast']:.0f}%",
        ]
        for name, r in payload["rows"].items()
        if r["jobs"]
    ]
    headers = [
        "workload", "jobs", "policy / oracle", "forecast start / oracle", "its first choice held / oracle",
        "the informed forecast's choice held / oracle",
        "jobs it chooses otherwise (the first choice held / oracle on them)",
        *(
            f"of them, the forecast taking {side} GPUs: jobs: held / oracle (SLAs met held / informed)"
            for side in ("more", "fewer", "as many")
        ),
        "best grid target / oracle",
        f"forecast start / oracle where the oracle meets the {own} (jobs)", "where it misses it (jobs)",
        f"SLAs met per job of {payload['num_slas']}: policy / forecast start / oracle",
        "the SLA the forecast start meets most more often than the oracle (points)",
        "first action = the forecast's first choice",
    ]  # fmt: skip
    return (
        f"{policy_of(payload)} on {payload['episodes']} `{payload['scenario']}` jobs (seed "
        f"{payload['seed']}); objective over the oracle's per job, then averaged.\n\n"
        + markdown_table(headers, table)
    )


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    add_job_flags(parser, episodes=2048, most=1 << 16)
    add_checkpoint_flag(parser)
    parser.add_argument(
        "--scenario", choices=SCENARIO_KINDS, default="deadline-critical", help="scenario kind"
    )
    parse_and_report(parser, argv, RESULTS_DIR / "workload_gap.json", run, to_markdown, check_checkpoint)


if __name__ == "__main__":
    run_command(main, PROG)
