"""What a target grid costs: the best static allocation on the grid against the oracle's full lattice.

    python -m benchmarks.target_grid [--episodes 2048] [--grids "2,4,8,12;0,2,4,8;0,2,4,8,12"]
        [--out benchmarks/results/target_grid.json] [--overwrite]

For each CPUs-per-GPU grid (every GPU count 1-16 x the given CPUs per GPU, 0 = the fewest CPUs
the cluster allows; ``env/action_sets.py``) and each named scenario kind, the same fresh jobs run
on the best static allocation in hindsight restricted to the grid and on the oracle's (every GPU
count x every CPU step, ``evaluation/baselines.py``), both placed at the start with no pause. Per
job: time (deadline-critical, balanced) or cost (budget-constrained) over the oracle's, averaged
over jobs, and all six SLAs met. A policy that reaches its targets can do no better than its grid
allows, so this is the grid's share of the gap to the oracle. Writes JSON and a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.common import add_job_flags, machine_info, parse_and_report
from slamorl_jax.cli_args import OneLineArgumentParser, run_command, summary
from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.action_sets import NUM_TARGET_GPUS, target_cpus
from slamorl_jax.env.scenarios import with_preference, with_scenario
from slamorl_jax.episodes import keep_allocation, run_episodes
from slamorl_jax.evaluation.baselines import BestStatic
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "target_grid.json"
DEFAULT_GRIDS = "2,4,8,12;0,2,4,8;0,2,4,8,12"
SCENARIO_FIGURE = {
    "deadline-critical": "episode_time_s",
    "budget-constrained": "episode_cost_usd",
    "balanced": "episode_time_s",
}


def grid_oracle(ratios: tuple[float, ...], params: Any) -> BestStatic:
    """The best-static rule over every GPU count 1-16 x ``ratios`` CPUs per GPU (clipped)."""
    gpus = jnp.repeat(jnp.arange(1, NUM_TARGET_GPUS + 1), len(ratios))
    cpus_per_gpu = jnp.tile(jnp.asarray(ratios, jnp.float32), NUM_TARGET_GPUS)
    gpus, cpus = target_cpus(gpus, cpus_per_gpu, params)
    return BestStatic(tuple(int(g) for g in gpus), tuple(int(c) for c in cpus))


def against_oracle(ours: dict[str, np.ndarray], oracle: dict[str, np.ndarray], figure: str) -> dict[str, Any]:
    """Per-job ``figure`` over the oracle's on the same jobs (mean over jobs) and all SLAs met by both."""
    return {
        "figure": figure,
        "per_job_over_oracle": float(np.mean(ours[figure] / oracle[figure])),
        "all_slas_met": float(np.mean(ours["all_slas_met"])),
        "all_slas_met_oracle": float(np.mean(oracle["all_slas_met"])),
    }


def parse_grids(text: str) -> list[tuple[float, ...]]:
    """``"2,4,8,12;0,2,4"`` -> grids of CPUs per GPU."""
    try:
        grids = [tuple(float(x) for x in part.split(",")) for part in text.split(";") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected grids like '2,4,8;0,2,4', got {text!r}") from None
    if not grids or any(x < 0 or not np.isfinite(x) for grid in grids for x in grid):
        raise argparse.ArgumentTypeError(f"CPUs per GPU must be finite and >= 0, got {text!r}")
    return grids


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every grid on every scenario kind; a JSON-ready payload."""
    env = JobAllocationEnv()
    base = with_preference(env.default_params, None)
    key = jax.random.key(args.seed)
    rows = []
    for scenario, figure in SCENARIO_FIGURE.items():
        params = with_scenario(base, scenario)
        oracle = run_episodes(
            env, params, keep_allocation, key, args.episodes, start=BestStatic.for_params(params)
        )
        for ratios in args.grids:
            ours = run_episodes(
                env, params, keep_allocation, key, args.episodes, start=grid_oracle(ratios, params)
            )
            rows.append(
                {"scenario": scenario, "cpus_per_gpu": list(ratios), **against_oracle(ours, oracle, figure)}
            )
    return {"episodes": args.episodes, "seed": args.seed, "rows": rows, "machine": machine_info()}


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per scenario and grid."""
    lines = [
        [
            r["scenario"],
            ", ".join(f"{x:g}" for x in r["cpus_per_gpu"]),
            f"{r['figure'].removeprefix('episode_').removesuffix('_s').removesuffix('_usd')} "
            f"{r['per_job_over_oracle']:.4f}",
            f"{r['all_slas_met']:.1%} / {r['all_slas_met_oracle']:.1%}",
        ]
        for r in payload["rows"]
    ]
    headers = [
        "scenario",
        "CPUs per GPU (x GPU counts 1-16)",
        "per job / oracle",
        "all SLAs met: grid / oracle",
    ]
    return (
        f"{payload['episodes']} jobs per scenario, seed {payload['seed']}.\n\n"
        + markdown_table(headers, lines)
        + f"\n\nMachine: {payload['machine']}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.target_grid", description=summary(__doc__))
    add_job_flags(parser, episodes=2048)
    parser.add_argument(
        "--grids",
        type=parse_grids,
        default=parse_grids(DEFAULT_GRIDS),
        help=f"CPUs-per-GPU grids, ';'-separated (default: {DEFAULT_GRIDS})",
    )
    parse_and_report(parser, argv, DEFAULT_OUT, run, to_markdown)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.target_grid")
