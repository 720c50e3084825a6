"""Command line of the calibration.

``python -m slamorl_jax.calibration [--data-dir DIR] [--output PATH] [--markdown]``.

Runs every fit on the vendored measurements, writes the calibrated-workloads JSON atomically and
prints a fit-quality table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from slamorl_jax.calibration.build import DEFAULT_OUTPUT, calibrate, markdown_tables, write_json
from slamorl_jax.calibration.loaders import DEFAULT_DATA_DIR


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, calibrate, write the JSON, print the report."""
    parser = argparse.ArgumentParser(
        prog="python -m slamorl_jax.calibration",
        description="Fit the simulator's workload parameters to the vendored measurements.",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="folder with the vendored data (default: the copy inside the package)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help="where to write the JSON (default: slamorl_jax/env/calibrated_workloads.json)",
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="also print the parameter and error tables as Markdown (for docs/calibration.md)",
    )
    args = parser.parse_args(argv)
    obj, report = calibrate(args.data_dir)
    write_json(obj, args.output)
    print(report.format_table())
    if args.markdown:
        print()
        print(markdown_tables(obj, report))
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
