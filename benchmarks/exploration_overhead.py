"""Exploration overhead: what jobs lose while a policy finds where they should run, cold vs warm.

    python -m benchmarks.exploration_overhead [--episodes 1024] [--seed 0] [--epochs 5]
        [--history_jobs 2048] [--history_source oracle] [--recorded longest] [--history_rounds 1]
        [--train_updates 30] [--train_envs 64] [--imitation_jobs 1024] [--training_only]
        [--checkpoint checkpoints/default] [--out benchmarks/results/exploration_overhead.json] [--overwrite]

**Per job** (issue 8): the exploration overhead of a start is, over a job's first
``N = --epochs`` epochs (5; all of a shorter job's), its regret against the best static allocation in
hindsight (``evaluation.baselines.BestStatic``, placed before the first epoch for free and kept) plus
the SLA severity it accrues beyond the oracle's:

    regret   = (w_time (T - T_oracle) / T_ref,N + w_cost (C - C_oracle) / C_ref,N) / (w_time + w_cost)
    severity = mean over the N epochs of the mean of the six SLA severities, minus the oracle's
    overhead = regret + severity, averaged over jobs

``T`` and ``C`` are the wall time and cost the job has spent after its N-th epoch: pauses included
and, for probe starts, the probes (time, cost and pauses) too; ``T_ref,N`` and ``C_ref,N`` the
request's true time and cost over the same epochs (the env's reward scale), and ``w`` the job's
preference. The same figures over each whole job are reported beside them (probes pay off, if at all,
over the epochs after the window). Every start runs the same fresh jobs with the same noise (common
random numbers; the episode runner truncates them at N decisions). The starts, each then run by the
shipped policy (greedy):

* ``cold``: 1 GPU and one CPU step (``init_strategy`` cold): the policy explores from nothing;
* ``request``: the user's request (what ``evaluate`` runs), for context;
* ``history``: the nearest record of a history store (``slamorl_jax.history``) built from
  ``--history_jobs`` *other* jobs of the same scenarios (another seed) and their oracle allocations
  (``--history_source oracle``), or the allocations the policy ran those jobs on when it ran them
  from the request (``--history_source policy``: what a platform would have logged), each job's
  longest stretch of epochs at one allocation (``--recorded longest``) or its last epoch's
  (``--recorded final``); with ``--history_rounds R``, built in R rounds, each after the first from
  other jobs started at the last round's store's nearest record (a platform whose recorded runs
  themselves started from its history);
* ``forecast``: the forecast's first choice on the profile alone (``ProbingEnv`` with a probe budget
  of 0: no probe runs);
* ``probes``: probe runs from the request when they are cheap against the job (``env/probes.py``,
  the default budget), then the forecast's choice after them;
* ``probes_always``: probe runs for every job, whatever they cost.

The cut of a warm start is ``1 - overhead(warm) / overhead(cold)`` per scenario and over all jobs.

**Over training**: ``--train_updates`` PPO updates of ``--train_envs`` jobs (the checkpoint's config
otherwise) from scratch, from the checkpoint (``train --init_from``) and from a policy pre-trained on
logged decisions (``slamorl_jax.imitate``): the oracle's, for the first 8 epochs of
``--imitation_jobs`` other simulated jobs (seed + 1), imitated with the default settings; same seed
and jobs for the three (``--training_only`` measures only these). The overhead is the number of
jobs finished during those updates that missed at least one of their six SLAs; the mean episode
return and the all-SLAs rate per update are reported beside it.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import math

import jax
import numpy as np

from benchmarks.common import (
    add_checkpoint_flag,
    add_job_flags,
    check_checkpoint,
    machine_info,
    parse_and_report,
)
from slamorl_jax.agent.imitation import ImitationConfig, fit
from slamorl_jax.agent.trainer import env_params_from_config, make_train, summarise
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, fail, run_command, summary
from slamorl_jax.env.action_sets import WIDEST_ACTION_SET
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams, with_values
from slamorl_jax.env.probes import PROBE_BUDGET
from slamorl_jax.env.probing_env import ProbingEnv
from slamorl_jax.env.scenarios import SCENARIOS, with_preference, with_scenario
from slamorl_jax.evaluation.baselines import BestStatic
from slamorl_jax.evaluation.methods import Method, run_method
from slamorl_jax.history import HistoryStart
from slamorl_jax.history.build import oracle_records, policy_records
from slamorl_jax.history.demonstrations import oracle_demonstrations
from slamorl_jax.history.names import RECORDED, RECORDED_WORDS, SOURCES
from slamorl_jax.learner_jit import jit_learner
from slamorl_jax.markdown import markdown_table
from slamorl_jax.policy_checkpoint import LoadedPolicy, load_policy
from slamorl_jax.quality_bar import greedy_policy
from slamorl_jax.warm_start import warm_start

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "exploration_overhead.json"
EARLY_EPOCHS = 5
WARM_STARTS = ("history", "forecast", "probes", "probes_always")
WHOLE_JOB = 1_000_000  # a horizon past every job's last epoch
HISTORY_SOURCE_WORDS = {
    "oracle": "their oracle allocations",
    **{name: f"each at the allocation the policy ran {words}" for name, words in RECORDED_WORDS.items()},
}
HISTORY_SEED_OFFSET = 1000  # the store's jobs are drawn from another seed than the evaluated ones


def early_params(params: EnvParams, epochs: int) -> EnvParams:
    """``params`` whose episodes are truncated after ``epochs`` decisions (= epochs)."""
    return with_values(params, max_steps_in_episode=epochs)


def overhead_per_job(
    figures: dict[str, np.ndarray], oracle: dict[str, np.ndarray], epochs: int
) -> dict[str, np.ndarray]:
    """Per job: regret, severity excess and their sum against the oracle (module docstring); NaN for
    a job either run did not end. A job cut at the window's ``epochs`` decisions ended its window
    (``truncated``): only counting ``finished`` ones, since the episode runner keeps the two apart,
    left just the jobs of ``epochs`` epochs or fewer in the early figures."""

    def ended(run: dict[str, np.ndarray]) -> np.ndarray:
        return run["finished"].astype(bool) | run["truncated"].astype(bool)

    done = ended(figures) & ended(oracle)
    run = np.minimum(figures["epochs"], epochs) / figures["epochs"]
    time_scale = figures["time_ref_s"] * run
    cost_scale = figures["cost_ref_usd"] * run
    w_time, w_cost = figures["preference"][:, 0], figures["preference"][:, 1]
    regret = (
        w_time * (figures["episode_time_s"] - oracle["episode_time_s"]) / time_scale
        + w_cost * (figures["episode_cost_usd"] - oracle["episode_cost_usd"]) / cost_scale
    ) / np.maximum(w_time + w_cost, 1e-9)
    severity = figures["mean_severity"] - oracle["mean_severity"]
    nan = np.where(done, 1.0, np.nan)
    return {"regret": regret * nan, "severity": severity * nan, "overhead": (regret + severity) * nan}


# A cold overhead below this (a hundredth of the request's objective) is within the spread of a
# scenario's objective between evaluation seeds (0.007-0.018 in docs/evaluation/evaluation.md), so
# a cut of it says nothing: conflict's whole-job 0.0003 made cuts of 1232 % and -12089 %.
MIN_COLD_OVERHEAD = 0.01


def cut(warm: float, cold: float) -> float:
    """``1 - warm / cold``: how much of the cold start's overhead a warm start saves; NaN (null in
    the report, n/a in its table) where the cold start has none to save (under
    :data:`MIN_COLD_OVERHEAD`, or undefined)."""
    return 1.0 - warm / cold if cold >= MIN_COLD_OVERHEAD else math.nan


def start_methods(policy: LoadedPolicy, history: HistoryStart) -> dict[str, tuple[Method, JobAllocationEnv]]:
    """Each start as an evaluation method (the shipped policy run greedily after it) and its env."""
    greedy = greedy_policy(policy.network)
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=policy.catalog)

    def probing(budget: float) -> JobAllocationEnv:
        return ProbingEnv(action_set=WIDEST_ACTION_SET, budget=budget, catalog=policy.catalog)

    return {
        "cold": (Method("cold", "1 GPU", greedy, True, init_strategy="cold"), env),
        "request": (Method("request", "the request", greedy, True), env),
        "history": (Method("history", "the history match", greedy, True, start=history), env),
        "forecast": (Method("forecast", "the profile forecast's pick", greedy, True), probing(0.0)),
        "probes": (Method("probes", "probes when cheap", greedy, True), probing(PROBE_BUDGET)),
        "probes_always": (Method("probes_always", "probes always", greedy, True), probing(math.inf)),
    }


def per_job_overheads(args: argparse.Namespace, policy: LoadedPolicy, base: EnvParams) -> dict[str, Any]:
    """Per horizon (the first N epochs; ``job``: all of them) and scenario, each start's mean overhead
    and its parts, and the cuts against cold."""
    scenarios = [name for name in SCENARIOS if name != "mixed"]
    store_key = jax.random.key(args.seed + HISTORY_SEED_OFFSET)
    env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=policy.catalog)
    greedy = greedy_policy(policy.network)
    records: list = []
    for round_ in range(args.history_rounds if args.history_source == "policy" else 1):
        # Round 2 on: other jobs, each started at the last round's store's nearest record.
        rule, records = (HistoryStart.from_records(records) if round_ else None), []
        for index, name in enumerate(scenarios):
            key, params = jax.random.fold_in(store_key, index), with_scenario(base, name)
            key = jax.random.fold_in(key, round_) if round_ else key
            jobs = args.history_jobs // len(scenarios)
            if args.history_source == "oracle":
                records += oracle_records(params, key, jobs)
            else:
                records += policy_records(
                    env, params, greedy, policy.params, key, jobs, None, args.recorded, start_rule=rule
                )
    methods = start_methods(policy, HistoryStart.from_records(records))
    keys = [jax.random.key(args.seed)]
    out: dict[str, Any] = {"history_records": len(records), "horizons": {}}
    for horizon, epochs in ((str(args.epochs), args.epochs), ("job", WHOLE_JOB)):
        rows: dict[str, Any] = {}
        everything: dict[str, list[np.ndarray]] = {start: [] for start in methods}
        for name in scenarios:
            params = early_params(with_scenario(base, name), epochs)
            oracle_method = Method("oracle", "best static in hindsight", start=BestStatic.for_params(params))
            oracle = run_method(env, params, oracle_method, keys, args.episodes)
            rows[name] = {}
            for start, (method, start_env) in methods.items():
                figures = run_method(start_env, params, method, keys, args.episodes, policy.params)
                parts = overhead_per_job(figures, oracle, epochs)
                everything[start].append(parts["overhead"])
                rows[name][start] = {part: float(np.nanmean(values)) for part, values in parts.items()}
                rows[name][start]["reallocations"] = float(np.mean(figures["reallocations"]))
            for start in WARM_STARTS:
                rows[name][start]["cut_vs_cold"] = cut(
                    rows[name][start]["overhead"], rows[name]["cold"]["overhead"]
                )
        overall = {start: float(np.nanmean(np.concatenate(values))) for start, values in everything.items()}
        out["horizons"][horizon] = {
            "scenarios": rows,
            "overall": overall,
            "overall_cut_vs_cold": {start: cut(overall[start], overall["cold"]) for start in WARM_STARTS},
        }
    return out


def training_overhead(args: argparse.Namespace, policy: LoadedPolicy) -> dict[str, Any]:
    """The first ``--train_updates`` updates from scratch and from the checkpoint (module docstring)."""
    config = dataclasses.replace(
        policy.config,
        num_envs=args.train_envs,
        total_timesteps=args.train_updates * args.train_envs * policy.config.rollout_length,
        updates_per_chunk=1,
        seed=args.seed,
        init_from=None,
    )
    trainer = make_train(config)
    env_params = env_params_from_config(config)
    learner = jit_learner(trainer, env_params)
    runs: dict[str, Any] = {}
    imitation: dict[str, Any] = {}
    arms = ("scratch", "init_from") + (("imitation",) if args.imitation_jobs > 0 else ())
    for name in arms:
        started = time.perf_counter()
        state = learner.init(jax.random.key(config.seed), env_params)
        if name == "init_from":
            state = warm_start(state, policy)  # the policy the per-job part ran
        if name == "imitation":
            params, imitation = imitated(state, trainer, config, args)
            state = state.replace(params=jax.device_put(params))
        curve = []
        for _ in range(config.num_updates):
            state, metrics = learner.chunk(state, env_params)
            curve.append(summarise(jax.device_get(metrics)))
        episodes = np.array([m["episodes"] for m in curve])
        missed = np.array(
            [m["episodes"] * (1.0 - m["all_slas_met"]) if m["episodes"] else 0.0 for m in curve]
        )
        returns = np.array([m["return"] for m in curve])
        finished = episodes.sum()
        runs[name] = {
            "episodes": int(finished),
            "jobs_missing_an_sla": float(missed.sum()),
            # undefined (null) when no job finished in those updates, not 100 % and a return of 0
            "all_slas_met": float(1.0 - missed.sum() / finished) if finished else math.nan,
            "mean_return": float(np.nansum(returns * episodes) / finished) if finished else math.nan,
            "return_per_update": [round(float(r), 4) for r in returns],
            "all_slas_met_per_update": [round(float(m["all_slas_met"]), 4) for m in curve],
            "wall_s": time.perf_counter() - started,
        }
    scratch = runs["scratch"]["jobs_missing_an_sla"]
    cuts = {name: cut(r["jobs_missing_an_sla"], scratch) for name, r in runs.items() if name != "scratch"}
    return {
        "updates": config.num_updates,
        "num_envs": config.num_envs,
        "runs": runs,
        "cut_vs_scratch": cuts["init_from"],
        "cuts_vs_scratch": cuts,
        "imitation": imitation,
    }


def imitated(state: Any, trainer: Any, config: Any, args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """``state``'s parameters (on the host) with the actor pre-trained on the oracle's decisions for
    ``--imitation_jobs`` other simulated jobs (seed + 1; ``slamorl_jax.imitate --oracle_jobs``'s
    defaults), and the imitation's report."""
    started = time.perf_counter()
    demos = oracle_demonstrations(config, args.imitation_jobs, 8, jax.random.key(args.seed + 1))
    params, report = fit(
        trainer.network, jax.device_get(state.params), demos, ImitationConfig(), jax.random.key(args.seed)
    )
    report["wall_s"] = time.perf_counter() - started
    return jax.device_get(params), report


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both measurements."""
    policy = load_policy(args.checkpoint)
    base = with_preference(env_params_from_config(policy.config, policy.catalog), None)
    started = time.perf_counter()
    jobs = None if args.training_only else per_job_overheads(args, policy, base)
    jobs_s = time.perf_counter() - started
    training = training_overhead(args, policy) if args.train_updates > 0 else None
    return {
        "checkpoint": str(args.checkpoint),
        "episodes": args.episodes,
        "epochs": args.epochs,
        "seed": args.seed,
        "history_jobs": args.history_jobs,
        "history_source": args.history_source,
        "recorded": args.recorded if args.history_source == "policy" else None,
        "history_rounds": args.history_rounds,
        "imitation_jobs": args.imitation_jobs,
        "per_job": jobs,
        "per_job_wall_s": jobs_s,
        "training": training,
        "machine": machine_info(),
    }


def _shown(value: float | None, spec: str = ".0%") -> str:
    """``value`` formatted by ``spec`` (a percentage by default), ``n/a`` where it is undefined: null
    in a report read back, NaN as measured."""
    return "n/a" if value is None or not math.isfinite(value) else format(value, spec)


def to_markdown(payload: dict[str, Any]) -> str:
    """One table per horizon and the training comparison."""
    jobs = payload["per_job"]
    # Older reports name no source (oracle); a policy store names the allocation it recorded.
    store_words = HISTORY_SOURCE_WORDS[payload.get("recorded") or payload.get("history_source", "oracle")]
    if (rounds := payload.get("history_rounds", 1)) > 1:
        store_words += f", the last of {rounds} rounds (each started at the round before's store)"
    text = (
        f"Exploration overhead against the best static allocation in hindsight ({payload['episodes']} jobs "
        f"per scenario, seed {payload['seed']}, policy {payload['checkpoint']}; history store of "
        f"{jobs['history_records']} other jobs, {store_words}). Overhead = regret in preference-weighted "
        "time and cost "
        "relative to the request's + SLA severity beyond the oracle's (benchmarks/exploration_overhead.py)."
        if jobs
        else f"Exploration overhead over training only (seed {payload['seed']}, {payload['checkpoint']})."
    )
    headers = ["scenario", "start", "overhead", "regret", "severity", "re-allocations", "cut vs cold"]
    for horizon, result in (jobs or {"horizons": {}})["horizons"].items():
        lines = []
        for scenario, by_start in result["scenarios"].items():
            for start, row in by_start.items():
                saved = _shown(row["cut_vs_cold"]) if "cut_vs_cold" in row else ""
                figures = [f"{row[part]:.4f}" for part in ("overhead", "regret", "severity")]
                lines.append([scenario, start, *figures, f"{row['reallocations']:.2f}", saved])
        for start, value in result["overall"].items():
            saved = result["overall_cut_vs_cold"].get(start)
            lines.append(
                ["**all**", start, f"{value:.4f}", "", "", "", "" if saved is None else _shown(saved)]
            )
        what = "each whole job" if horizon == "job" else f"each job's first {horizon} epochs"
        text += f"\n\nOver {what}:\n\n" + markdown_table(headers, lines)
    training = payload["training"]
    if training:
        rows = [
            [
                name,
                r["episodes"],
                f"{r['jobs_missing_an_sla']:.0f}",
                _shown(r["all_slas_met"], ".1%"),
                _shown(r["mean_return"], ".3f"),
                _shown(saved) if (saved := training.get("cuts_vs_scratch", {}).get(name)) is not None else "",
            ]
            for name, r in training["runs"].items()
        ]
        text += (
            f"\n\nOver training: the first {training['updates']} PPO updates of {training['num_envs']} jobs, "
            f"from scratch, from --init_from={payload['checkpoint']} and from a policy pre-trained on "
            f"the oracle's decisions for {payload.get('imitation_jobs', 0)} other simulated jobs "
            "(`slamorl_jax.imitate --oracle_jobs`; cut = fewer jobs missing an SLA than from scratch)."
            "\n\n"
            + markdown_table(
                ["run", "jobs finished", "jobs missing an SLA", "all SLAs met", "mean return", "cut"], rows
            )
        )
    return text + f"\n\nMachine: {payload['machine']}\n"


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(
        prog="python -m benchmarks.exploration_overhead", description=summary(__doc__)
    )
    add_job_flags(parser, episodes=1024)
    parser.add_argument("--epochs", type=bounded(int, 1, 1000), default=EARLY_EPOCHS, help="early epochs N")
    scenarios = len([name for name in SCENARIOS if name != "mixed"])  # a store holds some of each
    parser.add_argument(
        "--history_jobs", type=bounded(int, scenarios, 1 << 20), default=2048, help="store size"
    )
    parser.add_argument(
        "--history_source",
        choices=SOURCES,
        default="oracle",
        help="the store's allocations: each job's best static one in hindsight (oracle) or one the "
        "policy ran it on (policy; see --recorded)",
    )
    parser.add_argument(
        "--recorded",
        choices=RECORDED,
        default=None,
        help="with --history_source policy: each job's allocation of its longest stretch of epochs, "
        "or of its last",
    )
    parser.add_argument(
        "--history_rounds",
        type=bounded(int, 1, 10),
        default=1,
        help="with --history_source policy: rounds of the store; each after the first runs other jobs "
        "started at the last round's store (a platform recording runs that used its history)",
    )
    parser.add_argument("--train_updates", type=bounded(int, 0, 10_000), default=30, help="0 skips training")
    parser.add_argument("--train_envs", type=bounded(int, 4, 1 << 16), default=64, help="jobs per update")
    parser.add_argument(
        "--imitation_jobs", type=bounded(int, 0, 1 << 20), default=1024, help="0 skips the imitation run"
    )
    parser.add_argument("--training_only", action="store_true", help="skip the per-job measurement")
    add_checkpoint_flag(parser, "the policy")

    def check(args: argparse.Namespace, prog: str) -> None:
        if args.training_only and args.train_updates == 0:
            fail("--training_only with --train_updates 0 measures nothing", prog)
        if args.history_source == "oracle" and args.history_rounds > 1:
            fail("--history_rounds builds a policy store in rounds: add --history_source policy", prog)
        if args.history_source == "oracle" and args.recorded is not None:
            fail(
                "--recorded picks a policy store's allocation: add --history_source policy",
                prog,
            )
        args.recorded = args.recorded or RECORDED[0]
        check_checkpoint(args, prog)

    parse_and_report(parser, argv, DEFAULT_OUT, run, to_markdown, check)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.exploration_overhead")
