"""What a policy that starts at the request can reach: controllers between the request and the oracle.

    python -m benchmarks.oracle_bounds [--episodes 2048] [--seed 0]
        [--out benchmarks/results/oracle_bounds.json] [--overwrite]

The best-static oracle (``evaluation/baselines.py``) is placed at its allocation before the first
epoch for free; a policy starts at the request and pays the re-allocation pause to leave it, and it
reaches only the target grid (``env/action_sets.py``) in one move. On the same fresh jobs of each
named scenario kind (common random numbers), per job against the oracle:

* ``one_jump_hindsight``: at the first decision, the candidate (keep or a target) the forecast's
  ranking (``env/forecast.py``) picks when it is given the job's true deviations, then keep. The
  best one move to the grid with hindsight; what is left to the oracle is the pause and the grid.
* ``one_jump_forecast``: at the first decision, the candidate the observation's own ranking picks
  (the workload profile alone: the job has measured nothing yet), then keep. The same one move
  without hindsight: what the honest information costs a request-started policy.
* ``follow_truth``: the hindsight ranking at every decision (it re-plans as the job progresses).
* ``follow_forecast``: the observation's own suggestion at every decision (the online model, no
  hindsight): what blindly following the forecast gives, the residual policy's starting point.

Per job: time (deadline-critical, balanced) or cost (budget-constrained) over the oracle's,
averaged over jobs, the same ratio of the means, all six SLAs met and re-allocations.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.common import add_job_flags, machine_info, parse_and_report
from benchmarks.target_grid import SCENARIO_FIGURE, against_oracle
from slamorl_jax.cli_args import OneLineArgumentParser, run_command, summary
from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.action_sets import NUM_MOVES
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.forecast import first_choice
from slamorl_jax.env.online_model import posterior_deviation
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.scenarios import with_preference, with_scenario
from slamorl_jax.env.state import EnvState
from slamorl_jax.episodes import keep_allocation, run_episodes, with_init_strategy
from slamorl_jax.evaluation.baselines import BestStatic
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "oracle_bounds.json"
CONTROLLERS = ("one_jump_hindsight", "one_jump_forecast", "follow_truth", "follow_forecast")


def ranked_action(state: EnvState, params: EnvParams, hindsight: bool) -> jax.Array:
    """The action of the candidate the forecast's ranking puts first, ranked on the job's true
    deviations (``hindsight``) or on the online model's posterior."""
    if hindsight:
        mu_compute, mu_sync = state.job.deviation[0], state.job.deviation[1]
    else:
        mu_compute, mu_sync = posterior_deviation(state.model_stats, params)
    first = first_choice(state, params, mu_compute, mu_sync)
    return jnp.where(first == 0, NO_OP_ACTION, NUM_MOVES + first - 1).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class RankingController:
    """``episodes.Controller``: follow the forecast's ranking every step, or only at the first."""

    hindsight: bool
    first_step_only: bool

    def plan(self, state: EnvState, params: EnvParams) -> jax.Array:
        """The first decision's action."""
        return ranked_action(state, params, self.hindsight)

    def act(self, plan: jax.Array, state: EnvState, params: EnvParams) -> jax.Array:
        """The planned action first, then keep or re-rank."""
        later = NO_OP_ACTION if self.first_step_only else ranked_action(state, params, self.hindsight)
        return jnp.where(state.epoch == 0, plan, later).astype(jnp.int32)


CONTROLLER_RULES = {
    "one_jump_hindsight": RankingController(hindsight=True, first_step_only=True),
    "one_jump_forecast": RankingController(hindsight=False, first_step_only=True),
    "follow_truth": RankingController(hindsight=True, first_step_only=False),
    "follow_forecast": RankingController(hindsight=False, first_step_only=False),
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every controller on every scenario kind; a JSON-ready payload."""
    env = JobAllocationEnv()
    base = with_preference(env.default_params, None)
    key = jax.random.key(args.seed)
    rows = []
    for scenario, figure in SCENARIO_FIGURE.items():
        params = with_init_strategy(with_scenario(base, scenario), "requested")
        oracle = run_episodes(
            env, params, keep_allocation, key, args.episodes, start=BestStatic.for_params(params)
        )
        for name in CONTROLLERS:
            ours = run_episodes(
                env, params, keep_allocation, key, args.episodes, controller=CONTROLLER_RULES[name]
            )
            rows.append(
                {
                    "scenario": scenario,
                    "controller": name,
                    **against_oracle(ours, oracle, figure),
                    "means_over_oracle": float(np.mean(ours[figure]) / np.mean(oracle[figure])),
                    "reallocations": float(np.mean(ours["reallocations"])),
                }
            )
    return {"episodes": args.episodes, "seed": args.seed, "rows": rows, "machine": machine_info()}


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per scenario and controller."""
    lines = [
        [
            r["scenario"],
            f"`{r['controller']}`",
            r["figure"].removeprefix("episode_").removesuffix("_s").removesuffix("_usd"),
            f"{r['per_job_over_oracle']:.3f}",
            f"{r['means_over_oracle']:.3f}",
            f"{r['all_slas_met']:.1%} / {r['all_slas_met_oracle']:.1%}",
            f"{r['reallocations']:.2f}",
        ]
        for r in payload["rows"]
    ]
    headers = [
        "scenario",
        "controller",
        "figure",
        "per job / oracle",
        "mean / oracle mean",
        "all SLAs met: controller / oracle",
        "re-allocations",
    ]
    return (
        f"{payload['episodes']} jobs per scenario, seed {payload['seed']}; every controller starts "
        "at the request and pays its pauses, the oracle is placed for free.\n\n"
        + markdown_table(headers, lines)
        + f"\n\nMachine: {payload['machine']}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.oracle_bounds", description=summary(__doc__))
    add_job_flags(parser, episodes=2048)
    parse_and_report(parser, argv, DEFAULT_OUT, run, to_markdown)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.oracle_bounds")
