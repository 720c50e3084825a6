"""History stores from the shell: ``python -m slamorl_jax.history {build,ingest,check} ...``.

``build --checkpoint=PATH --out=history.json`` draws ``--jobs`` fresh jobs of the scenario the
checkpoint's policy was trained on (its config's cluster, prices and preferences; ``--scenario`` to
choose another) from ``--seed`` and records each with its best static allocation in hindsight
(``--source=oracle``, the default), or runs them to the end with the checkpoint's policy (greedy,
from the request) and records each finished job with the allocation it ran its longest stretch of
consecutive epochs on (``--source=policy``: what a platform logs, no hindsight; ``--recorded=final``
for the allocation of its last epoch); ``history/build.py``.

``ingest --jobs=finished.jsonl --out=history.json`` records a platform's own finished jobs: job
reports as ``recommend --jobs`` reads them (JSON Lines, a list, or one job; the last epoch's
readings may be left out: ``finished_jobs.with_unread_readings``), each with ``epochs_done`` equal to
``epochs_total``, recorded at the allocation of the longest stretch of
epochs its ``history`` lists (``--recorded=final``: its last allocation);
``history/finished_jobs.py``. A report still running, or whose allocation the default cluster
cannot hold, is refused naming its line, before anything is written.

``--out`` ending in ``.csv`` writes CSV. ``check --store=PATH`` reads a store (JSON or CSV,
``history/records.py``; each record's names must be in the shipped catalogue and its best
allocation must fit the default cluster, the one every command trains on) and prints a JSON
summary. ``ingest`` and ``check`` given
``--checkpoint`` read names in that policy's catalogue and fit allocations to its cluster (a policy
trained with ``train --catalog`` on workloads of its own); ``build`` always uses its checkpoint's.
Bad input exits 2 with one line, an unusable
``--out`` before any job is simulated or read.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from slamorl_jax.cli_start import program_name, require_backend  # first of ours: quiet Ctrl-C

require_backend()  # a platform the machine lacks: one line, before an import touches a device
# ruff: noqa: E402  (the imports below may start JAX's backend)
from slamorl_jax.atomic_files import probe_writable
from slamorl_jax.cli_args import (
    OneLineArgumentParser,
    bounded,
    fail,
    file_path,
    run_command,
    seed_value,
    summary,
)
from slamorl_jax.compilation_cache import add_cache_argument, start_cache
from slamorl_jax.history.names import RECORDED, RECORDED_WORDS, SOURCES
from slamorl_jax.run_dirs import unusable_path
from slamorl_jax.shipped_policy import SHIPPED_POLICY, resolve_checkpoint

if TYPE_CHECKING:
    import argparse

    from slamorl_jax.env.catalog import Catalog
    from slamorl_jax.env.params import EnvParams

PROG = program_name("slamorl_jax.history")  # as started: -m or its script
MAX_JOBS = 1 << 20
# What a store's notes say of where its allocations came from.
SOURCE_NOTES = {
    "oracle": "fresh jobs, each with its best static allocation in hindsight",
    "policy": "fresh jobs run to the end by the checkpoint's policy (greedy, from the request), each "
    "finished one with the allocation it ran {}",
}


def parser() -> OneLineArgumentParser:
    """The command line of the three sub-commands."""
    top = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    commands = top.add_subparsers(dest="command", required=True, parser_class=OneLineArgumentParser)
    build = commands.add_parser("build", help="build a store from fresh simulated jobs")
    build.add_argument(
        "--checkpoint",
        default=SHIPPED_POLICY,
        help="policy whose env config (and, for --source=policy, runs) to use",
    )
    build.add_argument(
        "--source",
        choices=SOURCES,
        default="oracle",
        help="each job's allocation: its best static one in hindsight (oracle) or one the "
        "checkpoint's policy ran it on (policy; see --recorded)",
    )
    build.add_argument(
        "--recorded",
        choices=RECORDED,
        default=None,
        help="with --source=policy: the allocation of the job's longest stretch of epochs (the "
        "default), or of its last",
    )
    build.add_argument("--out", type=file_path, required=True, help="the store to write (.json or .csv)")
    build.add_argument("--jobs", type=bounded(int, 1, MAX_JOBS), default=4096, help="jobs to record")
    build.add_argument("--seed", type=seed_value, default=1, help="jobs' seed")
    build.add_argument("--scenario", default=None, help="scenario of the jobs (default: the checkpoint's)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    add_cache_argument(build)
    ingest = commands.add_parser("ingest", help="build a store from a platform's finished job reports")
    ingest.add_argument(
        "--jobs", required=True, help="finished job reports, as recommend --jobs reads them (- for stdin)"
    )
    ingest.add_argument("--out", type=file_path, required=True, help="the store to write (.json or .csv)")
    ingest.add_argument(
        "--recorded",
        choices=RECORDED,
        default=RECORDED[0],
        help="each job's allocation of its longest stretch of epochs in its history, or of its last",
    )
    ingest.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    check = commands.add_parser("check", help="validate a store and summarise it")
    check.add_argument("--store", required=True, help="a .json or .csv history store")
    for command in (ingest, check):
        command.add_argument(
            "--checkpoint",
            default=None,
            help="the policy whose catalogue (workload and GPU type names) and cluster the records "
            "must fit (default: the shipped catalogue and the default cluster)",
        )
    return top


def catalog_and_cluster(checkpoint: str | None) -> tuple[Catalog | None, EnvParams]:
    """The catalogue (``None``: the shipped one) and env params whose cluster ``ingest`` and
    ``check`` hold records to: ``checkpoint``'s policy's, else the defaults (exit 2 with one line
    for a checkpoint that cannot be loaded)."""
    from slamorl_jax.env import default_params

    if checkpoint is None:
        return None, default_params()
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.policy_checkpoint import load_policy

    try:
        checkpoint = resolve_checkpoint("--checkpoint", checkpoint)
    except ValueError as err:
        fail(str(err), PROG)
    try:
        policy = load_policy(checkpoint)
        return policy.catalog, policy.env_params
    except (CheckpointError, ValueError) as err:
        fail(f"--checkpoint: {err}", PROG)
    raise AssertionError("unreachable")


def out_problem(out: Path, overwrite: bool) -> str | None:
    """Why ``build`` cannot write its store to ``out`` (``None`` when it can): a ``.json`` or ``.csv``
    file, new unless ``overwrite``, in a folder that exists and can be written (found before any job is
    simulated), at a path the filesystem can hold."""
    if out.suffix.lower() not in (".json", ".csv"):
        return "must end in .json or .csv"
    try:
        if out.is_dir():
            return "is a directory"
        if out.exists() and not overwrite:
            return "already exists; pass --overwrite to replace it"
        if not out.parent.is_dir():
            return "its folder does not exist"
        probe_writable(out)
    except (OSError, ValueError) as err:  # a name too long, a NUL byte, a folder it may not read or write
        return unusable_path(err)
    return None


def build(args: argparse.Namespace) -> int:
    """The ``build`` sub-command."""
    out = args.out  # a Path (file_path)
    if args.source == "oracle" and args.recorded is not None:
        fail(
            "--recorded picks which allocation of a policy's run a record holds: give it --source=policy",
            PROG,
        )
    args.recorded = args.recorded or RECORDED[0]
    if problem := out_problem(out, args.overwrite):
        fail(f"--out {str(args.out)!r}: {problem}", PROG)
    try:
        args.checkpoint = resolve_checkpoint("--checkpoint", args.checkpoint)
    except ValueError as err:
        fail(str(err), PROG)
    start_cache(args.compilation_cache_dir, PROG)
    import jax

    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.env.action_sets import WIDEST_ACTION_SET
    from slamorl_jax.env.job_env import JobAllocationEnv
    from slamorl_jax.env.scenarios import with_scenario
    from slamorl_jax.history.build import oracle_records, policy_records
    from slamorl_jax.policy_checkpoint import load_policy
    from slamorl_jax.quality_bar import greedy_policy

    try:
        policy = load_policy(args.checkpoint)
        params = policy.env_params
        if args.scenario is not None:
            params = with_scenario(params, args.scenario)
    except (CheckpointError, ValueError) as err:
        fail(str(err), PROG)
    key = jax.random.key(args.seed)
    # Named in the policy's catalogue (its own, when it was trained on one: train --catalog).
    if args.source == "oracle":
        records = oracle_records(params, key, args.jobs, catalog=policy.catalog)
    else:
        env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=policy.catalog)
        greedy = greedy_policy(policy.network, policy.hold_below)
        try:
            records = policy_records(env, params, greedy, policy.params, key, args.jobs, None, args.recorded)
        except ValueError as err:  # no job finished within the step limit
            fail(str(err), PROG)
    notes = {
        "source": f"{PROG} build --source={args.source}: "
        + SOURCE_NOTES[args.source].format(RECORDED_WORDS[args.recorded]),
        "checkpoint": str(args.checkpoint),
        "scenario": args.scenario or policy.config.scenario,
        "seed": args.seed,
    }
    return write_store(records, out, notes, args, policy.catalog)


def write_store(
    records: list, out: Path, notes: dict, args: argparse.Namespace, catalog: Catalog | None = None
) -> int:
    """Save ``records`` (named in ``catalog``, the shipped one by default) to ``out`` with ``notes``
    (replacing a file only with ``--overwrite``), say so, and give the exit status; exits 2 with one
    line when it cannot."""
    from slamorl_jax.history.records import save_records

    try:
        save_records(records, out, notes, replace=args.overwrite, catalog=catalog)
    except FileExistsError:  # made by another program while the jobs ran or were read: kept
        fail(f"--out {str(args.out)!r} was created meanwhile; pass --overwrite to replace it", PROG)
    except OSError as err:
        fail(f"cannot write --out {str(args.out)!r}: {err.strerror or err}", PROG)
    print(f"wrote {len(records):,} records to {out}")
    return 0


def ingest(args: argparse.Namespace) -> int:
    """The ``ingest`` sub-command: one record per finished job report (``history/finished_jobs.py``),
    each checked as ``check`` checks a store; exits 2 naming the first report that is not a finished
    job or whose record the default cluster cannot hold, before anything is written."""
    out = args.out  # a Path (file_path)
    if problem := out_problem(out, args.overwrite):
        fail(f"--out {str(args.out)!r}: {problem}", PROG)
    from slamorl_jax.history.finished_jobs import record_from_finished_job, with_unread_readings
    from slamorl_jax.job_reports import read_jobs
    from slamorl_jax.live_checks import ClusterLimits

    catalog, params = catalog_and_cluster(args.checkpoint)
    cluster = ClusterLimits.of(params)
    records = []
    for where, job in read_jobs(args.jobs, prog=PROG, prepare=with_unread_readings):
        try:
            records.append(record_from_finished_job(job, args.recorded, catalog, cluster))
        except ValueError as err:
            fail(f"--jobs {args.jobs!r} {where}: {err}", PROG)
    notes = {
        "source": f"{PROG} ingest: finished job reports, each with the allocation it ran "
        + RECORDED_WORDS[args.recorded],
        "jobs": str(args.jobs),
    }
    return write_store(records, out, notes, args, catalog)


def check(args: argparse.Namespace) -> int:
    """The ``check`` sub-command: every field valid, every best allocation in the default cluster
    (``--checkpoint``: every name in its policy's catalogue, every allocation in its cluster)."""
    from slamorl_jax.history.records import load_records

    catalog, params = catalog_and_cluster(args.checkpoint)
    try:
        records = load_records(args.store, catalog, cluster=params)
    except ValueError as err:
        fail(str(err), PROG)
    summary = {
        "store": str(args.store),
        "records": len(records),
        "workloads": dict(Counter(r.workload for r in records)),
        "gpu_types": dict(Counter(r.gpu_type for r in records)),
    }
    print(json.dumps(summary, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse and run one sub-command; the exit status."""
    args = parser().parse_args(argv)
    return {"build": build, "ingest": ingest, "check": check}[args.command](args)


def run() -> None:
    """Console entry point."""
    run_command(main, PROG)


if __name__ == "__main__":
    run()
