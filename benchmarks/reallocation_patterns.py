"""How a trained policy re-allocates, per workload: moves, GPU moves, flips and relocations.

    python -m benchmarks.reallocation_patterns [--checkpoint checkpoints/default]
        [--scenario deadline-critical] [--episodes 512] [--seed 1] [--relocate-gate G] [--hold-below P]
        [--relocate-payback R]
        [--out benchmarks/results/reallocation_patterns.json] [--overwrite]

Runs fresh jobs of one scenario from the request to their end under the greedy policy (as
``evaluate`` does) and counts, per job, the epochs, the re-allocations (the allocation differs from
the previous epoch's), those that change the GPU count, and the flips: an epoch whose allocation
equals the one two epochs before while the epoch between ran elsewhere (A -> B -> A), each of which
paid two pauses to end where it was. Means per job, per workload and over all jobs. A policy that
flips every epoch ranks two allocations almost equally and its greedy action alternates between
them; where the pause is small against the epoch this costs little, where it is not it costs time.
Relocations (``targets_relocate``: the same allocation on fresh nodes, one pause) keep the
allocation, so they are not among the re-allocations above: they are counted apart, from the
actions, likewise only between epochs, with those made after an epoch its nodes slowed (random
contention, or the job's contention spell or slower node, ``env/shifts.py``; hindsight the policy
does not have): fresh nodes are contended as often as the old, so only those can pay. Per job also
its time, cost and whether it met all six SLAs, so that two policies' counts come with what they
achieved, and the policy's probability of the action it took at its re-allocations (the greedy
action's softmax probability, summed over the moves; the table gives the mean over all the moves of a
row): near 1 where a move is decisive, low where the policy ranks several actions almost alike, as a
policy that flips does. ``--relocate-gate`` runs the policy with that relocation gate in place of the
one it was trained with (``networks.relocate_allowed``; 0: none), an ablation on the same parameters;
``--relocate-payback`` likewise its relocation payback rule (``networks.relocation_pays``; 0: none).
``--hold-below`` runs it holding its allocation where its top action probability is below ``P``
(``agent.decision``; what ``recommend --hold_below`` and ``evaluate --hold_below`` do).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.common import (
    RESULTS_DIR,
    add_checkpoint_flag,
    add_job_flags,
    check_checkpoint,
    machine_info,
    parse_and_report,
    policy_of,
)
from slamorl_jax.agent.decision import greedy_actions
from slamorl_jax.agent.networks import ActorCritic
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.cli_args import (
    OneLineArgumentParser,
    add_hold_below_argument,
    add_relocate_payback_argument,
    bounded,
    fail,
    run_command,
    summary,
)
from slamorl_jax.env.action_sets import emitted_relocation
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.observation import observe
from slamorl_jax.env.params import INIT_STRATEGIES, with_values
from slamorl_jax.env.scenarios import SCENARIOS, with_preference, with_scenario
from slamorl_jax.env.shifts import node_slowdown
from slamorl_jax.markdown import markdown_table
from slamorl_jax.policy_checkpoint import load_policy

PROG = "python -m benchmarks.reallocation_patterns"


def allocation_paths(
    checkpoint: str,
    scenario: str,
    episodes: int,
    seed: int,
    relocate_gate: float | None = None,
    hold_below: float = 0.0,
    relocate_payback: float | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Per epoch and job (leading axes): the allocation each epoch ran on, whether the job was still
    running, whether it relocated before the epoch, whether its nodes slowed the epoch and the
    probability the policy gave the action that chose the epoch's allocation; per job:
    its time, cost and whether it met all six SLAs at its end, and its workload index. Jobs start at
    their request; a move before the first epoch (away from the request) is not among the counts,
    which compare epochs. ``relocate_gate``: the policy's relocation gate replaced; ``hold_below``: the
    decision's threshold; ``relocate_payback``: its relocation payback rule replaced (module
    docstring)."""
    policy = load_policy(checkpoint)
    if relocate_payback is not None:
        try:
            policy = policy.with_relocate_payback(relocate_payback)
        except ValueError as error:  # bad input: one line, exit code 2
            fail(f"--relocate-payback: {checkpoint}: {error}", PROG)
    network = policy.network
    if relocate_gate is not None:
        if not network.config.relocate_prior:
            fail(f"--relocate-gate: {checkpoint} has no relocate prior to gate", PROG)
        network = ActorCritic(dataclasses.replace(network.config, relocate_gate=relocate_gate))
    env = JobAllocationEnv(action_set=policy.config.actions, catalog=policy.catalog)
    # The world the policy was trained in (its prices, pause, grid: as evaluate builds it), the
    # scenario's jobs, each started at its request.
    world = with_preference(env_params_from_config(policy.config, env.catalog), None)
    params = with_values(with_scenario(world, scenario), init_strategy=INIT_STRATEGIES.index("requested"))
    steps = int(min(np.max(np.asarray(params.workloads.epochs_max)), int(params.max_steps_in_episode)))

    @jax.jit
    def run(policy_params: Any, key: jax.Array) -> tuple[Any, ...]:
        reset_key, run_key = jax.random.split(key)
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, episodes), params)
        obs = jax.vmap(observe, in_axes=(0, None))(state, params)

        def step(carry: tuple, step_key: jax.Array) -> tuple:
            obs, weights, state, done = carry
            logits = network.apply(policy_params, obs, weights)[0]  # once: the action and its probability
            actions = greedy_actions(logits, hold_below)
            probabilities = jax.nn.softmax(logits, axis=-1)
            chosen = jnp.take_along_axis(probabilities, actions[:, None], axis=-1)[:, 0]
            obs, after, _, terminated, truncated, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, episodes), state, actions, params
            )
            ran = info["final_state"]  # the job as its epoch ended, before any auto-reset
            ends = jnp.logical_or(terminated, truncated)
            relocated = emitted_relocation(actions, env.action_set)
            spell, node_factor = jax.vmap(node_slowdown)(ran.job, ran.epoch - 1, ran.event_left)
            slowed = ran.contended | spell | (node_factor > 1.0)
            ending = ends & ~done
            outcome = (ending, ran.elapsed_s, ran.cost_usd, jnp.all(ran.severities <= 0.0, axis=-1))
            path = (ran.gpus, ran.cpus, ~done, relocated, slowed, chosen)
            return (obs, info["weights"], after, done | ends), (path, outcome)

        carry = (obs, state.weights, state, jnp.zeros(episodes, bool))
        _, (paths, outcome) = jax.lax.scan(step, carry, jax.random.split(run_key, steps))
        return paths, outcome, state.job.workload

    paths, (ending, time_s, cost_usd, all_met), workload = jax.tree.map(
        np.asarray, run(policy.params, jax.random.key(seed))
    )
    names = ("gpus", "cpus", "running", "relocated", "slowed", "chosen_probability")
    outcome = {  # each job's figures at the epoch it ended (exactly one per job)
        "time_s": (time_s * ending).sum(0),
        "cost_usd": (cost_usd * ending).sum(0),
        "all_slas_met": (all_met & ending).any(0),
    }
    return dict(zip(names, paths, strict=True)), outcome, workload


