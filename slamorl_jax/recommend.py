"""The next allocation for a running job: ``python -m slamorl_jax.recommend --job=job.json``.

Reads the job's state after its latest epoch as JSON (a file, or ``-`` for standard input; fields
in :mod:`slamorl_jax.live`), runs the policy of ``--checkpoint`` (default: the shipped
``checkpoints/default``) and prints a JSON object: the recommended ``gpus`` and ``cpus``, the
change, the action and its probability, ``relocate`` (true when a ``targets_relocate`` policy asks
to restart the job on other nodes at the same allocation), ``held`` (``--hold_below`` below), the
adaptive weights, the SLA severities, the
observation it was based on, ``forecast`` (what that observation's forecast projects for keeping,
for its first choice and for the answer, in seconds, dollars and SLAs: ``env/forecast_summary.py``),
and ``in_training_range`` with ``outside_training``: the readings that
lie outside what the policy was trained on (also one ``warning:`` line on stderr), if any. Bad input
(unreadable or non-UTF-8 files, bad JSON, bad or huge values, an allocation outside the policy's
cluster, a finished job, a damaged checkpoint) exits with code 2 and one line.

Every program the call compiles is kept in ``--compilation_cache_dir`` (JAX's persistent cache;
``compilation_cache.py``), so the next process reads them back instead of compiling: about 3 s a
call instead of 5 on a 2-core CPU (``benchmarks/recommend_throughput.py``).

``--serve`` keeps one process warm for a stream of jobs: each line of standard input is a job and
gets its answer line at once (or an error line, and the next job is answered; ``recommend_serve.py``).

``--http=HOST:PORT`` answers over HTTP instead (``recommend_http.py``): ``POST /recommend`` with one
job or a JSON list of jobs, ``GET /health``; one line on stderr names the address it listens on.

``--hold_below=P`` keeps the job's allocation whenever the policy's most probable action has a
probability below ``P`` (``slamorl_jax.agent.decision``): the answer then keeps, says ``"held":
true`` where the most probable action would have moved or relocated the job, and still gives the
policy's probabilities. For platforms whose restarts cost more than the
30 s pause the policy was trained with: where the policy ranks two allocations almost alike it can
otherwise alternate between them from one report to the next (``benchmarks/reallocation_patterns.py
--hold-below``). 0, the default, takes the policy's argmax.

``--jobs=FILE`` answers many running jobs in one compiled call (``live.recommend_many``): JSON Lines
(one job a line), one JSON list of jobs, or one job over several lines; it prints one compact JSON
answer a line in the jobs' order, and a refused job or a warning names its line (or list item). With
``--history`` (below) each job that has run no epoch gets its store's first allocation instead; the
other new-job flags answer one job, with ``--job``.

A job that has run no epoch yet (``epochs_done`` 0) can start elsewhere than where the policy would
send it (``slamorl_jax.live_start``): ``--forecast_start`` answers with the allocation the profile's
forecast ranks first (``"source": "forecast"``; the start ``evaluate`` reports as
``policy_from_forecast``), ``--history=store.json`` (or ``.csv``; ``slamorl_jax.history``)
answers with the allocation of the store's nearest record (``"source": "history"``, the record, its
distance and how it matches the job, with a warning on stderr where it is of another workload or GPU
type; a job that has run epochs gets the policy's answer as usual, with a note on stderr, though a
missing, unreadable or malformed store is refused either way), and ``--probe_plan``
answers with the probe runs to make first (the plan reads no deadline or budget, so ``deadline_s`` and
``budget_usd`` may be missing); reported back as the job's ``probes``, they feed the online model
the policy's forecasts use. ``--suggest_slas`` answers a new job whose user left out
its deadline, budget or minimum throughput (``deadline_s`` and ``budget_usd`` may then be missing)
with targets for them from the forecast's first choice, with the reference code's margins
(``slamorl_jax.live_slas``), and that allocation; with ``--sla_confidence=0.9`` the margins are
sized so the job meets them with that probability by the forecast's own uncertainty. A job that
gives all three has nothing to suggest and is refused.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import slamorl_jax.cli_start  # first of ours: a quiet Ctrl-C while JAX loads
from slamorl_jax.cli_args import (
    OneLineArgumentParser,
    add_hold_below_argument,
    add_relocate_payback_argument,
    bounded,
    fail,
    first_line,
    run_command,
    summary,
)
from slamorl_jax.compilation_cache import add_cache_argument, start_cache
from slamorl_jax.job_reports import read_job, read_jobs
from slamorl_jax.shipped_policy import SHIPPED_POLICY, resolve_checkpoint

if TYPE_CHECKING:
    import argparse

    from slamorl_jax.env.catalog import Catalog
    from slamorl_jax.live_checks import ClusterLimits
    from slamorl_jax.live_job import LiveJob
    from slamorl_jax.policy_checkpoint import LoadedPolicy

PROG = slamorl_jax.cli_start.program_name("slamorl_jax.recommend")  # as started: -m or its script


def answer_jobs(args: argparse.Namespace) -> int:
    """``--jobs``: the policy's answer for every job, one JSON object a line in the jobs' order; with
    ``--history``, a job that has run no epoch gets its first allocation from the store instead (as
    ``--job --history`` gives it); a refused job or a warning names its line (or list item)."""
    located = read_jobs(args.jobs, args.keep_going)
    policy = load_checkpoint(args)
    from slamorl_jax.live import recommend_many
    from slamorl_jax.live_checks import ClusterLimits

    if args.keep_going:  # a job the policy's cluster cannot hold, or a finished one, answered by why
        limits = ClusterLimits.of(policy.env_params)
        located = [(where, _refusal(job, limits, policy.catalog)) for where, job in located]
    starts: dict[int, dict] = {}  # a new job's first allocation from --history, by its index
    if args.history is not None:
        located, starts = history_starts(args, policy, located)
    answerable = [
        (where, job) for i, (where, job) in enumerate(located) if not isinstance(job, str) and i not in starts
    ]
    names = [f"--jobs {args.jobs!r} {where}" for where, _ in answerable]
    try:
        jobs = [job for _, job in answerable]
        answers = recommend_many(policy, jobs, names=names) if jobs else []
    except ValueError as err:  # a job the policy cannot answer, named by its line
        fail(str(err), PROG)
    for (where, _), answer in zip(answerable, answers, strict=True):
        if answer.outside_training:
            notes = "; ".join(answer.outside_training)
            print(
                f"{PROG}: warning: {where} is outside what the policy was trained on: {notes}",
                file=sys.stderr,
            )
    answered = iter(answers)
    for i, (where, job) in enumerate(located):
        if isinstance(job, str):
            line = {"at": where, "error": job}
        else:
            line = starts[i] if i in starts else next(answered).as_dict(args.brief)
        print(json.dumps(line))
    refused = len(located) - len(answers) - len(starts)
    if refused:  # --keep_going: every job has its line; the status says not all were answered
        print(
            f"{PROG}: error: {refused} of {len(located)} jobs refused (their lines say why)",
            file=sys.stderr,
        )
        return 2
    return 0


def history_starts(
    args: argparse.Namespace, policy: LoadedPolicy, located: list[tuple[str, LiveJob | str]]
) -> tuple[list[tuple[str, LiveJob | str]], dict[int, dict]]:
    """The ``--history`` first allocation of each job of ``located`` that has run no epoch, by its
    index (a warning on stderr names the line of one matched to another workload or GPU type), and
    ``located`` with a job the store cannot start given why in its place (``--keep_going``; else
    exit 2 naming its line)."""
    from slamorl_jax.live_start import history_first_allocation

    records = read_history(args.history, policy)
    located, starts = list(located), {}
    for i, (where, job) in enumerate(located):
        if isinstance(job, str) or job.epochs_done > 0:
            continue
        try:
            start = history_first_allocation(job, records, policy.env_params, policy.catalog).as_dict()
        except ValueError as err:
            if not args.keep_going:
                fail(f"--jobs {args.jobs!r} {where}: {err}", PROG)
            located[i] = (where, first_line(err))
            continue
        warn_of_a_far_record(start, where)
        starts[i] = start
    return located, starts


def warn_of_a_far_record(start: dict, where: str | None = None) -> None:
    """A warning on stderr where the ``--history`` answer ``start`` comes from a record of another
    workload or GPU type than its job's (``where``: the job's line in ``--jobs``); else nothing."""
    from slamorl_jax.live_start import HISTORY_MATCHES

    if start.get("source") != "history" or start["match"] == HISTORY_MATCHES[0]:
        return
    at, whose = (f"{where}: ", "its") if where else ("", "this job's")
    record = start["record"]
    print(
        f"{PROG}: warning: {at}the store holds no record of {whose} workload and GPU type; the nearest "
        f"is of {start['match']} ({record['workload']} on {record['gpu_type']})",
        file=sys.stderr,
    )


def _refusal(job: LiveJob | str, limits: ClusterLimits, catalog: Catalog) -> LiveJob | str:
    """``job``, or why ``live.check_recommendable`` refuses it (a string); a string already (an
    unreadable job) stays."""
    from slamorl_jax.live import check_recommendable

    if isinstance(job, str):
        return job
    try:
        check_recommendable(job, limits, catalog)
    except ValueError as err:
        return first_line(err)
    return job


def serve_stdin(args: argparse.Namespace) -> int:
    """``--serve``: answer the jobs on standard input as they arrive (``recommend_serve.py``)."""
    import io

    from slamorl_jax.recommend_serve import serve

    if sys.stdin is None:
        fail("--serve reads jobs from standard input, which is closed", PROG)
    policy = load_checkpoint(args)
    stream = getattr(sys.stdin, "buffer", None)
    # Bytes that are not UTF-8 become lone surrogates: that line is then refused, the others answered.
    lines = (
        sys.stdin
        if stream is None
        else io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape")
    )
    return serve(policy, lines, sys.stdout, args.brief)


def serve_http(args: argparse.Namespace) -> int:
    """``--http``: answer jobs over HTTP until the process is stopped (``recommend_http.py``)."""
    from slamorl_jax.recommend_http import make_server, parse_address

    try:
        host, port = parse_address(args.http)
    except ValueError as err:
        fail(str(err), PROG)
    policy = load_checkpoint(args)
    try:
        server = make_server(policy, host, port, brief=args.brief)
    except OSError as err:  # the port is taken, the host is not this machine's, a port below 1024
        fail(f"--http cannot listen on {args.http!r}: {first_line(err)}", PROG)
    bound_host, bound_port = server.server_address[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"{PROG}: listening on http://{shown}:{bound_port}", file=sys.stderr, flush=True)
    with server:
        server.serve_forever()
    return 0


def load_checkpoint(args: argparse.Namespace) -> LoadedPolicy:
    """The policy at ``--checkpoint``, on ``--catalog`` if given (``LoadedPolicy.on_catalog``),
    deciding with ``--hold_below`` (``agent.decision``) and, unless None, the relocation payback rule
    ``--relocate_payback`` (``LoadedPolicy.deciding``); exits 2 with one line when it is missing,
    cannot be loaded or cannot take the rule, or the catalogue cannot be read."""
    try:
        path = resolve_checkpoint("--checkpoint", args.checkpoint)
    except ValueError as err:
        fail(str(err), PROG)
    from slamorl_jax.agent.trainer import catalog_for_config
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.policy_checkpoint import load_policy

    try:
        policy = load_policy(path)
        if args.catalog is not None:  # params the simulator's checks refuse: one line, not an answer
            policy = policy.on_catalog(catalog_for_config(args.catalog, policy.config))
        policy.env_params  # noqa: B018  (built here: a policy saved with env params of its own refuses)
    except (CheckpointError, ValueError) as err:
        fail(str(err), PROG)
    try:
        return policy.deciding(args.hold_below, args.relocate_payback)
    except ValueError as err:
        fail(f"--relocate_payback: {err}", PROG)
    return None  # unreachable


def main(argv: list[str] | None = None) -> int:
    """Parse, validate, recommend, print JSON; the exit status."""
    args = _parser().parse_args(argv)
    _check_modes(args)
    slamorl_jax.cli_start.require_backend()  # a platform the machine lacks: one line, before anything runs
    _check_sla_confidence(args)
    start_cache(args.compilation_cache_dir, PROG, min_compile_time_s=0.0)  # every program: see the docstring
    if args.job is None:  # --jobs, --serve or --http; --jobs also starts its new jobs from --history
        _check_batch_flags(args)
        if args.http is not None:
            return serve_http(args)
        return answer_jobs(args) if args.jobs is not None else serve_stdin(args)
    _check_one_job_flags(args)
    return _answer_one_job(args)


def _parser() -> OneLineArgumentParser:
    """The command's flags."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    jobs = parser.add_mutually_exclusive_group(required=True)
    jobs.add_argument("--job", help="job state as JSON: a file path, or - for stdin")
    jobs.add_argument(
        "--jobs", help="many jobs (JSON Lines, or a JSON list; - for stdin): one answer a line, in one call"
    )
    jobs.add_argument(
        "--serve",
        action="store_true",
        help="answer jobs from stdin as they arrive, a JSON line each, until EOF",
    )
    jobs.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="answer jobs POSTed to http://HOST:PORT/recommend until stopped (port 0: a free one)",
    )
    parser.add_argument(
        "--checkpoint", default=SHIPPED_POLICY, help="policy checkpoint (default: %(default)s)"
    )
    parser.add_argument(
        "--catalog",
        default=None,
        help="read jobs in this calibrated catalogue (as train --catalog takes it) instead of the "
        "policy's own: a workload it never trained on, given a profile there",
    )
    parser.add_argument(
        "--compact",
        action="store_true",
        help="with --job: the answer on one line (--jobs, --serve and --http always answer so)",
    )
    parser.add_argument(
        "--brief",
        action="store_true",
        help="the policy's answer without every action's probability and the observation's features "
        "(the chosen action's probability instead); every mode",
    )
    parser.add_argument(
        "--keep_going",
        action="store_true",
        help='with --jobs: answer a refused job by its reason ({"at": ..., "error": ...}) in its '
        "place and answer the others; exit 2 if any was refused",
    )
    parser.add_argument(
        "--history",
        default=None,
        help="history store (.json/.csv): a new job's first allocation by nearest match",
    )
    parser.add_argument(
        "--probe_plan",
        action="store_true",
        help="for a new job: the probe runs to make before its first epoch (deadline and budget may be "
        "left out)",
    )
    parser.add_argument(
        "--forecast_start",
        action="store_true",
        help="for a new job: the allocation the profile's forecast ranks first",
    )
    parser.add_argument(
        "--suggest_slas",
        action="store_true",
        help="for a new job: deadline, budget and minimum throughput from the forecast, for those left out",
    )
    parser.add_argument(
        "--sla_confidence",
        type=bounded(float, 0.0, 1.0),
        default=None,
        help="with --suggest_slas: targets the job meets with this probability (default: x1.1 / x0.9)",
    )
    add_hold_below_argument(parser, "--hold_below", 'the job\'s allocation (the answer says "held")')
    add_relocate_payback_argument(parser, "--relocate_payback", "run the policy")
    add_cache_argument(parser)
    return parser


