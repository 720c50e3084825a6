"""Workloads a policy never trained on: how policies trained without them do on their jobs.

    python -m benchmarks.held_out_workloads --write-catalog=runs/held_out/catalog.json \\
        --without=voc-yolov3,multi30k-transformer,pong-a3c
    for s in 0 1 2; do python -m slamorl_jax.train --catalog=runs/held_out/catalog.json --seed=$s \\
        --run_dir=runs/held_out/seed$s; done
    python -m benchmarks.held_out_workloads --without=voc-yolov3,multi30k-transformer,pong-a3c \\
        --runs=runs/held_out/seed0,runs/held_out/seed1,runs/held_out/seed2 [--with=checkpoints/default] \\
        [--scenarios=deadline-critical,budget-constrained] [--episodes=2048] [--out=...] [--overwrite]

``--write-catalog`` writes the shipped catalogue without the ``--without`` workloads (each other row
as it is; jobs then draw the remaining workloads uniformly) for ``train --catalog``. The second form
runs every ``--runs`` policy (trained on that catalogue, one per training seed, the same command
but the seed) and the ``--with`` policy (trained with every workload) greedily from the request on
the same fresh jobs of the shipped catalogue, beside the best static allocation in hindsight (the
oracle). Per scenario and group of jobs (the held-out workloads', the others'): each policy's
objective over the oracle's job by job (time per deadline-critical job, cost per budget-constrained
one, as ``evaluate``'s headline), averaged over the jobs both ran to the end, and its share of jobs
meeting all six SLAs, as mean ± sample standard deviation [min, max] over training seeds; and the
difference in differences: how much more the runs trained without the workloads fall behind on
their jobs than on the others', beyond the same gap of the policies trained with them.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse

import jax
import numpy as np

from benchmarks.common import (
    RESULTS_DIR,
    add_job_flags,
    add_out_flags,
    check_report_flags,
    machine_info,
    report,
)
from benchmarks.run_sets import SEED_ONLY, checked_runs
from benchmarks.training_seeds import spread
from slamorl_jax.cli_args import OneLineArgumentParser, fail, file_path, run_command, summary
from slamorl_jax.env.catalog import CATALOG_PATH, is_shipped, load_catalog
from slamorl_jax.env.scenarios import SCENARIO_KINDS
from slamorl_jax.markdown import markdown_table
from slamorl_jax.shipped_policy import SHIPPED_POLICY, resolve_checkpoint

PROG = "python -m benchmarks.held_out_workloads"
GROUPS = ("held_out", "seen")  # the jobs of the held-out workloads, of the others
WORDS = {"held_out": "held-out", "seen": "other"}
# Each gap (a group's figure on the held-out workloads' jobs minus on the others') and its figure;
# how the report writes it: its name, scale and digits.
GAPS = {"gap": "over_oracle", "sla_gap": "all_slas_met"}
GAP_WORDS = {"gap": ("objective / oracle", 1.0, 3), "sla_gap": ("all SLAs met, points", 100.0, 1)}


def without_workloads(raw: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The decoded catalogue ``raw`` without the workloads ``names`` (``ValueError`` for a name it
    lacks, or for leaving none)."""
    known = [w["name"] for w in raw["workloads"]]
    if unknown := [n for n in names if n not in known]:
        raise ValueError(f"--without: unknown workload {unknown[0]!r}; choose from {', '.join(known)}")
    kept = [w for w in raw["workloads"] if w["name"] not in names]
    if not kept:
        raise ValueError("--without leaves no workload to train on")
    return {**raw, "workloads": kept, "generated_by": f"{PROG} --without={','.join(names)}"}


def write_catalog(path: Path, held_out: dict[str, Any], names: tuple[str, ...], overwrite: bool) -> None:
    """Write ``held_out``, the shipped catalogue without ``names``, to ``path`` (exit 2 on a bad path)."""
    if path.exists() and not overwrite:
        fail(f"--write-catalog {str(path)!r} exists; pass --overwrite to replace it", PROG)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(held_out, indent=1) + "\n")
    except OSError as err:
        fail(f"cannot write --write-catalog {str(path)!r}: {err.strerror or err}", PROG)
    print(f"wrote {path}: {len(held_out['workloads'])} workloads, without {', '.join(names)}")