def pattern_counts(
    gpus: np.ndarray,
    cpus: np.ndarray,
    running: np.ndarray,
    relocated: np.ndarray,
    slowed: np.ndarray | None = None,
    chosen_probability: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per job: epochs, re-allocations, GPU re-allocations, A -> B -> A flips and relocations;
    given ``slowed`` (per epoch whether its nodes slowed it) the relocations after a slowed epoch;
    given ``chosen_probability`` (per epoch the policy's probability of the action that chose its
    allocation) their sum over the re-allocations (module docstring)."""
    moved = ((gpus[1:] != gpus[:-1]) | (cpus[1:] != cpus[:-1])) & running[1:]
    gpu_moved = (gpus[1:] != gpus[:-1]) & running[1:]
    same_as_two_before = (gpus[2:] == gpus[:-2]) & (cpus[2:] == cpus[:-2])
    flips = same_as_two_before & moved[:-1] & running[2:]
    return {
        "epochs": running.sum(0),
        "reallocations": moved.sum(0),
        "gpu_reallocations": gpu_moved.sum(0),
        "flips": flips.sum(0),
        "relocations": (relocated[1:] & running[1:]).sum(0),
        **(
            {}
            if slowed is None
            else {"relocations_after_slowed": (relocated[1:] & running[1:] & slowed[:-1]).sum(0)}
        ),
        **(
            {}
            if chosen_probability is None
            else {"move_probability_sum": np.where(moved, chosen_probability[1:], 0.0).sum(0)}
        ),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The counts per workload and over all jobs."""
    paths, outcome, workload = allocation_paths(
        args.checkpoint,
        args.scenario,
        args.episodes,
        args.seed,
        args.relocate_gate,
        args.hold_below,
        args.relocate_payback,
    )
    counts = {**pattern_counts(**paths), **outcome}
    names = load_policy(args.checkpoint).catalog.workload_names  # the policy's jobs' names
    probability_sum = counts.pop("move_probability_sum")

    def row(mine: np.ndarray) -> dict[str, Any]:
        moves = counts["reallocations"][mine].sum()
        return {
            "jobs": int(mine.sum()),
            **{k: float(v[mine].mean()) for k, v in counts.items()},
            "move_probability": float(probability_sum[mine].sum() / moves) if moves else None,
        }

    rows = {name: row(workload == index) for index, name in enumerate(names) if (workload == index).any()}
    rows["all jobs"] = row(np.ones(workload.shape, bool))
    return {
        "checkpoint": args.checkpoint,
        "scenario": args.scenario,
        "episodes": args.episodes,
        "seed": args.seed,
        "relocate_gate": args.relocate_gate,
        "hold_below": args.hold_below,
        "relocate_payback": args.relocate_payback,
        "rows": rows,
        "machine": machine_info(),
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per workload, then all jobs."""
    table = [
        [
            name,
            r["jobs"],
            f"{r['epochs']:.1f}",
            f"{r['reallocations']:.2f}",
            f"{r['gpu_reallocations']:.2f}",
            f"{r['flips']:.2f}",
            f"{r['relocations']:.2f}",
            f"{r['relocations_after_slowed']:.2f}",
            "-" if r.get("move_probability") is None else f"{r['move_probability']:.2f}",
            f"{r['time_s']:,.0f}",
            f"{r['cost_usd']:.2f}",
            f"{100 * r['all_slas_met']:.1f}%",
        ]
        for name, r in payload["rows"].items()
    ]
    headers = [
        "workload", "jobs", "epochs", "re-allocations", "GPU re-allocations", "A->B->A flips", "relocations",
        "of them after a slowed epoch", "probability of the action at a re-allocation", "time (s)",
        "cost ($)", "all SLAs met",
    ]  # fmt: skip
    gate = payload.get("relocate_gate")
    gated = "" if gate is None else f", run with relocation gate {gate} in place of its own"
    if payload.get("relocate_payback") is not None:
        gated += f", run with relocation payback rule {payload['relocate_payback']:g} in place of its own"
    if payload.get("hold_below"):
        gated += f", holding below probability {payload['hold_below']:g}"
    return (
        f"{policy_of(payload)} on {payload['episodes']} `{payload['scenario']}` jobs (seed "
        f"{payload['seed']}){gated}, greedy from the request; means per job.\n\n"
        + markdown_table(headers, table)
    )


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run, print and write the report."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    add_checkpoint_flag(parser)
    parser.add_argument(
        "--scenario", choices=SCENARIOS, default="deadline-critical", help="the jobs' scenario"
    )
    add_job_flags(parser, episodes=512, seed=1, most=1 << 16)
    parser.add_argument(
        "--relocate-gate",
        type=bounded(float, 0.0, 1.0),
        default=None,
        help="run the policy with this relocation gate (log time, 0-1; 0: none) instead of its own",
    )
    add_hold_below_argument(parser, "--hold-below", "the allocation")
    add_relocate_payback_argument(parser, "--relocate-payback", "run the policy")
    parse_and_report(
        parser, argv, RESULTS_DIR / "reallocation_patterns.json", run, to_markdown, check_checkpoint
    )


if __name__ == "__main__":
    run_command(main, PROG)
