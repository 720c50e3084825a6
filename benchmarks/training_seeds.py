"""Training-seed spread: train (or take) one run per seed, evaluate each, report mean and spread.

Every learning claim in the README rests on at least three training seeds. This benchmark runs the
default training command once per seed (``python -m slamorl_jax.train --seed=S`` plus any extra
flags, each in its own run directory), or takes existing runs, evaluates each run's final policy
with ``slamorl_jax.evaluation.run_suite`` (every scenario kind, the same jobs for every run, no
preference front), and writes JSON plus a Markdown table of the bar's figures: per scenario the
policy's objective against the request, the best-static oracle and the best reachable walk with the
paper's moves, and all six SLAs met, each as mean, sample standard deviation, min and max over seeds;
then per scenario a table per workload (``workload_figures_of``): the policy's objective over the
request's, the oracle's and its own with relocate masked, and the forecast start's over the oracle's.

    python -m benchmarks.training_seeds --seeds=0,1,2 --out=benchmarks/results/training_seeds.json
    python -m benchmarks.training_seeds --runs=runs/a,runs/b,runs/c --seeds=0,1,2 --out=...  # evaluate
    python -m benchmarks.training_seeds --seeds=0,1,2 --train-flags="--actions=paper" --out=...
    python -m benchmarks.training_seeds --runs=... --seeds=0,1,2 --hold-below=0.5 --out=...
    python -m benchmarks.training_seeds --runs=... --seeds=0,1,2 --relocate-payback=1 --out=...

``--relocate-payback`` evaluates every run with that relocation payback rule in place of its own
(``LoadedPolicy.with_relocate_payback``; ``networks.relocation_pays``).
``--hold-below`` evaluates every run deciding with that threshold (``agent.decision``: the job keeps
its allocation where the policy's top action probability is below it; ``evaluate --hold_below``).

A report already at ``--out`` is refused unless ``--overwrite`` is given.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.children import run_child
from benchmarks.common import REPO_ROOT, add_out_flags, check_report_flags, machine_info, publish_report
from benchmarks.run_sets import checked_runs
from slamorl_jax.cli_args import (
    INT32_MAX,
    OneLineArgumentParser,
    add_hold_below_argument,
    add_relocate_payback_argument,
    bounded,
    fail,
    run_command,
    summary,
)
from slamorl_jax.env.scenarios import EVALUATION_SCENARIOS
from slamorl_jax.env.scenarios import SCENARIOS as ALL_SCENARIOS
from slamorl_jax.evaluation.methods import ORACLE, REACHABLE, REQUEST
from slamorl_jax.run_dirs import new_folder_problem

PROG = "python -m benchmarks.training_seeds"


#: Where the trained runs go unless ``--run-root`` says.
DEFAULT_RUN_ROOT = "runs/seeds"

#: ``train`` flags this command sets for each seed, which ``--train-flags`` must not override (the
#: later flag wins, and the report would name a seed or folder its run was not trained with).
SET_BY_THIS_COMMAND = frozenset({"seed", "run_dir", "checkpoint_dir", "log_dir"})


def flag_name(token: str) -> str:
    """The flag a command-line token names (``--seed=5`` and ``--seed`` give ``seed``); ``""`` for
    a value."""
    return token.lstrip("-").split("=", 1)[0] if token.startswith("-") else ""


def train_command(seed: int, run_dir: Path, flags: list[str]) -> list[str]:
    """The training CLI's command line for one seed into ``run_dir``."""
    command = [sys.executable, "-m", "slamorl_jax.train", f"--seed={seed}", f"--run_dir={run_dir}"]
    return [*command, "--progress=false", "--eval_episodes=0", *flags]