def _check_modes(args: argparse.Namespace) -> None:
    """Flags that go with one mode only (exit 2 otherwise)."""
    if args.compact and args.job is None:
        fail("--compact goes with --job (--jobs, --serve and --http answer a line a job already)", PROG)
    if args.keep_going and args.jobs is None:
        fail("--keep_going goes with --jobs (--serve and --http answer each job on its own already)", PROG)


def _check_sla_confidence(args: argparse.Namespace) -> None:
    """``--sla_confidence``: with ``--suggest_slas``, a probability it can meet (exit 2 otherwise)."""
    if args.sla_confidence is not None:
        from slamorl_jax.env.suggested_slas import check_confidence

        if not args.suggest_slas:
            fail("--sla_confidence goes with --suggest_slas", PROG)
        try:
            check_confidence(args.sla_confidence)
        except ValueError as err:
            fail(f"--sla_confidence: {err}", PROG)


def _new_job_flags(args: argparse.Namespace) -> int:
    """How many of the flags that answer a new job's start were given."""
    return (args.history is not None) + args.probe_plan + args.forecast_start + args.suggest_slas


def _check_batch_flags(args: argparse.Namespace) -> None:
    """``--jobs``, ``--serve`` and ``--http`` give the policy's answer (``--jobs`` also a new job's
    history start): a new job's other starts are refused (exit 2)."""
    batch_history = args.jobs is not None and args.history is not None
    if _new_job_flags(args) - batch_history or args.sla_confidence is not None:
        if args.jobs is not None:
            fail(
                "--jobs gives the policy's answer for each job, and with --history a new job's first "
                "allocation; ask for a new job's other starts with --job",
                PROG,
            )
        flag = "--serve" if args.serve else "--http"
        fail(f"{flag} gives the policy's answer for each job; ask for a new job's start with --job", PROG)


