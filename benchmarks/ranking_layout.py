"""The forecast's ranking timed in the two layouts a batch can take: job-major and candidate-major.

    python -m benchmarks.ranking_layout [--num-envs 4096] [--repeats 15]
        [--out benchmarks/results/ranking_layout.json] [--overwrite]

Job-major is the layout ``vmap`` gives a batch; candidate-major puts the candidates first.

``benchmarks.step_breakdown`` shows the ranking (``forecast.suggestion``: four dependent reductions
over the candidates, then a flag per candidate) costing about as much as the rest of the
observation together. Under ``vmap`` every per-job ``[K]`` array becomes ``[envs, K]``, so each
reduction runs over the short minor axis and its result is broadcast back along it, which XLA:CPU
does slowly. ``forecast.suggestion`` ranks over its leading axis, so the same function also runs on
a batch laid out ``[K, envs]``, where the reductions are elementwise across rows.

This benchmark steps ``--num-envs`` jobs of the ``mixed`` scenario 20 times under random actions,
computes every candidate's projections once (``forecast.candidate_totals``) and times the ranking
alone on them in both layouts (compile time apart, one warm-up call, timed in turns), checking
that both give the same flags. It measures what moving the forecast block to candidate-major would
buy at most on the ranking; the projections, the other features and the final ``[envs, features]``
observation are not part of it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import numpy as np

from benchmarks.common import format_rate, machine_info, parse_and_report, random_action_rollout
from benchmarks.timing import Timing, compile_timed, interleaved_timings
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, run_command, summary
from slamorl_jax.env import JobAllocationEnv, forecast
from slamorl_jax.env.online_model import posterior_deviation
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "ranking_layout.json"
WARM_STEPS = 20  # random steps before the ranking is timed: jobs at varied epochs and allocations


def stepped_states(env: JobAllocationEnv, params: EnvParams, num_envs: int) -> EnvState:
    """``num_envs`` fresh jobs after ``WARM_STEPS`` steps of random actions (some finished and reset)."""
    return random_action_rollout(env, params, num_envs, WARM_STEPS, jax.random.key(0))[0]


def target_flags(
    state: EnvState,
    params: EnvParams,
    keep: forecast.Projection,
    targets: forecast.Projection,
    duplicate: jax.Array,
) -> jax.Array:
    """``forecast.suggestion``'s target flags, in the layout of ``targets`` (candidates first)."""
    return forecast.suggestion(state, params, keep, targets, duplicate)[1]


# Per job under vmap: flags [envs, K]. On the whole batch given candidate-major: flags [K, envs].
job_major_ranking = jax.vmap(target_flags, in_axes=(0, None, 0, 0, 0))
candidate_major_ranking = target_flags


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Time both layouts on the same projections; a JSON-ready payload."""
    env = JobAllocationEnv()
    params = env.default_params
    state = stepped_states(env, params, args.num_envs)

    def totals(s: EnvState) -> tuple:
        return forecast.candidate_totals(s, params, *posterior_deviation(s.model_stats, params))[:3]

    keep, targets, duplicate = jax.jit(jax.vmap(totals))(state)
    # Candidates first, materialised (an eager transpose): what a candidate-major forecast would hand over.
    targets_by_candidate, duplicate_by_candidate = jax.tree.map(lambda x: x.T, (targets, duplicate))
    inputs = {
        "job-major [envs, K] (vmap)": (job_major_ranking, (state, params, keep, targets, duplicate)),
        "candidate-major [K, envs]": (
            candidate_major_ranking,
            (state, params, keep, targets_by_candidate, duplicate_by_candidate),
        ),
    }
    candidates = {}
    for name, (fn, fn_args) in inputs.items():
        compiled, compile_s = compile_timed(fn, *fn_args)
        candidates[name] = (compiled, fn_args, Timing(work=float(args.num_envs), compile_s=compile_s))
    flags = {name: np.asarray(c(*a)) for name, (c, a, _) in candidates.items()}
    job_major, candidate_major = flags.values()
    same = bool(np.array_equal(job_major, candidate_major.T))
    interleaved_timings(candidates, args.repeats)
    return {
        "num_envs": args.num_envs,
        "num_targets": int(job_major.shape[1]),
        "same_flags": same,
        "layouts": {name: timing.as_dict("jobs") for name, (_, _, timing) in candidates.items()},
        "machine": machine_info(),
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per layout: microseconds per ranking of the batch, jobs ranked per second."""
    layouts = payload["layouts"]
    first = next(iter(layouts.values()))
    rows = [
        [
            name,
            f"{1e6 * float(np.median(t['run_s'])):.0f}",
            format_rate(t["jobs_per_s_median"]),
            f"{float(np.median(first['run_s'])) / float(np.median(t['run_s'])):.2f}x",
            f"{t['compile_s']:.1f}",
        ]
        for name, t in layouts.items()
    ]
    headers = ["layout", "us per batch (median)", "jobs ranked/s", "speed vs job-major", "compile s"]
    return (
        f"The forecast's ranking alone on {payload['num_envs']} jobs x {payload['num_targets']} targets "
        f"(`python -m benchmarks.ranking_layout`); same flags in both layouts: {payload['same_flags']}.\n\n"
        + markdown_table(headers, rows)
        + f"\n\nMachine: {payload['machine']}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.ranking_layout", description=summary(__doc__))
    parser.add_argument(
        "--num-envs", type=bounded(int, 1, 1 << 20), default=4096, help="jobs in the batch (default: 4096)"
    )
    parser.add_argument("--repeats", type=bounded(int, 1, 1000), default=15, help="timed calls per layout")
    parse_and_report(parser, argv, DEFAULT_OUT, run, to_markdown)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.ranking_layout")