def run_train(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
    """``command`` run in this command's folder (relative paths in its flags mean what the user
    meant) with the repository on its import path."""
    path = os.pathsep.join(filter(None, (str(REPO_ROOT), os.environ.get("PYTHONPATH"))))
    return run_child(command, env={**os.environ, "PYTHONPATH": path}, **kwargs)


def check_train_flags(seed: int, run_dir: Path, flags: list[str]) -> None:
    """One line naming ``--train-flags`` and exit 2 when the training CLI refuses them, before any
    seed trains (``train --only_check_args`` checks the flags as a run does and writes nothing); a
    check that fails otherwise (a crash, a kill) passes on what it said, and exits 1."""
    done = run_train(
        [*train_command(seed, run_dir, flags), "--only_check_args"], capture_output=True, text=True
    )
    if done.returncode == 0:
        return
    refusal = [line for line in done.stderr.splitlines() if "slamorl_jax.train: error: " in line]
    if done.returncode == 2 and refusal:  # bad input, in the CLI's one line
        fail(f"--train-flags: {refusal[-1].split(' error: ', 1)[1]}", PROG)
    sys.stderr.write(done.stderr)
    print(
        f"{PROG}: error: the training CLI's check of the flags failed (exit {done.returncode})",
        file=sys.stderr,
    )
    raise SystemExit(1)


def train(seed: int, run_dir: Path, flags: list[str]) -> float:
    """Run the training CLI for one seed into ``run_dir``; its wall time in seconds. A failed run
    ends this command with the child's status (2 for bad input, whose one-line error the child
    printed) and one line naming the seed."""
    started = time.perf_counter()
    done = run_train(train_command(seed, run_dir, flags))
    if done.returncode != 0:
        print(
            f"{PROG}: error: training seed {seed} into {run_dir} failed (exit {done.returncode})",
            file=sys.stderr,
        )
        raise SystemExit(2 if done.returncode == 2 else 1)
    return time.perf_counter() - started


def figures_of(payload: dict) -> dict[str, float]:
    """The bar's figures of one evaluated run (see the module docstring)."""
    from slamorl_jax.evaluation.methods import FORECAST_START
    from slamorl_jax.quality_bar import objective

    out: dict[str, float] = {}
    for scenario, rows in payload["summaries"].items():
        ours = objective(scenario, rows["policy"])
        out[f"{scenario}/objective"] = ours
        out[f"{scenario}/over_request"] = ours / objective(scenario, rows[REQUEST])
        out[f"{scenario}/over_oracle"] = ours / objective(scenario, rows[ORACLE])
        out[f"{scenario}/over_anchor"] = ours / objective(scenario, rows[REACHABLE])
        out[f"{scenario}/all_slas_met"] = rows["policy"]["all_slas_met"]
        out[f"{scenario}/all_slas_met_oracle"] = rows[ORACLE]["all_slas_met"]
        out[f"{scenario}/all_slas_met_anchor"] = rows[REACHABLE]["all_slas_met"]
        out[f"{scenario}/reallocations"] = rows["policy"]["reallocations"]
        out[f"{scenario}/relocations"] = rows["policy"]["relocations"]
    for scenario, row in payload.get("replanning", {}).items():
        out[f"{scenario}/over_replanning"] = row["policy_over_replanning"]
        out[f"{scenario}/all_slas_met_replanning"] = row["replanning_oracle_all_slas_met"]
    for gap in (payload["oracle_gap"], payload["reachable_gap"]):
        for figure, averages in gap.items():
            out[f"job_mean/{figure}"] = averages["job_average"]
    for scenario, rows in payload["summaries"].items():
        if FORECAST_START in rows:
            start = rows[FORECAST_START]
            out[f"{scenario}/forecast_start/over_oracle"] = objective(scenario, start) / objective(
                scenario, rows[ORACLE]
            )
            out[f"{scenario}/forecast_start/all_slas_met"] = start["all_slas_met"]
    for figure, averages in payload.get("forecast_start_oracle_gap", {}).items():
        out[f"job_mean/forecast_start/{figure}"] = averages["job_average"]
    return out


def workload_figures_of(payload: dict) -> dict[str, dict[str, dict[str, float]]]:
    """Per scenario and workload of one evaluated run (``per_workload_objective``): the policy's
    objective over the request's and the oracle's, over its own with relocate masked (below 1:
    relocating pays there) and, from the forecast's start, over the oracle's."""
    from slamorl_jax.evaluation.methods import FORECAST_START, NO_RELOCATE

    out: dict[str, dict[str, dict[str, float]]] = {}
    for scenario, rows in payload["per_workload_objective"].items():
        out[scenario] = {}
        for workload, row in rows.items():
            ours = row["policy"]
            figures = {"over_request": ours / row[REQUEST], "over_oracle": ours / row[ORACLE]}
            if NO_RELOCATE in row:
                figures["over_without_relocate"] = ours / row[NO_RELOCATE]
            if FORECAST_START in row:
                figures["forecast_start/over_oracle"] = row[FORECAST_START] / row[ORACLE]
            out[scenario][workload] = figures
    return out


def workload_spreads(per_run: list[dict[str, dict[str, dict[str, float]]]]) -> dict:
    """:func:`spread` over runs of each per-workload figure every run has."""
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for scenario, rows in per_run[0].items():
        out[scenario] = {}
        for workload, figures in rows.items():
            out[scenario][workload] = {
                figure: spread([run[scenario][workload][figure] for run in per_run])
                for figure in figures
                if all(figure in run.get(scenario, {}).get(workload, {}) for run in per_run)
            }
    return out


def workload_markdown(per_workload: dict) -> list[str]:
    """One table per scenario: a row per workload, each figure as mean +- std over seeds."""
    lines: list[str] = []
    for scenario, rows in per_workload.items():
        figures = list(dict.fromkeys(figure for row in rows.values() for figure in row))
        lines += ["", f"## {scenario} by workload (policy objective over each, mean ± std over seeds)", ""]
        lines += ["| workload | " + " | ".join(figures) + " |", "|---|" + "---|" * len(figures)]
        for workload, row in rows.items():
            cells = [f"{row[f]['mean']:.3f} ± {row[f]['std']:.3f}" if f in row else "-" for f in figures]
            lines.append(f"| {workload} | " + " | ".join(cells) + " |")
    return lines


def spread(values: list[float]) -> dict[str, float]:
    """Mean, sample standard deviation, min and max."""
    array = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(array.mean()),
        "std": float(array.std(ddof=1)) if array.size > 1 else 0.0,
        "min": float(array.min()),
        "max": float(array.max()),
    }


