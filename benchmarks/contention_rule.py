"""What the fresh-nodes rule is worth: a policy and the best static allocation with and without it.

    python -m benchmarks.contention_rule [--episodes 2048] [--seed 0]
        [--checkpoint checkpoints/default] [--out benchmarks/results/contention_rule.json] [--overwrite]

Since 7553e9f a GPU change restarts a job on fresh nodes, which leaves random contention and
``shifting``'s spells and slower nodes (``EnvParams.moves_leave_contention``, ``env/shifts.py``);
the best static allocation in hindsight never moves, so it keeps them. This runs the trained policy
(greedy, from the request) and that oracle on the same fresh jobs of each scenario twice, with the
rule (the default) and without it (the environment before 7553e9f), and reports the policy's
per-job time over the oracle's on deadline-critical jobs, its cost over the oracle's on
budget-constrained ones, every scenario's objective over the oracle's and all six SLAs met. The
policy is the same in both columns (trained with the rule), so the gap between them is what the
rule lets that policy win, not what a policy trained without it would score.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse

import jax

from benchmarks.common import policy_benchmark_main, policy_benchmark_payload, policy_of
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.cli_args import run_command
from slamorl_jax.env.action_sets import WIDEST_ACTION_SET
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import with_values
from slamorl_jax.env.scenarios import EVALUATION_SCENARIOS, with_preference, with_scenario
from slamorl_jax.episodes import summarise_episodes
from slamorl_jax.evaluation.baselines import BestStatic
from slamorl_jax.evaluation.headline import oracle_gap
from slamorl_jax.evaluation.methods import ORACLE, Method, run_methods
from slamorl_jax.markdown import markdown_table
from slamorl_jax.policy_checkpoint import load_policy
from slamorl_jax.quality_bar import greedy_policy, objective

POLICY = "policy"
RULES = {"with the rule": True, "without": False}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both methods on every evaluation scenario, under each rule."""
    policy = load_policy(args.checkpoint)
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=policy.catalog)
    base = with_preference(env_params_from_config(policy.config, env.catalog), None)
    methods = (
        Method(POLICY, "the trained policy, from the request", greedy_policy(policy.network), True),
        Method(ORACLE, "best static allocation in hindsight", start=BestStatic.for_params(base)),
    )
    keys = [jax.random.key(args.seed)]
    rows: dict[str, dict[str, Any]] = {}
    for rule, leaves in RULES.items():
        results = {}
        for scenario in EVALUATION_SCENARIOS:
            params = with_values(with_scenario(base, scenario), moves_leave_contention=leaves)
            figures = run_methods(env, [(m, params) for m in methods], keys, args.episodes, policy.params)
            results[scenario] = dict(zip((m.name for m in methods), figures, strict=True))
        summaries = {
            scenario: {name: summarise_episodes(f) for name, f in by_method.items()}
            for scenario, by_method in results.items()
        }
        rows[rule] = {
            "gap": {k: v["job_average"] for k, v in oracle_gap(results, POLICY, ORACLE).items()},
            "over_oracle": {
                s: objective(s, by[POLICY]) / objective(s, by[ORACLE]) for s, by in summaries.items()
            },
            "all_slas_met": {
                s: {name: by[name]["all_slas_met"] for name in (POLICY, ORACLE)}
                for s, by in summaries.items()
            },
        }
    return policy_benchmark_payload(args, rows)


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per rule: the per-job gaps, then per scenario the objective ratio and SLAs met."""
    scenarios = list(next(iter(payload["rows"].values()))["over_oracle"])
    table = []
    for rule, r in payload["rows"].items():
        cells = [rule, f"{r['gap']['time_over_oracle']:.3f}", f"{r['gap']['cost_over_oracle']:.3f}"]
        for scenario in scenarios:
            met = r["all_slas_met"][scenario]
            cells.append(f"{r['over_oracle'][scenario]:.3f} ({met[POLICY]:.1%} / {met[ORACLE]:.1%})")
        table.append(cells)
    headers = ["GPU change leaves contention", "time / oracle (DC jobs)", "cost / oracle (BC jobs)"]
    headers += [f"{s}: objective / oracle (all SLAs met: policy / oracle)" for s in scenarios]
    return (
        f"{payload['episodes']} jobs per scenario (seed {payload['seed']}); policy {policy_of(payload)} "
        "(greedy, from the request) against the best static allocation in hindsight on the same jobs; "
        "per-job ratios are means over jobs.\n\n" + markdown_table(headers, table)
    )


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run, print and write the report."""
    policy_benchmark_main("benchmarks.contention_rule", __doc__, argv, 2048, run, to_markdown)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.contention_rule")
