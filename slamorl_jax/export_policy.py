"""Export a run's policy for downstream use: ``python -m slamorl_jax.export_policy SOURCE DESTINATION``.

SOURCE is a run's checkpoint directory (its latest step is taken) or one step directory;
DESTINATION must be empty or new. The export holds the network parameters and the run's config,
which is all ``slamorl_jax.load_policy`` needs.
"""

from __future__ import annotations

import slamorl_jax.cli_start  # first of ours: a quiet Ctrl-C while JAX loads
from slamorl_jax.cli_args import OneLineArgumentParser, cleanup_on_interrupt, fail, run_command

PROG = slamorl_jax.cli_start.program_name("slamorl_jax.export_policy")  # as started: -m or its script


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, export, print the new step directory; exit code 2 on bad input."""
    parser = OneLineArgumentParser(prog=PROG, description=__doc__)
    parser.add_argument("source", help="checkpoint directory of a run, or one of its step directories")
    parser.add_argument("destination", help="new or empty directory for the exported policy")
    args = parser.parse_args(argv)
    slamorl_jax.cli_start.require_backend()  # a platform the machine lacks: one line, before loading
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.policy_checkpoint import export_policy
    from slamorl_jax.run_dirs import new_folder_undo

    # Stopped between its save and printing it, the command removes the export: it leaves none that
    # it did not announce (a save stopped half-way leaves nothing by itself; policy_checkpoint.py).
    undo, saved = new_folder_undo(args.destination), []
    with cleanup_on_interrupt(lambda: saved and undo()):
        try:
            path = export_policy(args.source, args.destination)
        except CheckpointError as err:
            fail(str(err), PROG)
        except OSError as err:
            fail(f"cannot write {args.destination!r}: {err.strerror or err}", PROG)
        saved.append(path)
        print(path, flush=True)
    return 0


def run() -> None:
    """Console entry point: Ctrl-C and unexpected errors end in one line (``cli_args.run_command``)."""
    run_command(main, PROG)


if __name__ == "__main__":
    run()