def to_markdown(payload: dict) -> str:
    """The table of every figure: mean +- std [min, max] over seeds."""
    lines = [
        f"Training seeds: {', '.join(str(s) for s in payload['seeds'])}; runs: "
        f"{', '.join(payload['runs'])}; {payload['episodes']} jobs x {payload['eval_seeds']} evaluation "
        "seed(s) per scenario"
        + (
            f"; every decision held below probability {payload['hold_below']:g}"
            if payload.get("hold_below")
            else ""
        )
        + (
            f"; every run with the relocation payback rule at {payload['relocate_payback']:g} pauses."
            if payload.get("relocate_payback") is not None
            else "."
        ),
        "",
        "| figure | mean | std | min | max | per seed |",
        "|---|---|---|---|---|---|",
    ]
    for name, stats in payload["figures"].items():
        per_seed = ", ".join(f"{v:.3f}" for v in payload["per_seed"][name])
        lines.append(
            f"| {name} | {stats['mean']:.3f} | {stats['std']:.3f} | {stats['min']:.3f} | "
            f"{stats['max']:.3f} | {per_seed} |"
        )
    lines += workload_markdown(payload.get("per_workload", {}))
    lines += ["", f"Machine: {payload['machine']}"]
    return "\n".join(lines) + "\n"


