"""The next allocation for a running job: ``python -m slamorl_jax.recommend --job=job.json``.

Reads the job's state after its latest epoch as JSON (a file, or ``-`` for standard input; fields
in :mod:`slamorl_jax.live`), runs the policy of ``--checkpoint`` (default: the shipped
``checkpoints/default``) and prints a JSON object: the recommended ``gpus`` and ``cpus``, the
change, the action and its probability, the adaptive weights, the SLA severities and the
observation it was based on. Bad input exits with code 2 and one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import slamorl_jax.cli_start  # noqa: F401  (first of ours: a quiet Ctrl-C while JAX loads)
from slamorl_jax.cli_args import OneLineArgumentParser, fail, run_command

PROG = "python -m slamorl_jax.recommend"
DEFAULT_CHECKPOINT = "checkpoints/default"


def read_job(source: str) -> dict:
    """The JSON object in file ``source`` (``-``: standard input); exits 2 when it cannot be read."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
        return json.loads(text)
    except OSError as err:
        fail(f"cannot read --job {source!r}: {err.strerror or err}", PROG)
    except json.JSONDecodeError as err:
        fail(f"--job {source!r} is not valid JSON: {err.msg} (line {err.lineno})", PROG)
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
    if not Path(args.checkpoint).exists():
        fail(f"--checkpoint {args.checkpoint!r} does not exist", PROG)
    from slamorl_jax.checkpoint import CheckpointError, load_policy
    from slamorl_jax.live import recommend

    try:
        policy = load_policy(args.checkpoint)
    except CheckpointError as err:
        fail(str(err), PROG)
    print(json.dumps(recommend(policy, job).as_dict(), indent=2))
    return 0


def run() -> None:
    """Console-script entry point."""
    run_command(main, PROG)


if __name__ == "__main__":
    run()
