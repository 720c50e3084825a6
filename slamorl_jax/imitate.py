"""Pre-train a policy on logged decisions: ``python -m slamorl_jax.imitate --decisions=log.jsonl --out=DIR``.

Behaviour cloning (``agent/imitation.py``; the historical-learning start): the actor of a fresh
actor-critic of the given network (``--actions``, ``--hidden_sizes``; or ``--like=CHECKPOINT``, that
checkpoint's whole config) learns to make the decisions of a log (``history/decisions.py``: each a
job's report, as ``recommend --job`` reads it, and the allocation of its next epoch), or of
``--oracle_jobs`` simulated jobs moved towards their best static allocation in hindsight
(``history/demonstrations.py``). The result is a policy-only checkpoint in ``--out`` (step 0; the
report under ``imitation`` in its meta) that ``recommend``, ``evaluate`` and ``load_policy`` read
and ``train --init_from`` starts a PPO run from. It prints a JSON report: the rows learnt from and
held out, and the loss and accuracy (greedy action = logged action) before and after. Bad input
(an unreadable or bad log; a decision whose current or next allocation lies outside the policy's
cluster, named by its place in the log (a .jsonl's line) and field; an ``--out`` that is not a new
or empty folder or not a usable path) exits 2 with one line, before anything is trained or written.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from slamorl_jax.cli_start import program_name, require_backend  # first of ours: quiet Ctrl-C

require_backend()  # a platform the machine lacks: one line, before an import touches a device
# ruff: noqa: E402  (the imports below may start JAX's backend)
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.imitation import ImitationConfig
from slamorl_jax.cli_args import (
    OneLineArgumentParser,
    bounded,
    cleanup_on_interrupt,
    fail,
    positive_int_list,
    run_command,
    seed_value,
    summary,
)
from slamorl_jax.compilation_cache import add_cache_argument, start_cache
from slamorl_jax.env.action_sets import ACTION_SETS, DEFAULT_ACTION_SET
from slamorl_jax.run_dirs import new_folder_problem, new_folder_undo, path_exists

if TYPE_CHECKING:
    import argparse

    from slamorl_jax.env.catalog import Catalog

PROG = program_name("slamorl_jax.imitate")  # as started: -m or its script
MAX_JOBS = 1 << 20
DECISIONS_PER_JOB = 8  # --oracle_jobs: a simulated job's first epochs, each a demonstration
# Most demonstrations one run builds (--oracle_jobs x --decisions_per_job). Building and fitting
# them peaks at about 5 KB each beside 0.7 GB for the rest (peak resident memory of `--steps=1`
# runs, `/usr/bin/time -f %M`: 0.87 GB at 4,096 jobs x 8, 2.0 GB at 32,768 x 8), so 2**21 of them
# need about 11 GB; 2**23 would need 40 GB, and a run that asked for them was killed for memory.
MAX_DEMONSTRATIONS = 1 << 21
DEFAULTS = ImitationConfig()


def parser() -> OneLineArgumentParser:
    """The command line."""
    p = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--decisions", help="a decision log (.json or .jsonl) to imitate")
    source.add_argument(
        "--oracle_jobs",
        type=bounded(int, 1, MAX_JOBS),
        help="imitate this many simulated jobs moved towards their hindsight-best static allocation",
    )
    p.add_argument("--out", required=True, help="folder for the policy checkpoint (new or empty)")
    p.add_argument("--like", default=None, help="take the network and env config of this checkpoint")
    p.add_argument("--actions", choices=ACTION_SETS, default=None, help=f"default {DEFAULT_ACTION_SET}")
    p.add_argument("--hidden_sizes", type=positive_int_list, default=None, help="e.g. 128,128 (the default)")
    p.add_argument(
        "--decisions_per_job",
        type=bounded(int, 1, 1000),
        default=None,
        help=f"--oracle_jobs only: decisions a job (default {DECISIONS_PER_JOB})",
    )
    p.add_argument("--steps", type=bounded(int, 1, 10_000_000), default=DEFAULTS.steps, help="Adam steps")
    p.add_argument("--batch_size", type=bounded(int, 1, 1 << 20), default=DEFAULTS.batch_size, help="rows")
    p.add_argument(
        "--learning_rate", type=bounded(float, 1e-8, 1.0), default=DEFAULTS.learning_rate, help="Adam's"
    )
    p.add_argument(
        "--holdout", type=bounded(float, 0.0, 0.9), default=DEFAULTS.holdout, help="share held out to measure"
    )
    p.add_argument("--seed", type=seed_value, default=0, help="network, split and job seed")
    add_cache_argument(p)
    return p


def policy_config(args: argparse.Namespace) -> tuple[TrainConfig, Catalog | None]:
    """The config of the policy to pre-train (``--like``'s, else the defaults), with ``--actions``
    and ``--hidden_sizes``, and the catalogue it is for (``--like``'s, the copy its checkpoint
    carries; ``None``: the shipped one); exits 2 on a bad combination."""
    from slamorl_jax.agent.config_checks import validate_config
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.policy_checkpoint import load_policy

    config, catalog = TrainConfig(), None
    if args.like is not None:
        if not path_exists(args.like):
            fail(f"--like {args.like!r} does not exist", PROG)
        try:
            like = load_policy(args.like)
            config, catalog = like.config, like.catalog
        except CheckpointError as err:
            fail(f"--like: {err}", PROG)
    changes = {}
    if args.actions is not None:
        changes["actions"] = args.actions
    if args.hidden_sizes is not None:
        changes["hidden_sizes"] = tuple(args.hidden_sizes)
    try:
        config = dataclasses.replace(config, **changes, init_from=None)
        validate_config(config)
    except ValueError as err:
        fail(str(err), PROG)
    return config, catalog


def check_out(out: Path) -> None:
    """Exit 2 unless ``out`` can take a new checkpoint (absent or an empty folder; missing parent
    folders are made when it saves)."""
    if problem := new_folder_problem(out):
        fail(f"--out {str(out)!r}: {problem}", PROG)


def main(argv: list[str] | None = None) -> int:
    """Parse, build the demonstrations, imitate them, save; the exit status."""
    args = parser().parse_args(argv)
    if args.decisions is not None and args.decisions_per_job is not None:  # it would be ignored
        fail("--decisions_per_job applies to --oracle_jobs only; a log holds its own decisions", PROG)
    args.decisions_per_job = args.decisions_per_job or DECISIONS_PER_JOB
    if args.oracle_jobs is not None and args.oracle_jobs * args.decisions_per_job > MAX_DEMONSTRATIONS:
        fail(
            f"--oracle_jobs x --decisions_per_job = {args.oracle_jobs * args.decisions_per_job:,} "
            f"demonstrations; at most {MAX_DEMONSTRATIONS:,} fit in memory",
            PROG,
        )
    out = Path(args.out)
    check_out(out)
    start_cache(args.compilation_cache_dir, PROG)  # before --like's policy loads
    config, catalog = policy_config(args)
    imitation = ImitationConfig(
        steps=args.steps, batch_size=args.batch_size, learning_rate=args.learning_rate, holdout=args.holdout
    )
    import jax

    from slamorl_jax.agent.imitation import fit
    from slamorl_jax.agent.networks import init_params
    from slamorl_jax.agent.trainer import make_train
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.env.job_env import JobAllocationEnv
    from slamorl_jax.history.decisions import load_decisions
    from slamorl_jax.history.demonstrations import decision_demonstrations, oracle_demonstrations
    from slamorl_jax.policy_checkpoint import save_policy

    key = jax.random.key(args.seed)
    net_key, data_key, fit_key = jax.random.split(key, 3)
    env = JobAllocationEnv(action_set=config.actions, catalog=catalog)
    if args.decisions is not None:
        try:
            demos, counts = decision_demonstrations(load_decisions(args.decisions), config, env.catalog)
        except ValueError as err:
            fail(str(err), PROG)
        source = {"log": str(args.decisions), **counts}
    else:
        demos = oracle_demonstrations(config, args.oracle_jobs, args.decisions_per_job, data_key, env)
        source = {"oracle_jobs": args.oracle_jobs, "decisions_per_job": args.decisions_per_job}
    trainer = make_train(config, env)
    params = init_params(trainer.network, net_key, trainer.obs_dim)
    params, report = fit(trainer.network, params, demos, imitation, fit_key)
    if report["distinct_actions"] == 1:  # e.g. a log of a scheduler that never moved a job
        print(
            f"{PROG}: warning: every demonstration takes the same action, so the policy learns to take "
            "it almost always (a later train --init_from starts from a near-deterministic policy)",
            file=sys.stderr,
        )
    report = {"source": source, "settings": dataclasses.asdict(imitation), "seed": args.seed, **report}
    # Stopped between its save and its report, the run removes its checkpoint: it leaves none that it
    # did not announce (a save stopped half-way leaves nothing by itself; policy_checkpoint.py).
    undo, saved = new_folder_undo(out), []
    with cleanup_on_interrupt(lambda: saved and undo()):
        try:
            step_dir = save_policy(out, params, config, extra={"imitation": report}, catalog=env.catalog)
        except CheckpointError as err:  # --out filled up while it trained, or a failed write
            fail(f"--out: {err}", PROG)
        except OSError as err:
            fail(f"cannot write --out {args.out!r}: {err.strerror or err}", PROG)
        saved.append(step_dir)
        print(json.dumps({"checkpoint": str(step_dir.parent), **report}, indent=2), flush=True)
    return 0


def run() -> None:
    """Console entry point."""
    run_command(main, PROG)


if __name__ == "__main__":
    run()