def seed_list(text: str) -> list[int]:
    """``argparse`` type: comma-separated distinct training seeds in [0, 2**31)."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not all(0 <= seed <= INT32_MAX for seed in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected distinct seeds in [0, 2**31), got {text!r}")
    return seeds


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument(
        "--seeds",
        type=seed_list,
        default="0,1,2",
        help="training seeds to train, or those of --runs (default: %(default)s)",
    )
    parser.add_argument("--runs", default=None, help="existing run directories (one per seed) instead")
    parser.add_argument(
        "--run-root",
        default=None,
        help=f"parent of the trained runs' directories (default: {DEFAULT_RUN_ROOT})",
    )
    parser.add_argument("--train-flags", default="", help="extra flags for slamorl_jax.train")
    parser.add_argument(
        "--episodes",
        type=bounded(int, 1, 1 << 20),
        default=2048,
        help="jobs per scenario and evaluation seed",
    )
    parser.add_argument(
        "--eval-seeds", type=bounded(int, 1, 1000), default=1, help="evaluation seeds per scenario"
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(EVALUATION_SCENARIOS),
        help="comma-separated scenarios to evaluate (default: every named one but mixed)",
    )
    add_hold_below_argument(parser, "--hold-below", "the allocation")
    add_relocate_payback_argument(parser, "--relocate-payback", "evaluate every run")
    add_out_flags(parser, None)
    args = parser.parse_args(argv)
    try:
        args.train_flags = shlex.split(args.train_flags)
    except ValueError as error:  # an unclosed quote
        fail(f"--train-flags: {error}", PROG)
    if args.runs is not None and (args.train_flags or args.run_root is not None):
        fail("--runs evaluates runs already trained: leave out --train-flags and --run-root", PROG)
    taken = sorted({flag_name(token) for token in args.train_flags} & SET_BY_THIS_COMMAND)
    if taken:
        named = ", ".join(f"--{name}" for name in taken)
        fail(f"--train-flags: {named} is set by this command for each seed (--seeds, --run-root)", PROG)
    args.run_root = Path(args.run_root or DEFAULT_RUN_ROOT)
    args.scenarios = tuple(name.strip() for name in args.scenarios.split(","))
    unknown = [name for name in args.scenarios if name not in ALL_SCENARIOS]
    if unknown:
        fail(
            f"--scenarios: unknown {', '.join(unknown)}; choose from {', '.join(ALL_SCENARIOS)}", parser.prog
        )
    check_report_flags(args, parser.prog)
    return args


def main(argv: list[str] | None = None) -> None:
    """Train or take the runs, evaluate each, write the spread."""
    args = parse_args(argv)
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.evaluation.suite import SuiteConfig, run_suite
    from slamorl_jax.policy_checkpoint import load_policy

    seeds = args.seeds
    wall: list[float] = []
    if args.runs is not None:
        runs = [Path(r) for r in args.runs.split(",")]
        if not all(r.strip() for r in args.runs.split(",")):
            fail(f"--runs {args.runs!r} names an empty run (an unset variable?); leave it out to train", PROG)
        if len(runs) != len(seeds):
            fail(f"--runs names {len(runs)} runs but --seeds {len(seeds)} seeds", PROG)
        # every run checked before the first is evaluated: finished, of one command but the seed
        for run, given in zip(checked_runs({"": runs}, PROG)[""], seeds, strict=True):
            if run.config.seed != given:
                trained = f"--seed={run.config.seed}"
                fail(f"--runs: {run.path} was trained with {trained}, --seeds says {given}", PROG)
    else:
        runs = [args.run_root / f"seed{seed}" for seed in seeds]
        for run in runs:  # every one before the first seed trains
            problem = new_folder_problem(run)
            if problem is not None:
                fail(f"--run-root: {run} {problem}; choose another --run-root", PROG)
        check_train_flags(seeds[0], runs[0], args.train_flags)
        for seed, run in zip(seeds, runs, strict=True):
            print(f"training seed {seed} into {run}", flush=True)
            wall.append(train(seed, run, args.train_flags))
    config = SuiteConfig(
        scenarios=args.scenarios, episodes=args.episodes, seeds=args.eval_seeds, front_points=0
    )
    per_run = []
    per_run_workloads = []
    for run in runs:
        print(f"evaluating {run}", flush=True)
        try:
            policy = load_policy(run / "checkpoints").deciding(args.hold_below, args.relocate_payback)
        except CheckpointError as error:  # its arrays damaged (the meta was checked above)
            fail(str(error), PROG)
        except ValueError as error:  # a payback rule for a policy that cannot relocate
            fail(f"--relocate-payback: {run}: {error}", PROG)
        payload, _ = run_suite(policy, config)
        per_run.append(figures_of(payload))
        per_run_workloads.append(workload_figures_of(payload))
    names = list(per_run[0])
    payload = {
        "seeds": seeds,  # with --runs: the seeds those runs were trained with (checked)
        "runs": [str(r) for r in runs],
        "train_flags": shlex.join(args.train_flags),
        "train_wall_s": wall,
        "episodes": args.episodes,
        "eval_seeds": args.eval_seeds,
        "hold_below": args.hold_below,
        "relocate_payback": args.relocate_payback,
        "scenarios": list(args.scenarios),
        "per_seed": {name: [run[name] for run in per_run] for name in names},
        "figures": {name: spread([run[name] for run in per_run]) for name in names},
        "per_workload": workload_spreads(per_run_workloads),
        "machine": machine_info(),
    }
    publish_report(args, payload, to_markdown(payload), PROG)


if __name__ == "__main__":
    run_command(main, PROG)