def check_policies(args: argparse.Namespace, held_out: list, with_all: list) -> None:
    """Exit 2 naming the run unless every ``--runs`` policy trained on exactly the shipped catalogue
    without ``--without`` (rows as shipped), from a fresh start (``--init_from`` a policy that saw
    them would leak them), and every ``--with`` policy on the shipped catalogue with the runs'
    command but the seed."""
    from benchmarks.run_sets import differences

    expected = args.training_catalog["workloads"]
    for path, policy in zip(args.runs, held_out, strict=True):
        if policy.catalog.raw.get("workloads") != expected:
            fail(f"--runs {path.path}: not trained on the shipped catalogue without exactly --without", PROG)
        if policy.config.init_from is not None:
            fail(
                f"--runs {path.path}: started from {policy.config.init_from}, which may have seen them", PROG
            )
    for path, policy in zip(args.with_all, with_all, strict=True):
        if not is_shipped(policy.catalog):
            fail(f"--with {path}: not trained on the shipped catalogue", PROG)
        if differing := differences(policy.config, held_out[0].config, (*SEED_ONLY, "catalog", "init_from")):
            fail(f"--with {path}: another command than --runs ({differing[0]})", PROG)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every policy on the same jobs of every scenario; the oracle once per scenario."""
    from slamorl_jax.agent.trainer import env_params_from_config
    from slamorl_jax.env.action_sets import WIDEST_ACTION_SET
    from slamorl_jax.env.job_env import JobAllocationEnv
    from slamorl_jax.env.scenarios import with_preference, with_scenario
    from slamorl_jax.episodes import summarise_episodes
    from slamorl_jax.evaluation.baselines import BestStatic
    from slamorl_jax.evaluation.methods import ORACLE, Method, compared_method, run_method
    from slamorl_jax.policy_checkpoint import load_policy
    from slamorl_jax.quality_bar import greedy_policy

    shipped = load_catalog()
    held_out = [load_policy(r.path / "checkpoints") for r in args.runs]
    with_all = [load_policy(path) for path in args.with_all]
    check_policies(args, held_out, with_all)
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=shipped)
    # The jobs of the shipped catalogue, in the world the runs trained in but for its workloads.
    base = with_preference(env_params_from_config(held_out[0].config, shipped), None)
    oracle = Method(ORACLE, "oracle", start=BestStatic.for_params(base))
    keys = [jax.random.key(args.seed)]
    indices = [shipped.workload_names.index(name) for name in args.without]
    policies = {"held_out_runs": held_out, "with_every_workload": with_all}
    per_seed: dict[str, dict[str, dict[str, list[float]]]] = {}
    jobs: dict[str, dict[str, int]] = {}
    for scenario in args.scenarios:
        params = with_scenario(base, scenario)
        theirs = run_method(env, params, oracle, keys, args.episodes)
        held = np.isin(theirs["workload"], indices)
        groups = dict(zip(GROUPS, (held, ~held), strict=True))
        jobs[scenario] = {group: int(mask.sum()) for group, mask in groups.items()}
        per_seed[scenario] = {}
        for name, loaded in policies.items():
            values: dict[str, list[float]] = {}
            for policy in loaded:
                method = compared_method(name, greedy_policy(policy.network), policy.params, policy.config)
                mine = run_method(env, params, method, keys, args.episodes)
                # The same jobs on both sides: those both ran to the end (a job cut short by the step
                # limit would leave one side's mean only).
                both = mine["finished"].astype(bool) & theirs["finished"].astype(bool)
                for group, mask in groups.items():
                    if not np.any(mask & both):
                        fail(f"no {WORDS[group]} job finished under {scenario}: raise --episodes", PROG)
                    ours_, oracle_ = (
                        summarise_episodes({k: v[mask & both] for k, v in figures.items()})
                        for figures in (mine, theirs)
                    )
                    ratio = per_job_over_oracle(scenario, mine, theirs, mask & both)
                    values.setdefault(f"{group}_over_oracle", []).append(ratio)
                    values.setdefault(f"{group}_all_slas_met", []).append(ours_["all_slas_met"])
                    values.setdefault(f"{group}_oracle_all_slas_met", []).append(oracle_["all_slas_met"])
                for gap, figure in GAPS.items():
                    difference = values[f"held_out_{figure}"][-1] - values[f"seen_{figure}"][-1]
                    values.setdefault(gap, []).append(difference)
            per_seed[scenario][name] = values
    figures = {
        scenario: {name: {k: spread(v) for k, v in values.items()} for name, values in by_name.items()}
        for scenario, by_name in per_seed.items()
    }
    return {
        "without": list(args.without),
        "runs": [str(r.path) for r in args.runs],
        "run_settings": [r.as_dict(SEED_ONLY) for r in args.runs],
        "with": [str(path) for path in args.with_all],
        "config": dataclasses.asdict(held_out[0].config),
        "episodes": args.episodes,
        "seed": args.seed,
        "jobs": jobs,
        "per_seed": per_seed,
        "figures": figures,
        "gap_difference": {
            scenario: {
                gap: gap_difference(by_name["held_out_runs"][gap], by_name["with_every_workload"][gap])
                for gap in GAPS
            }
            for scenario, by_name in per_seed.items()
        },
        "machine": machine_info(),
    }


#: Each scenario kind's objective as per-job figures: time, cost, or the mean of their ratios.
OBJECTIVE_FIGURES = {
    "deadline-critical": ("episode_time_s",),
    "budget-constrained": ("episode_cost_usd",),
    "balanced": ("episode_time_s", "episode_cost_usd"),
}


def per_job_over_oracle(scenario: str, mine: dict, theirs: dict, mask: np.ndarray) -> float:
    """The policy's objective over the oracle's job by job, averaged over the jobs of ``mask`` (as
    evaluate's headline gap: time per deadline-critical job, cost per budget-constrained one; the
    mean of both ratios for balanced)."""
    ratios = [
        np.asarray(mine[figure], np.float64)[mask] / np.asarray(theirs[figure], np.float64)[mask]
        for figure in OBJECTIVE_FIGURES[scenario]
    ]
    return float(np.mean(np.mean(ratios, axis=0)))


def gap_difference(held_out: list[float], with_all: list[float]) -> dict[str, float]:
    """How much more the held-out runs fall behind the oracle on the held-out workloads' jobs than on
    the others', beyond what the policies trained with every workload do (a difference in
    differences, in units of the objective over the oracle's): the difference of the mean gaps and
    its standard error (Welch; a side with one run adds no variance of its own, and with one run
    each there is none: 0, shown as n/a)."""
    a, b = np.asarray(held_out, np.float64), np.asarray(with_all, np.float64)
    variance = sum(x.var(ddof=1) / x.size for x in (a, b) if x.size > 1)
    return {"difference": float(a.mean() - b.mean()), "standard_error": float(np.sqrt(variance))}


def _stats(s: dict[str, float], scale: float = 1.0, digits: int = 3) -> str:
    if s["min"] == s["max"]:
        return f"{scale * s['mean']:.{digits}f}"
    return (
        f"{scale * s['mean']:.{digits}f} ± {scale * s['std']:.{digits}f} "
        f"[{scale * s['min']:.{digits}f}, {scale * s['max']:.{digits}f}]"
    )


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per scenario, group of jobs and policy; then each scenario's difference in gaps."""
    names = {"held_out_runs": "trained without them", "with_every_workload": "trained with every workload"}
    table = []
    for scenario, by_name in payload["figures"].items():
        for group in GROUPS:
            for name, row in by_name.items():
                table.append(
                    [
                        scenario,
                        f"{WORDS[group]} workloads ({payload['jobs'][scenario][group]} jobs)",
                        names[name],
                        _stats(row[f"{group}_over_oracle"]),
                        _stats(row[f"{group}_all_slas_met"], 100.0, 1),
                        _stats(row[f"{group}_oracle_all_slas_met"], 100.0, 1),
                    ]
                )
    headers = ["scenario", "jobs of", "policy", "objective / oracle", "all SLAs met %", "oracle %"]
    gaps = []
    for scenario, by_name in payload["figures"].items():
        for gap, (what, scale, digits) in GAP_WORDS.items():
            d = payload["gap_difference"][scenario][gap]
            gaps.append(
                [
                    scenario,
                    what,
                    _stats(by_name["held_out_runs"][gap], scale, digits),
                    _stats(by_name["with_every_workload"][gap], scale, digits),
                    f"{scale * d['difference']:+.{digits}f} ± "
                    + (f"{scale * d['standard_error']:.{digits}f}" if d["standard_error"] > 0 else "n/a"),
                ]
            )
    gap_headers = [
        "scenario",
        "of",
        "gap, trained without them",
        "gap, trained with every workload",
        "difference",
    ]
    with_all = ", ".join(f"`{path}`" for path in payload["with"])
    return (
        f"Held out: {', '.join(payload['without'])}; {len(payload['runs'])} runs trained without them and "
        f"{len(payload['with'])} trained with every workload ({with_all}), "
        "the same command but the seed and the catalogue; mean ± std [min, max] over training seeds; "
        f"{payload['episodes']} jobs of the shipped catalogue per scenario (seed {payload['seed']}), each "
        "policy greedy from the request, its objective over the hindsight oracle's job by job, on the jobs "
        "both ran to the end.\n\n"
        + markdown_table(headers, table)
        + "\n\nGap: a figure on the held-out workloads' jobs minus on the others', per policy; difference: "
        "the mean gaps' difference ± its standard error (what holding the workloads out costs on their "
        "jobs, beyond how hard they are).\n\n" + markdown_table(gap_headers, gaps)
    )


