"""The adaptive-weights ablation: static vs severity vs dual weights, each over its training seeds.

    python -m benchmarks.weights_ablation \\
        --runs static=runs/ablation/static-seed0,runs/ablation/static-seed1,runs/ablation/static-seed2 \\
        --runs severity=... --runs dual=... [--scenarios conflict,shifting] [--episodes 1024] \\
        [--out benchmarks/results/weights_ablation.json] [--overwrite]

Each ``--runs`` names one weights form and its runs (one per training seed, the same command and
budget but ``--weights``). Every run's final policy runs greedily from the request, fed the weights
of the form it was trained with, on the same fresh jobs of each scenario (common random numbers),
next to the best static allocation in hindsight. Per scenario and form: all six SLAs met and the
scenario's objective over the oracle's, as mean ± sample standard deviation [min, max] over seeds,
and each adaptive form's difference from static in points of all SLAs met, with its standard
error and whether the seed ranges overlap (issue 8 asks for >= 5 points and no overlap on ``conflict``).
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

from benchmarks.common import (
    RESULTS_DIR,
    add_job_flags,
    add_out_flags,
    check_report_flags,
    machine_info,
    report,
)
from benchmarks.run_sets import SEED_ONLY, Run, checked_runs
from benchmarks.training_seeds import spread
from slamorl_jax.cli_args import OneLineArgumentParser, fail, run_command, summary
from slamorl_jax.env.scenarios import SCENARIOS
from slamorl_jax.markdown import markdown_table

BASELINE = "static"
PROG = "python -m benchmarks.weights_ablation"
#: What the forms may differ in besides the seed: the weights and their settings.
WEIGHT_SETTINGS = ("weights", "adapt_strength", "dual_step", "dual_decay")


def parse_runs(specs: list[str]) -> dict[str, list[Run]]:
    """``form=run,run,...`` pairs to their runs, checked to be finished and of one command but the
    seed within a form and the weights settings across forms (``run_sets.checked_runs``; exit 2 on a
    bad pair or run)."""
    forms: dict[str, list[Path]] = {}
    for spec in specs:
        name, sep, paths = spec.partition("=")
        if not sep or not name or not paths:
            fail(f"--runs takes form=run[,run...], got {spec!r}", PROG)
        if name in forms:
            fail(f"--runs names the form {name!r} twice", PROG)
        runs = [Path(p) for p in paths.split(",")]
        missing = [str(r) for r in runs if not (r / "checkpoints").is_dir()]
        if missing:
            fail(f"--runs {name}: no checkpoints under {', '.join(missing)}", PROG)
        forms[name] = runs
    if BASELINE not in forms:
        fail(f"--runs needs a {BASELINE!r} form to compare with", PROG)
    return checked_runs(forms, PROG, WEIGHT_SETTINGS)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate every run on every scenario; the oracle once per scenario."""
    from slamorl_jax.agent.trainer import env_params_from_config
    from slamorl_jax.env.action_sets import WIDEST_ACTION_SET
    from slamorl_jax.env.job_env import JobAllocationEnv
    from slamorl_jax.env.scenarios import with_preference, with_scenario
    from slamorl_jax.episodes import summarise_episodes
    from slamorl_jax.evaluation.baselines import BestStatic
    from slamorl_jax.evaluation.methods import ORACLE, Method, compared_method, run_method
    from slamorl_jax.policy_checkpoint import load_policy
    from slamorl_jax.quality_bar import greedy_policy, objective

    policies = {name: [load_policy(r.path / "checkpoints") for r in runs] for name, runs in args.runs.items()}
    first = next(iter(policies.values()))[0]  # every form's env is this one (parse_runs)
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=first.catalog)
    base = with_preference(env_params_from_config(first.config, env.catalog), None)
    oracle = Method(ORACLE, "oracle", start=BestStatic.for_params(base))
    keys = [jax.random.key(args.seed)]
    per_seed: dict[str, dict[str, dict[str, list[float]]]] = {}
    oracle_rows: dict[str, dict[str, float]] = {}
    for scenario in args.scenarios:
        params = with_scenario(base, scenario)
        theirs = summarise_episodes(run_method(env, params, oracle, keys, args.episodes))
        oracle_rows[scenario] = {
            "all_slas_met": theirs["all_slas_met"],
            "objective": objective(scenario, theirs),
        }
        per_seed[scenario] = {}
        for name, loaded in policies.items():
            met, over = [], []
            for policy in loaded:
                method = compared_method(
                    name,
                    greedy_policy(policy.network),
                    policy.params,
                    policy.config,
                )
                mine = summarise_episodes(run_method(env, params, method, keys, args.episodes))
                met.append(mine["all_slas_met"])
                over.append(objective(scenario, mine) / oracle_rows[scenario]["objective"])
            per_seed[scenario][name] = {"all_slas_met": met, "over_oracle": over}
    return {
        "runs": {name: [str(r.path) for r in runs] for name, runs in args.runs.items()},
        # each run's update and what its form's runs may differ in; the rest is the first run's config
        "run_settings": {
            name: [r.as_dict((*SEED_ONLY, *WEIGHT_SETTINGS)) for r in runs]
            for name, runs in args.runs.items()
        },
        "config": dataclasses.asdict(first.config),
        "episodes": args.episodes,
        "seed": args.seed,
        "oracle": oracle_rows,
        "per_seed": per_seed,
        "figures": {
            scenario: {
                name: {figure: spread(values) for figure, values in row.items()} for name, row in rows.items()
            }
            for scenario, rows in per_seed.items()
        },
        "machine": machine_info(),
    }


