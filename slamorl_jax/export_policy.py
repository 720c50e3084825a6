"""Export a run's policy for downstream use: ``python -m slamorl_jax.export_policy SOURCE DESTINATION``.

SOURCE is a run's checkpoint directory (its latest step is taken) or one step directory;
DESTINATION must be empty or new. The export holds the network parameters and the run's config,
which is all ``slamorl_jax.load_policy`` needs.
"""

from __future__ import annotations

import sys

from slamorl_jax.cli_args import OneLineArgumentParser, fail

PROG = "python -m slamorl_jax.export_policy"


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, export, print the new step directory; exit code 2 on bad input."""
    parser = OneLineArgumentParser(prog=PROG, description=__doc__)
    parser.add_argument("source", help="checkpoint directory of a run, or one of its step directories")
    parser.add_argument("destination", help="new or empty directory for the exported policy")
    args = parser.parse_args(argv)
    from slamorl_jax.checkpoint import CheckpointError, export_policy

    try:
        path = export_policy(args.source, args.destination)
    except CheckpointError as err:
        fail(str(err), PROG)
    except OSError as err:
        fail(f"cannot write {args.destination!r}: {err.strerror or err}", PROG)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