def main(argv: list[str] | None = None) -> None:
    """Write the held-out catalogue, or evaluate the runs trained on it."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--without", required=True, help="comma-separated workloads to hold out")
    parser.add_argument(
        "--write-catalog", type=file_path, default=None, help="write the catalogue without them here"
    )
    parser.add_argument("--runs", default=None, help="comma-separated runs trained on that catalogue")
    parser.add_argument(
        "--with",
        dest="with_all",
        default=SHIPPED_POLICY,
        help="comma-separated policies trained with every workload, the same command but the seed",
    )
    parser.add_argument(
        "--scenarios", default="deadline-critical,budget-constrained", help="comma-separated scenario kinds"
    )
    add_job_flags(parser, episodes=2048, most=1 << 16)
    add_out_flags(parser, RESULTS_DIR / "held_out_workloads.json")
    args = parser.parse_args(argv)
    args.without = tuple(name.strip() for name in args.without.split(",") if name.strip())
    if not args.without:
        fail("--without names no workload", PROG)
    try:  # the catalogue the runs train on (a name it lacks, or none left: one line)
        args.training_catalog = without_workloads(json.loads(CATALOG_PATH.read_text()), args.without)
    except ValueError as err:
        fail(str(err), PROG)
    if args.write_catalog is not None:
        if args.runs is not None:
            fail("--write-catalog writes the catalogue to train on; evaluate the runs in a second call", PROG)
        write_catalog(args.write_catalog, args.training_catalog, args.without, args.overwrite)
        return
    if args.runs is None:
        fail("give --write-catalog (before training) or --runs (after)", PROG)
    check_report_flags(args, PROG)
    args.scenarios = tuple(s.strip() for s in args.scenarios.split(","))
    if unknown := [s for s in args.scenarios if s not in SCENARIO_KINDS]:
        fail(f"--scenarios: unknown {', '.join(unknown)}; choose from {', '.join(SCENARIO_KINDS)}", PROG)
    try:
        args.with_all = [resolve_checkpoint("--with", path) for path in args.with_all.split(",")]
    except ValueError as err:
        fail(str(err), PROG)
    runs = [Path(p) for p in args.runs.split(",") if p]
    if missing := [str(r) for r in runs if not (r / "checkpoints").is_dir()]:
        fail(f"--runs: no checkpoints under {', '.join(missing)}", PROG)
    args.runs = checked_runs({"": runs}, PROG)[""]
    report(args, run, to_markdown, PROG)


if __name__ == "__main__":
    run_command(main, PROG)