def _stats(s: dict[str, float], scale: float = 1.0, digits: int = 1) -> str:
    return (
        f"{scale * s['mean']:.{digits}f} ± {scale * s['std']:.{digits}f} "
        f"[{scale * s['min']:.{digits}f}, {scale * s['max']:.{digits}f}]"
    )


def gain_over(met: dict[str, float], runs: int, base: dict[str, float], base_runs: int) -> str:
    """A form's gain over static in points of all SLAs met: the difference of the seed means ± its
    standard error (Welch: ``sqrt(s1^2 / n1 + s2^2 / n2)``, the seeds' sample deviations) and whether
    the seed ranges overlap."""
    error = (met["std"] ** 2 / runs + base["std"] ** 2 / base_runs) ** 0.5
    overlap = met["min"] <= base["max"] and base["min"] <= met["max"]
    return (
        f"{100 * (met['mean'] - base['mean']):+.1f} ± {100 * error:.1f} "
        f"({'overlap' if overlap else 'no overlap'})"
    )


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per scenario and form; the gain over static in points ± its standard error, with
    range overlap."""
    table = []
    runs = {name: len(paths) for name, paths in payload["runs"].items()}
    for scenario, rows in payload["figures"].items():
        base = rows[BASELINE]["all_slas_met"]
        for name, row in rows.items():
            met = row["all_slas_met"]
            gain = "-" if name == BASELINE else gain_over(met, runs[name], base, runs[BASELINE])
            table.append(
                [
                    scenario,
                    name,
                    _stats(met, 100.0),
                    f"{100 * payload['oracle'][scenario]['all_slas_met']:.1f}",
                    _stats(row["over_oracle"], digits=3),
                    gain,
                ]
            )
    headers = ["scenario", "weights", "all SLAs met % (seeds)", "oracle %", "objective / oracle", "vs static"]
    return (
        f"Runs per form: {runs}; {payload['episodes']} jobs per scenario (seed {payload['seed']}); "
        "mean ± std [min, max] over training seeds; vs static: the difference of the means in points ± "
        "its standard error.\n\n" + markdown_table(headers, table)
    )


def main(argv: list[str] | None = None) -> None:
    """Parse the options, evaluate, print and write the report."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--runs", action="append", required=True, help="form=run[,run...] (repeat)")
    parser.add_argument("--scenarios", default="conflict,shifting", help="comma-separated scenarios")
    add_job_flags(parser, episodes=1024, most=1 << 16)
    add_out_flags(parser, RESULTS_DIR / "weights_ablation.json")
    args = parser.parse_args(argv)
    check_report_flags(args, PROG)
    args.scenarios = tuple(s.strip() for s in args.scenarios.split(","))
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        fail(f"--scenarios: unknown {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}", PROG)
    args.runs = parse_runs(args.runs)
    report(args, run, to_markdown, PROG)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.weights_ablation")
