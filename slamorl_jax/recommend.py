"""The next allocation for a running job: ``python -m slamorl_jax.recommend --job=job.json``.

Reads the job's state after its latest epoch as JSON (a file, or ``-`` for standard input; fields
in :mod:`slamorl_jax.live`), runs the policy of ``--checkpoint`` (default: the shipped
``checkpoints/default``) and prints a JSON object: the recommended ``gpus`` and ``cpus``, the
change, the action and its probability, the adaptive weights, the SLA severities, the
observation it was based on, and ``in_training_range`` with ``outside_training``: the readings that
lie outside what the policy was trained on (also one ``warning:`` line on stderr), if any. Bad input
(unreadable or non-UTF-8 files, bad JSON, bad or huge values, an allocation outside the policy's
cluster, a finished job, a damaged checkpoint) exits with code 2 and one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import slamorl_jax.cli_start  # noqa: F401  (first of ours: a quiet Ctrl-C while JAX loads)
from slamorl_jax.cli_args import OneLineArgumentParser, fail, run_command
from slamorl_jax.run_dirs import path_exists

PROG = "python -m slamorl_jax.recommend"
DEFAULT_CHECKPOINT = "checkpoints/default"


def read_job(source: str) -> dict:
    """The JSON object in file ``source`` (``-``: standard input); exits 2 when it cannot be read."""
    try:
        if source == "-":
            stream = getattr(sys.stdin, "buffer", None)
            data = (
                stream.read() if stream is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
            )
        else:
            data = Path(source).read_bytes()
    except (OSError, ValueError) as err:  # missing, a directory, unreadable, a NUL byte in the path
        fail(f"cannot read --job {source!r}: {getattr(err, 'strerror', None) or err}", PROG)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        fail(f"--job {source!r} is not UTF-8 text (byte {err.start})", PROG)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        fail(f"--job {source!r} is not valid JSON: {err.msg} (line {err.lineno})", PROG)
    except RecursionError:
        fail(f"--job {source!r} is nested too deeply to be a job", PROG)
    return {}  # unreachable


def main(argv: list[str] | None = None) -> int:
    """Parse, validate, recommend, print JSON; the exit status."""
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="job state as JSON: a file path, or - for stdin")
    parser.add_argument(
        "--checkpoint", default=DEFAULT_CHECKPOINT, help="policy checkpoint (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    data = read_job(args.job)
    from slamorl_jax.live import LiveJob

    try:
        job = LiveJob.from_dict(data)
    except ValueError as err:
        fail(str(err), PROG)
    if not path_exists(args.checkpoint):
        fail(f"--checkpoint {args.checkpoint!r} does not exist", PROG)
    from slamorl_jax.checkpoint import CheckpointError, load_policy
    from slamorl_jax.live import recommend

    try:
        policy = load_policy(args.checkpoint)
    except CheckpointError as err:
        fail(str(err), PROG)
    try:
        answer = recommend(policy, job)
    except ValueError as err:
        fail(str(err), PROG)
    if answer.outside_training:
        notes = "; ".join(answer.outside_training)
        print(f"{PROG}: warning: outside what the policy was trained on: {notes}", file=sys.stderr)
    print(json.dumps(answer.as_dict(), indent=2))
    return 0


def run() -> None:
    """Console-script entry point."""
    run_command(main, PROG)


if __name__ == "__main__":
    run()
