"""Batched vs one-at-a-time evaluation: the policy's methods and the static baselines on one scenario.

    python -m benchmarks.batched_evaluation [--episodes 2048] [--scenario deadline-critical]
        [--repeats 2] [--checkpoint checkpoints/default]
        [--out benchmarks/results/batched_evaluation.json] [--overwrite]

Runs the evaluation's policy methods (the policy, its start rules and ablations) and static
baselines (the oracle, the profile oracle, the request, min, max, the heuristic) of
``checkpoints/default`` on the same jobs two ways: ``evaluation.methods.run_methods`` (runs that
share a policy step in one compiled program) and ``run_method`` once per method (one program per
method). The first call of each includes compiling (no persistent cache is enabled here, unless
``JAX_COMPILATION_CACHE_DIR`` turns JAX's on: the report's machine says so); the repeats after it are
warm. The two are timed in turns; ``block_until_ready`` is implied, as both
return host arrays.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    RESULTS_DIR,
    add_checkpoint_flag,
    check_checkpoint,
    machine_info,
    parse_and_report,
    policy_of,
)
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, run_command, summary
from slamorl_jax.env.scenarios import SCENARIOS
from slamorl_jax.markdown import markdown_table


def run(args: argparse.Namespace) -> dict[str, Any]:
    """First (compile + run) and warm wall times of both ways."""
    import jax

    from slamorl_jax.agent.trainer import env_params_from_config
    from slamorl_jax.env.action_sets import WIDEST_ACTION_SET
    from slamorl_jax.env.job_env import JobAllocationEnv
    from slamorl_jax.env.scenarios import with_preference, with_scenario
    from slamorl_jax.evaluation.baselines import BestStatic, ProfileBestStatic
    from slamorl_jax.evaluation.methods import baseline_methods, policy_methods, run_method, run_methods
    from slamorl_jax.policy_checkpoint import load_policy
    from slamorl_jax.quality_bar import greedy_policy

    policy = load_policy(args.checkpoint)
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=policy.catalog)
    base = with_preference(env_params_from_config(policy.config, env.catalog), None)
    oracle = BestStatic.for_params(base)
    methods = policy_methods(greedy_policy(policy.network), oracle) + baseline_methods(
        oracle, None, ProfileBestStatic(oracle)
    )
    params = with_scenario(base, args.scenario)
    keys = [jax.random.key(0)]

    def batched() -> None:
        run_methods(env, [(m, params) for m in methods], keys, args.episodes, policy.params)

    def one_at_a_time() -> None:
        for method in methods:
            run_method(env, params, method, keys, args.episodes, policy.params)

    ways = {"batched": batched, "one_at_a_time": one_at_a_time}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(1 + args.repeats):
        for name, call in ways.items():
            started = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - started)
    return {
        "checkpoint": args.checkpoint,
        "scenario": args.scenario,
        "episodes": args.episodes,
        "methods": [m.name for m in methods],
        "first_s": {name: t[0] for name, t in times.items()},
        "warm_s": {name: min(t[1:]) for name, t in times.items()},
        "machine": machine_info(),
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """The table of both ways."""
    rows = [
        [name, f"{payload['first_s'][name]:.1f}", f"{payload['warm_s'][name]:.1f}"]
        for name in payload["first_s"]
    ]
    return (
        f"{len(payload['methods'])} methods of {policy_of(payload)} on {payload['episodes']} "
        f"`{payload['scenario']}` jobs, one key.\n\n"
        + markdown_table(["way", "first call s (compile + run)", "warm s (best repeat)"], rows)
        + f"\n\nMachine: {payload['machine']}"
    )


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run, print and write the report."""
    parser = OneLineArgumentParser(
        prog="python -m benchmarks.batched_evaluation", description=summary(__doc__)
    )
    add_checkpoint_flag(parser)
    parser.add_argument(
        "--scenario", choices=SCENARIOS, default="deadline-critical", help="the jobs' scenario"
    )
    parser.add_argument("--episodes", type=bounded(int, 1, 1 << 16), default=2048, help="jobs per call")
    parser.add_argument("--repeats", type=bounded(int, 1, 100), default=2, help="timed calls per method")
    parse_and_report(
        parser, argv, RESULTS_DIR / "batched_evaluation.json", run, to_markdown, check_checkpoint
    )


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.batched_evaluation")
