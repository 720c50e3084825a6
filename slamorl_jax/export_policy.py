"""Export a run's policy for downstream use: ``python -m slamorl_jax.export_policy SOURCE DESTINATION``.

SOURCE is a run's checkpoint directory (its latest step is taken) or one step directory;
DESTINATION must be empty or new. The export holds the network parameters and the run's config,
which is all ``slamorl_jax.load_policy`` needs.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, export, print the new step directory; exit code 2 on bad input."""
    parser = argparse.ArgumentParser(prog="python -m slamorl_jax.export_policy", description=__doc__)
    parser.add_argument("source", help="checkpoint directory of a run, or one of its step directories")
    parser.add_argument("destination", help="new or empty directory for the exported policy")
    args = parser.parse_args(argv)
    from slamorl_jax.checkpoint import CheckpointError, export_policy

    try:
        path = export_policy(args.source, args.destination)
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
