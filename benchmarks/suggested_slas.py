"""How often jobs meet the SLAs suggested for them from the forecast (``recommend --suggest_slas``).

    python -m benchmarks.suggested_slas [--episodes 2048] [--seed 0]
        [--checkpoint checkpoints/default] [--out benchmarks/results/suggested_slas.json] [--overwrite]

A user who gives no deadline, budget or minimum throughput gets them from the forecast's first
choice with the SLA-MORL reference code's margins (``env/suggested_slas.py``: time and cost x 1.1,
throughput x 0.9). The forecast knows the workload's profile, not the job's hidden deviations from
it (``env/job_truth.py``), so the margins are what absorbs them, with the epoch noise and
contention. Here fresh jobs of each scenario kind (deadline-critical, balanced, budget-constrained:
their preference and their memory and utilisation SLAs as drawn; no mid-run events) are submitted
at their request, get the three suggested targets in place of the drawn ones, and start before
their first epoch at the forecast's first choice:

* ``forecast``: on the profile alone (what ``--suggest_slas`` answers a job with no probes);
* ``probes``: after the default probe runs (``env/probes.py``: the request, the fastest and the
  cheapest target, 0.05 of an epoch each, billed), which correct the forecast first;

with the reference code's margins (``x1.1``) or margins for a 90 % confidence (``90%``, from the
online model's uncertainty: ``recommend --suggest_slas --sla_confidence=0.9``).

Each job then runs held at that allocation (``hold``) or under the shipped policy (``policy``,
greedy). Reported per scenario, start and controller: the share of jobs that meet the suggested
deadline, budget and minimum throughput, and all three, and how loose the promise is: the mean
suggested deadline over the one suggested for the same job from the forecast with x1.1. Writes JSON
and a Markdown table.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import numpy as np

from benchmarks.common import (
    add_checkpoint_flag,
    add_job_flags,
    check_checkpoint,
    machine_info,
    parse_and_report,
)
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.cli_args import OneLineArgumentParser, run_command, summary
from slamorl_jax.env.action_sets import WIDEST_ACTION_SET
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.probes import PROBE_FRACTION, start_at
from slamorl_jax.env.probing_env import default_probes, probe_uniforms
from slamorl_jax.env.scenario_kinds import SCENARIO_KINDS
from slamorl_jax.env.scenarios import with_preference, with_scenario
from slamorl_jax.env.state import EnvState
from slamorl_jax.env.suggested_slas import SUGGESTIBLE, suggested_targets
from slamorl_jax.episodes import keep_allocation, run_episode_batches, with_init_strategy
from slamorl_jax.markdown import markdown_table
from slamorl_jax.policy_checkpoint import load_policy
from slamorl_jax.quality_bar import greedy_policy

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "suggested_slas.json"
STARTS = {"forecast": 0.0, "probes": math.inf}  # probe budget: never, always
MARGINS = {"x1.1": None, "90%": 0.9}  # the reference code's margins; margins for a confidence
CONTROLLERS = ("hold", "policy")
SLA_INDEX = {"deadline_s": 0, "budget_usd": 1, "min_throughput": 2}  # in episode_figures' job_sla_met


class SuggestedSlaEnv(JobAllocationEnv):
    """``JobAllocationEnv`` whose fresh jobs get the suggested deadline, budget and minimum throughput
    in place of the drawn ones (the reference code's margins, or those of ``confidence``) and start at
    the forecast's first choice, probing first when ``probe_budget`` allows
    (``probes.probes_worth_running``; 0: never)."""

    def __init__(self, probe_budget: float, confidence: float | None = None) -> None:
        super().__init__(action_set=WIDEST_ACTION_SET)
        self.probe_budget = probe_budget
        self.confidence = confidence

    def reset_from_draws(self, u: jax.Array, params: EnvParams) -> EnvState:
        """The parent's job, probed if allowed, with suggested SLAs, placed at the forecast's choice."""
        state = super().reset_from_draws(u, params)
        probed, enabled = default_probes(probe_uniforms(u), state, params, PROBE_FRACTION, self.probe_budget)
        targets, choice = suggested_targets(probed, params, SUGGESTIBLE, self.confidence, enabled)
        job = state.job.replace(sla_targets=targets)
        placed = self.place(state.replace(job=job), choice["gpus"], choice["cpus"], params)
        return start_at(probed, placed, params, enabled)


def suggested_deadlines(env: SuggestedSlaEnv, params: EnvParams, keys: jax.Array) -> np.ndarray:
    """The deadlines ``env`` suggests for the fresh jobs of ``keys``."""
    _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    return np.asarray(state.job.sla_targets.deadline_s)


def met_shares(figures: dict[str, np.ndarray]) -> dict[str, float]:
    """Share of finished jobs meeting each suggested SLA and all three."""
    done = figures["finished"]
    met = figures["job_sla_met"][done][:, [SLA_INDEX[name] for name in SUGGESTIBLE]]
    shares = {name: float(np.mean(met[:, i])) for i, name in enumerate(SUGGESTIBLE)}
    return {**shares, "all_three": float(np.mean(np.all(met, axis=1))), "jobs": int(np.sum(done))}


def run(args: Any) -> dict[str, Any]:
    """Every scenario kind x start x controller on the same jobs."""
    policy = load_policy(args.checkpoint)
    world = env_params_from_config(policy.config, policy.catalog)
    base = with_init_strategy(with_preference(world, None), "requested")
    scenario_params = [with_scenario(base, name) for name in SCENARIO_KINDS]
    runs_of = ((keep_allocation, None), (greedy_policy(policy.network), policy.params))
    controllers = dict(zip(CONTROLLERS, runs_of, strict=True))
    key = jax.random.key(args.seed)
    results: dict[str, Any] = {}
    reset_keys = jax.random.split(jax.random.fold_in(key, 1), args.episodes)
    reference_deadlines = None
    for (start, budget), (margins, confidence) in itertools.product(STARTS.items(), MARGINS.items()):
        env = SuggestedSlaEnv(budget, confidence)
        deadlines = [suggested_deadlines(env, params, reset_keys) for params in scenario_params]
        reference_deadlines = reference_deadlines or deadlines
        for controller, (act, act_params) in controllers.items():
            runs = run_episode_batches(env, scenario_params, act, key, args.episodes, act_params)
            for name, figures in zip(SCENARIO_KINDS, runs, strict=True):
                cell = results.setdefault(name, {}).setdefault(f"{start}, {margins}", {})
                cell[controller] = met_shares(figures)
        for name, mine, reference in zip(SCENARIO_KINDS, deadlines, reference_deadlines, strict=True):
            results[name][f"{start}, {margins}"]["deadline_vs_first"] = float(np.mean(mine / reference))
    return {
        "checkpoint": str(args.checkpoint),
        "episodes": args.episodes,
        "seed": args.seed,
        "results": results,
        "machine": machine_info(),
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per scenario, start and controller."""
    rows = []
    for scenario, by_start in payload["results"].items():
        for start, by_controller in by_start.items():
            for controller in CONTROLLERS:
                shares = by_controller[controller]
                rows.append(
                    [scenario, start, controller, f"{by_controller['deadline_vs_first']:.3f}"]
                    + [f"{shares[name]:.1%}" for name in (*SUGGESTIBLE, "all_three")]
                    + [shares["jobs"]]
                )
    headers = [
        "scenario",
        "start, margins",
        "run",
        "deadline / first row's",
        "deadline met",
        "budget met",
        "throughput met",
        "all three",
        "jobs",
    ]
    return (
        f"Suggested SLAs met ({payload['episodes']} fresh jobs per scenario, seed {payload['seed']}, policy "
        f"{payload['checkpoint']}; `python -m benchmarks.suggested_slas`).\n\n"
        + markdown_table(headers, rows)
        + f"\n\nMachine: {payload['machine']}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.suggested_slas", description=summary(__doc__))
    add_job_flags(parser, episodes=2048)
    add_checkpoint_flag(parser, "the policy")
    parse_and_report(parser, argv, DEFAULT_OUT, run, to_markdown, check_checkpoint)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.suggested_slas")
