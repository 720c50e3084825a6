"""Which network reaches the quality bar fastest: wall-clock time to the bar per actor-critic size.

    python -m benchmarks.network_choice [--hidden-sizes 64,64 128,128 256,256] [--budget-s 300]
        [--eval-every 5] [--eval-episodes 512] [--out benchmarks/results/network_choice.json] [--overwrite]

For each size, ``python -m slamorl_jax.train``'s default configuration is trained chunk by chunk;
every ``--eval-every`` chunks the greedy policy is evaluated against the requested static
allocations (``slamorl_jax.quality_bar``) and the training time (compile and evaluation time
excluded) at which every scenario first passes the bar is recorded. Training stops there or at
``--budget-s`` seconds of training.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax

from benchmarks.common import (
    add_out_flags,
    check_report_flags,
    compilation_cache_note,
    format_rate,
    in_own_flags,
    machine_info,
    report,
)
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.agent.trainer import env_params_from_config, make_train
from slamorl_jax.cli_args import (
    OneLineArgumentParser,
    bounded,
    fail,
    positive_int_list,
    run_command,
    seed_value,
    summary,
)
from slamorl_jax.markdown import markdown_table
from slamorl_jax.quality_bar import evaluate_against_request, quality_bar

DEFAULT_SIZES = ((64, 64), (128, 128), (256, 256))
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "network_choice.json"


PROG = "python -m benchmarks.network_choice"


def time_to_bar(hidden: tuple[int, ...], args: argparse.Namespace) -> dict[str, Any]:
    """Train one network size until it passes the quality bar or the budget runs out."""
    config = TrainConfig(hidden_sizes=hidden, seed=args.seed)
    trainer = make_train(config)
    env_params = env_params_from_config(config)
    state = jax.jit(trainer.init)(jax.random.key(config.seed), env_params)
    start = time.perf_counter()
    chunk = jax.jit(trainer.update_chunk).lower(state, env_params).compile()
    compile_s = time.perf_counter() - start
    train_s, chunks, evaluations = 0.0, 0, []
    passed_at: dict[str, Any] | None = None
    while train_s < args.budget_s and chunks < config.num_chunks:
        tick = time.perf_counter()
        # Up to the next evaluation, the run's last chunk or the budget, whichever comes first.
        for _ in range(min(args.eval_every, config.num_chunks - chunks)):
            state, _ = chunk(state, env_params)
            jax.block_until_ready(state)
            chunks += 1
            if train_s + time.perf_counter() - tick >= args.budget_s:
                break
        train_s += time.perf_counter() - tick
        results = evaluate_against_request(trainer, state.params, config, args.eval_episodes, config.seed)
        verdict = quality_bar(results)
        steps = chunks * config.updates_per_chunk * config.batch_size
        evaluations.append({"train_s": train_s, "env_steps": steps, "bar": verdict, "results": results})
        print(
            f"hidden {hidden}: {train_s:6.1f} s, {steps:,} steps, bar {verdict}", file=sys.stderr, flush=True
        )
        if all(verdict.values()):
            passed_at = {"train_s": train_s, "env_steps": steps}
            break
    return {
        "hidden_sizes": list(hidden),
        "compile_s": compile_s,
        "steps_per_s": evaluations[-1]["env_steps"] / max(train_s, 1e-9),
        "passed_at": passed_at,
        "evaluations": evaluations,
    }


def to_markdown(payload: dict) -> str:
    """The report as Markdown."""
    rows = []
    for r in payload["results"]:
        last = r["evaluations"][-1]["results"]
        passed = r["passed_at"]
        rows.append(
            [
                "-".join(map(str, r["hidden_sizes"])),
                "not within budget" if passed is None else f"{passed['train_s']:.0f}",
                "-" if passed is None else f"{passed['env_steps'] / 1e6:.1f}M",
                format_rate(r["steps_per_s"]),
                f"{r['compile_s']:.1f}",
                f"{last['deadline-critical']['policy']['time_vs_request']:.3f}",
                f"{last['budget-constrained']['policy']['cost_vs_request']:.3f}",
            ]
        )
    headers = [
        "hidden sizes",
        "training s to the bar",
        "env steps to the bar",
        "training steps/s",
        "compile s",
        "deadline-critical time / request (last eval)",
        "budget-constrained cost / request (last eval)",
    ]
    m = payload["machine"]
    return "\n".join(
        [
            "# Time to the quality bar by network size",
            "",
            markdown_table(headers, rows),
            "",
            f"Static request: time / request and cost / request "
            f"{payload['static_reference']['time']:.3f} / {payload['static_reference']['cost']:.3f}. "
            f"Evaluation every {payload['config']['eval_every']} chunks on "
            f"{payload['config']['eval_episodes']} fresh jobs per scenario; budget "
            f"{payload['config']['budget_s']} s of training. Machine: jax {m['jax_version']}, "
            f"{m['backend']}, {m['usable_cpus']} CPUs, commit {m['git_commit']}, {m['timestamp_utc']}."
            + compilation_cache_note(m),
        ]
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """All measurements as a JSON-ready dict."""
    results = [time_to_bar(tuple(h), args) for h in args.hidden_sizes]
    static = results[0]["evaluations"][-1]["results"]
    return {
        "benchmark": "network_choice",
        "machine": machine_info(),
        "config": {
            "hidden_sizes": [list(h) for h in args.hidden_sizes],
            "budget_s": args.budget_s,
            "eval_every": args.eval_every,
            "eval_episodes": args.eval_episodes,
            "seed": args.seed,
        },
        "static_reference": {
            "time": static["deadline-critical"]["requested_static"]["time_vs_request"],
            "cost": static["budget-constrained"]["requested_static"]["cost_vs_request"],
        },
        "results": results,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; a bad value prints one line and exits with status 2."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument(
        "--hidden-sizes",
        type=positive_int_list,
        nargs="+",
        default=[list(s) for s in DEFAULT_SIZES],
        help="the networks to compare, each comma-separated layer widths",
    )
    parser.add_argument(
        "--budget-s", type=bounded(float, 1.0, 36_000.0), default=300.0, help="training seconds per network"
    )
    parser.add_argument(
        "--eval-every", type=bounded(int, 1, 10_000), default=5, help="updates between evaluations"
    )
    parser.add_argument(
        "--eval-episodes", type=bounded(int, 16, 100_000), default=512, help="jobs per evaluation"
    )
    parser.add_argument("--seed", type=seed_value, default=0, help="training and job seed")
    add_out_flags(parser, DEFAULT_OUT)
    args = parser.parse_args(argv)
    for hidden in args.hidden_sizes:  # every size before the first trains
        try:
            validate_config(TrainConfig(hidden_sizes=tuple(hidden), seed=args.seed))
        except ValueError as error:
            fail(f"--hidden-sizes {','.join(map(str, hidden))}: {in_own_flags(str(error))}", parser.prog)
    check_report_flags(args, parser.prog)
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the Markdown table and write JSON + Markdown."""
    report(parse_args(argv), run, to_markdown, PROG)


if __name__ == "__main__":
    run_command(main, PROG)
