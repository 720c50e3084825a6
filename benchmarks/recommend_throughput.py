"""Live jobs answered per second: ``live.recommend`` one job at a time against ``recommend_many``.

    python -m benchmarks.recommend_throughput [--num-jobs 1,64,1024,4096] [--repeats 5]
        [--checkpoint checkpoints/default] [--process-calls 3]
        [--out benchmarks/results/recommend_throughput.json] [--overwrite]

The jobs are what simulated jobs of the policy's scenario report after their first epochs
(``live_encoding.reported_job``, each with its measured epochs as history): different workloads, GPU types,
allocations, SLAs and preferences. ``recommend`` answers a sample of them one call each (what a
platform looping over its jobs pays per job); ``recommend_many`` answers ``--num-jobs`` of them in
one call. Both are whole calls as a user makes them, the host's work included (reading each job
into arrays, the readings-outside-training notes, building the answers); the first call of each
shape, which compiles, is timed apart and left out of the medians.

A platform that runs the command once per job and epoch pays a new process each time: imports,
loading the policy and compiling. ``--process-calls`` times ``python -m slamorl_jax.recommend
--job=docs/example_job.json`` as whole processes, wall clock: without a compilation cache, then with
a new empty one (the first call fills it) and again with it filled (the median of the calls).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import numpy as np

from benchmarks.children import run_child
from benchmarks.common import (
    REPO_ROOT,
    add_checkpoint_flag,
    check_checkpoint,
    format_rate,
    machine_info,
    parse_and_report,
)
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, positive_int_list, run_command, summary
from slamorl_jax.compilation_cache import JAX_CACHE_VARIABLE
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "recommend_throughput.json"
EXAMPLE_JOB = REPO_ROOT / "docs" / "example_job.json"
EPOCHS_RUN = 3  # epochs each simulated job runs before it reports
ONE_AT_A_TIME_JOBS = 64  # jobs answered by single recommend calls per timed pass
MAX_JOBS = 1 << 16


def simulated_reports(policy: Any, num_jobs: int, seed: int = 0) -> list[Any]:
    """``num_jobs`` live jobs: fresh jobs of the policy's env run ``EPOCHS_RUN`` epochs at random
    actions and reported with their measured epochs (jobs that end sooner are left out)."""
    from slamorl_jax.env import JobAllocationEnv
    from slamorl_jax.live_encoding import reported_job

    env = JobAllocationEnv(action_set=policy.config.actions, catalog=policy.catalog)
    params = policy.env_params
    drawn = 2 * num_jobs + 64  # a few jobs end within EPOCHS_RUN epochs
    key = jax.random.key(seed)
    _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(key, drawn), params)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    runs, running = [], np.ones(drawn, bool)
    for i in range(EPOCHS_RUN):
        actions = jax.random.randint(jax.random.fold_in(key, 2 * i), (drawn,), 0, env.num_actions)
        _, state, _, terminated, truncated, _ = step(
            jax.random.split(jax.random.fold_in(key, 2 * i + 1), drawn), state, actions, params
        )
        running &= ~np.asarray(terminated | truncated)
        runs.append((np.asarray(state.gpus), np.asarray(state.cpus), np.asarray(state.epoch_time_s)))
    host = jax.device_get(state)
    jobs = []
    for index in np.flatnonzero(running)[:num_jobs]:
        history = [(int(g[index]), int(c[index]), float(t[index])) for g, c, t in runs]
        jobs.append(reported_job(jax.tree.map(lambda x, i=index: x[i], host), env.catalog, history))
    if len(jobs) < num_jobs:
        raise RuntimeError(f"only {len(jobs)} of {drawn} simulated jobs ran {EPOCHS_RUN} epochs")
    return jobs


def job_counts(text: str) -> list[int]:
    """Comma-separated batch sizes, each 1 to ``MAX_JOBS``."""
    counts = positive_int_list(text)
    if max(counts) > MAX_JOBS:
        raise argparse.ArgumentTypeError(f"at most {MAX_JOBS:,} jobs a call, got {max(counts):,}")
    return counts


def timed(call: Any, repeats: int) -> tuple[float, list[float]]:
    """``(first call's seconds, the other calls' seconds)``."""
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times[0], times[1:]


def process_seconds(checkpoint: str, cache_dir: str) -> float:
    """Wall-clock seconds of one ``python -m slamorl_jax.recommend --job`` process on the example job."""
    command = [sys.executable, "-m", "slamorl_jax.recommend", f"--job={EXAMPLE_JOB}"]
    # The child runs in the repository: a checkpoint named from the caller's folder is made absolute.
    command += [f"--checkpoint={Path(checkpoint).absolute()}", f"--compilation_cache_dir={cache_dir}"]
    # JAX's own cache variable would turn a cache on behind "--compilation_cache_dir=".
    environ = {k: v for k, v in os.environ.items() if k != JAX_CACHE_VARIABLE}
    start = time.perf_counter()
    run_child(command, cwd=REPO_ROOT, env=environ, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - start


def process_calls(checkpoint: str, calls: int) -> dict[str, float]:
    """Seconds per new process: median without a cache, the first call into an empty one, median with
    it filled."""
    without = [process_seconds(checkpoint, "") for _ in range(calls)]
    with tempfile.TemporaryDirectory() as cache_dir:
        first = process_seconds(checkpoint, cache_dir)
        warm = [process_seconds(checkpoint, cache_dir) for _ in range(calls)]
    return {
        "calls": calls,
        "no_cache_s_median": float(np.median(without)),
        "empty_cache_s": first,
        "filled_cache_s_median": float(np.median(warm)),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Time both ways of answering on every batch size."""
    from slamorl_jax.live import recommend, recommend_many
    from slamorl_jax.policy_checkpoint import load_policy

    policy = load_policy(args.checkpoint)
    jobs = simulated_reports(policy, max(args.num_jobs))
    sample = jobs[:ONE_AT_A_TIME_JOBS]
    first, rest = timed(lambda: [recommend(policy, job) for job in sample], args.repeats)
    single = {
        "jobs": len(sample),
        "first_pass_s": first,
        "jobs_per_s_median": len(sample) / float(np.median(rest)),
        "jobs_per_s_best": len(sample) / min(rest),
    }
    rows = []
    for n in args.num_jobs:
        first, rest = timed(lambda n=n: recommend_many(policy, jobs[:n]), args.repeats)
        rows.append(
            {
                "num_jobs": n,
                "first_call_s": first,
                "jobs_per_s_median": n / float(np.median(rest)),
                "jobs_per_s_best": n / min(rest),
                "call_s_median": float(np.median(rest)),
            }
        )
    return {
        "checkpoint": str(args.checkpoint),
        "repeats": args.repeats,
        "one_at_a_time": single,
        "batched": rows,
        "processes": process_calls(args.checkpoint, args.process_calls) if args.process_calls else None,
        "machine": machine_info(),
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """A table of jobs/s per batch size against one call per job."""
    single = payload["one_at_a_time"]
    rows = [
        [
            "`recommend`, one call per job",
            1,
            format_rate(single["jobs_per_s_median"]),
            "1.0x",
            f"{single['first_pass_s']:.1f}",
        ]
    ]
    for row in payload["batched"]:
        rows.append(
            [
                "`recommend_many`",
                f"{row['num_jobs']:,}",
                format_rate(row["jobs_per_s_median"]),
                f"{row['jobs_per_s_median'] / single['jobs_per_s_median']:.0f}x",
                f"{row['first_call_s']:.1f}",
            ]
        )
    headers = ["call", "jobs per call", "jobs/s (median)", "vs one call per job", "first call s (compiles)"]
    return (
        f"Median of {payload['repeats']} timed passes after the first; `recommend` answers "
        f"{single['jobs']} jobs a pass. Whole calls, host work included.\n\n"
        + markdown_table(headers, rows)
        + processes_markdown(payload.get("processes"))
        + f"\n\nMachine: {payload['machine']}\n"
    )


def processes_markdown(processes: dict[str, float] | None) -> str:
    """The new-process table (empty when it was not run)."""
    if not processes:
        return ""
    rows = [
        ["no compilation cache (`--compilation_cache_dir=`)", f"{processes['no_cache_s_median']:.2f}"],
        ["the first call, into an empty cache", f"{processes['empty_cache_s']:.2f}"],
        ["the cache filled (the default after one call)", f"{processes['filled_cache_s_median']:.2f}"],
    ]
    return (
        f"\n\n`python -m slamorl_jax.recommend --job=docs/example_job.json`, one new process a call (wall "
        f"clock; medians of {processes['calls']} calls):\n\n"
        + markdown_table(["compilation cache", "seconds a call"], rows)
    )


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(
        prog="python -m benchmarks.recommend_throughput", description=summary(__doc__)
    )
    parser.add_argument("--num-jobs", type=job_counts, default=[1, 64, 1024, 4096], help="batch sizes")
    parser.add_argument("--repeats", type=bounded(int, 1, 100), default=5, help="timed passes per row")
    add_checkpoint_flag(parser, "the policy")
    parser.add_argument(
        "--process-calls",
        type=bounded(int, 0, 100),
        default=3,
        help="new recommend processes timed per cache setting (0: none)",
    )
    parse_and_report(parser, argv, DEFAULT_OUT, run, to_markdown, check_checkpoint)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.recommend_throughput")