def _check_one_job_flags(args: argparse.Namespace) -> None:
    """``--job``: at most one new-job answer, and no flag of the policy's answer with one (exit 2)."""
    if args.hold_below > 0 and (args.probe_plan or args.forecast_start or args.suggest_slas):
        fail(
            "--hold_below holds the policy's answer; --probe_plan, --forecast_start and --suggest_slas "
            "answer a new job's start, not the policy",
            PROG,
        )
    if args.brief and (args.probe_plan or args.forecast_start or args.suggest_slas):
        fail(
            "--brief shortens the policy's answer; --probe_plan, --forecast_start and --suggest_slas "
            "answer a new job's start",
            PROG,
        )
    if _new_job_flags(args) > 1:
        fail(
            "--history, --probe_plan, --forecast_start and --suggest_slas answer a new job: ask for one", PROG
        )


def _answer_one_job(args: argparse.Namespace) -> int:
    """``--job``: the answer for one job (the policy's, or a new job's start), printed as JSON."""
    data = read_job(args.job)
    from slamorl_jax.json_input import MAX_VALUE
    from slamorl_jax.live_job import LiveJob
    from slamorl_jax.live_slas import SUGGESTIBLE

    # Left out: absent or null (null leaves out any optional field, as everywhere in a job).
    left_out = [name for name in SUGGESTIBLE if isinstance(data, dict) and data.get(name) is None]
    if args.suggest_slas and isinstance(data, dict) and not left_out:  # it answered "suggested: []"
        fail(
            f"--suggest_slas: the job gives every SLA it suggests ({', '.join(SUGGESTIBLE)}); leave out "
            "(or set to null) the ones to suggest, or ask --forecast_start for its first allocation",
            PROG,
        )
    if args.suggest_slas:  # a placeholder the suggestion replaces, so the job validates as usual
        data = {**data, **{name: MAX_VALUE for name in left_out}}
    elif args.probe_plan:  # the plan reads no deadline or budget: a job with none yet may ask
        left_out = [name for name in left_out if name in LiveJob.required_fields()]
        data = {**data, **{name: MAX_VALUE for name in left_out}}
    try:
        job = LiveJob.from_dict(data)
    except ValueError as err:
        # The hint only where --suggest_slas would fill every missing field.
        missing = LiveJob.missing_fields(data) if isinstance(data, dict) else []
        hint = not args.suggest_slas and missing and set(missing) <= set(SUGGESTIBLE)
        fail(f"{err}; --suggest_slas suggests them for a new job" if hint else str(err), PROG)
    policy = load_checkpoint(args)
    from slamorl_jax.live import recommend

    indent = None if args.compact else 2
    records = read_history(args.history, policy) if args.history is not None else None
    new_job = job.epochs_done == 0
    policy_only = (("--hold_below", args.hold_below > 0, "holds"), ("--brief", args.brief, "shortens"))
    for flag, given, does in policy_only:
        if given and records is not None and new_job:  # a running job's answer is the policy's
            fail(
                f"{flag} {does} the policy's answer; --history answers a new job's start, not the policy",
                PROG,
            )
    if args.suggest_slas:
        print(json.dumps(sla_suggestion(policy, job, left_out, args.sla_confidence), indent=indent))
        return 0
    if (records is not None and new_job) or args.probe_plan or args.forecast_start:
        start = first_allocation(policy, job, records, args.forecast_start)
        warn_of_a_far_record(start)
        if args.probe_plan and left_out:
            start["then"] += f"; leave out {', '.join(left_out)} again and ask --suggest_slas for them"
        print(json.dumps(start, indent=indent))
        return 0
    if records is not None:  # the policy's answer, as for any running job: said, not silent
        print(
            f"{PROG}: note: --history gives a job's first allocation; this job has run "
            f"{job.epochs_done} epoch(s), so the answer is the policy's",
            file=sys.stderr,
        )
    try:
        answer = recommend(policy, job)
    except ValueError as err:
        fail(str(err), PROG)
    if answer.outside_training:
        notes = "; ".join(answer.outside_training)
        print(f"{PROG}: warning: outside what the policy was trained on: {notes}", file=sys.stderr)
    print(json.dumps(answer.as_dict(args.brief), indent=indent))
    return 0


