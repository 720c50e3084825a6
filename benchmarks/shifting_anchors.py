"""How much re-planning can win on jobs whose world changes: the two hindsight anchors per event kind.

    python -m benchmarks.shifting_anchors [--episodes 1024] [--seed 0]
        [--checkpoint checkpoints/default] [--out benchmarks/results/shifting_anchors.json] [--overwrite]

For each mid-run event kind of ``env/shifts.py`` (every job of the ``shifting`` scenario meeting
that event, at its documented rates and sizes), on the same fresh jobs (common random numbers):
the request kept, the best static allocation in hindsight (it knows the event and holds one
allocation through it) and the re-planning oracle (it knows the event and may move once, right
after it; ``evaluation/replanning.py``), then ``shifting`` itself (all kinds). Figures: the
scenario's objective (time and cost relative to the request, averaged; lower is better), all six
SLAs met, re-allocations, and on the events of the job's nodes (a contention spell, a slower
node) the share of jobs that left those nodes (a GPU change, or a relocation with
``--actions=targets_relocate``). The gap between the two anchors is what knowing the event in advance
gains over the best static choice; a controller that reacts to what it measures can also leave
the random contention of its nodes (a GPU change, ``env/job_env.py``), which neither anchor's plan
does. The trained policy (``--checkpoint``, greedy, from the request) runs beside them on the same
jobs: what reacting gains without hindsight. ``--checkpoint`` may name several policies trained in
the same world, comma-separated (e.g. one per training seed): each runs fed the weights it was
trained with, and the policy's figures are their mean ± sample standard deviation.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse

import jax
import numpy as np

from benchmarks.common import policy_benchmark_main, policy_benchmark_payload, policy_of
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.cli_args import fail, run_command
from slamorl_jax.env.action_sets import WIDEST_ACTION_SET, can_relocate
from slamorl_jax.env.catalog import same_catalog
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import with_values
from slamorl_jax.env.scenarios import with_preference, with_scenario
from slamorl_jax.env.shifts import NUM_SHIFT_KINDS, SHIFT_KINDS
from slamorl_jax.episodes import LEFT_EVENT_NODES, summarise_episodes
from slamorl_jax.evaluation.baselines import BestStatic
from slamorl_jax.evaluation.methods import ORACLE, REQUEST, Method, compared_method, run_method
from slamorl_jax.evaluation.replanning import Replanning
from slamorl_jax.evaluation.suite import world_difference
from slamorl_jax.markdown import markdown_table
from slamorl_jax.policy_checkpoint import load_policy
from slamorl_jax.quality_bar import greedy_policy, objective

MODULE = "benchmarks.shifting_anchors"
PROG = f"python -m {MODULE}"  # how its one-line errors name it, as the parser does
SCENARIO = "shifting"
FIGURES = ("objective", "all_slas_met", "reallocations", "left_nodes")
NODE_EVENTS = ("contention", "slow_node")  # the events a GPU change or a relocation leaves


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every anchor on every event kind, then on the whole scenario."""
    paths = args.checkpoint.split(",")  # each resolved, none empty (common.resolve_checkpoints)
    policies = [load_policy(path) for path in paths]
    for path, policy in zip(paths, policies, strict=True):
        if difference := world_difference(policy.config, policies[0].config):
            fail(f"{path} was trained in another world than {paths[0]} ({difference})", PROG)
        if not same_catalog(policy.catalog, policies[0].catalog):
            fail(f"{path} was trained on another catalogue than {paths[0]}", PROG)
        if policy.config.target_cpus_per_gpu != policies[0].config.target_cpus_per_gpu:
            fail(f"{path} and {paths[0]} were trained on other target grids (--target_cpus_per_gpu)", PROG)
        if can_relocate(policy.config.actions) != can_relocate(policies[0].config.actions):
            fail(f"{path} and {paths[0]} differ in relocating, so in their re-planning anchor", PROG)
    # The anchors and the policies run in the world the policies were trained in (their catalogue,
    # prices and fresh-nodes rule, env/shifts.py), built as evaluate builds it.
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=policies[0].catalog)
    base = with_scenario(
        with_preference(env_params_from_config(policies[0].config, env.catalog), None), SCENARIO
    )
    static = BestStatic.for_params(base)
    replanning = Replanning(static, can_relocate(policies[0].config.actions))  # as evaluate picks it
    methods = (
        *(
            compared_method(str(i), greedy_policy(policy.network), policy.params, policy.config)
            for i, policy in enumerate(policies)
        ),
        Method(REQUEST, "the request, kept"),
        Method(ORACLE, "best static allocation in hindsight", start=static),
        Method("replanning_oracle", "re-planning oracle", start=replanning, controller=replanning),
    )
    cases = {
        kind: with_values(base, shift_probs=np.eye(NUM_SHIFT_KINDS)[k]) for k, kind in enumerate(SHIFT_KINDS)
    }
    cases.pop("none")
    cases[SCENARIO] = base
    keys = [jax.random.key(args.seed)]
    rows: dict[str, dict[str, Any]] = {}
    for case, params in cases.items():
        rows[case] = {}
        for method in methods:
            figures = run_method(env, params, method, keys, args.episodes)
            summary = summarise_episodes(figures)
            finished = figures["finished"].astype(bool)
            rows[case][method.name] = {
                "objective": objective(SCENARIO, summary),
                "all_slas_met": summary["all_slas_met"],
                "reallocations": summary["reallocations"],
                "left_nodes": float(np.mean(figures[LEFT_EVENT_NODES][finished])),
            }
        each = [rows[case].pop(method.name) for method in methods[: len(policies)]]
        rows[case]["policy"] = {figure: float(np.mean([e[figure] for e in each])) for figure in FIGURES}
        rows[case]["policy_std"] = {
            figure: float(np.std([e[figure] for e in each], ddof=1)) if len(each) > 1 else 0.0
            for figure in FIGURES
        }
        rows[case]["policy_each"] = each
    return policy_benchmark_payload(args, rows)


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per event kind: objective and all SLAs met of each anchor, and re-planning's gain."""
    table = []
    several = len(next(iter(payload["rows"].values()))["policy_each"]) > 1

    def mine(r: dict[str, Any], figure: str, fmt: str) -> str:
        """The policy's figure, with its spread over several policies."""
        mean = format(r["policy"][figure], fmt)
        return f"{mean} ± {format(r['policy_std'][figure], fmt)}" if several else mean

    for case, r in payload["rows"].items():
        static, replan, policy = r[ORACLE], r["replanning_oracle"], r["policy"]
        table.append(
            [
                case,
                f"{r['static_request']['objective']:.3f}",
                f"{static['objective']:.3f}",
                f"{replan['objective']:.3f}",
                mine(r, "objective", ".3f"),
                f"{1.0 - replan['objective'] / static['objective']:+.1%}",
                f"{1.0 - policy['objective'] / static['objective']:+.1%}",
                f"{r['static_request']['all_slas_met']:.1%}",
                f"{static['all_slas_met']:.1%}",
                f"{replan['all_slas_met']:.1%}",
                mine(r, "all_slas_met", ".1%"),
                f"{replan['reallocations']:.2f}",
                mine(r, "reallocations", ".2f"),
                f"{replan['left_nodes']:.1%}" if case in (*NODE_EVENTS, SCENARIO) else "-",
                mine(r, "left_nodes", ".1%") if case in (*NODE_EVENTS, SCENARIO) else "-",
            ]
        )
    headers = [
        "event",
        "objective: request",
        "best static",
        "re-planning",
        "policy",
        "re-planning's gain",
        "policy's gain",
        "all SLAs met: request",
        "best static",
        "re-planning",
        "policy",
        "moves: re-planning",
        "policy",
        "left the slowed nodes: re-planning",
        "policy",
    ]
    return (
        f"{payload['episodes']} jobs per row (seed {payload['seed']}); objective = mean of time and cost "
        "relative to the request (lower is better); gains against the best static allocation; policy: "
        f"{policy_of(payload)} from the request"
        + (" (mean ± sample standard deviation over the policies)" if several else "")
        + ".\n\n"
        + markdown_table(headers, table)
    )


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run, print and write the report."""
    policy_benchmark_main(MODULE, __doc__, argv, 1024, run, to_markdown, several=True)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.shifting_anchors")