def read_history(path: str, policy: LoadedPolicy) -> list:
    """The records of the ``--history`` store, every best allocation in ``policy``'s cluster (exit 2
    with one line when it cannot be used, as ``python -m slamorl_jax.history check`` refuses it)."""
    from slamorl_jax.history.records import load_records

    try:
        return load_records(path, policy.catalog, cluster=policy.env_params)
    except ValueError as err:
        fail(f"--history: {err}", PROG)
    return []  # unreachable


def first_allocation(
    policy: LoadedPolicy, job: LiveJob, records: list | None, forecast: bool = False
) -> dict:
    """The answer for a job with no epochs: the forecast's first choice (``forecast``), the nearest
    of ``records``, or (neither) the probe plan (exit 2 on bad input)."""
    from slamorl_jax.live_start import forecast_first_allocation, history_first_allocation, probe_plan

    try:
        params, catalog = policy.env_params, policy.catalog
        if forecast:
            return forecast_first_allocation(job, params, catalog)
        if records is None:
            return probe_plan(job, params, catalog)
        return history_first_allocation(job, records, params, catalog).as_dict()
    except ValueError as err:
        fail(str(err), PROG)
    return {}  # unreachable


def sla_suggestion(policy: LoadedPolicy, job: LiveJob, left_out: list[str], confidence: float | None) -> dict:
    """``live_slas.suggested_slas`` for the SLAs ``left_out`` of ``job`` (exit 2 on bad input)."""
    from slamorl_jax.live_slas import suggested_slas

    try:
        return suggested_slas(job, policy.env_params, left_out, confidence, policy.catalog)
    except ValueError as err:
        fail(str(err), PROG)
    return {}  # unreachable


def run() -> None:
    """Console-script entry point."""
    run_command(main, PROG)


if __name__ == "__main__":
    run()
