"""Command line of the calibration.

``python -m slamorl_jax.calibration [--data-dir DIR] [--output PATH.json [--overwrite]] [--markdown]``.

Runs every fit on the vendored measurements, writes the calibrated-workloads JSON atomically and
prints a fit-quality table. Without ``--output`` it rewrites the package's own JSON (what the
command is for); an ``--output`` the user names must end in ``.json`` and is a new file unless
``--overwrite`` (so ``--output=docs/calibration.md`` beside ``--markdown`` replaces no page). Bad
input is one line on stderr and exit status 2, found before any fit runs where it can be: an
``--output`` that could not be written (its folder must exist: none is made), a ``--data-dir`` that
lacks a file the fits read or holds one they cannot use. A refused or failed run leaves an existing
``--output`` as it was.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slamorl_jax.cli_start import program_name, require_backend  # first of ours: quiet Ctrl-C

# ruff: noqa: I001  (the signal handlers first, then the loaders' NumPy)
from slamorl_jax.atomic_files import probe_writable, write_new_text_atomically
from slamorl_jax.calibration import loaders
from slamorl_jax.calibration.loaders import DEFAULT_OUTPUT
from slamorl_jax.cli_args import OneLineArgumentParser, fail, first_line, run_command

if TYPE_CHECKING:  # build imports JAX and SciPy: main imports it once the arguments are checked
    from slamorl_jax.calibration.build import Report

PROG = program_name("slamorl_jax.calibration")  # as started: -m or its script
#: What a loader raises on a file it cannot use (``json.JSONDecodeError`` is a ``ValueError``).
LOAD_ERRORS = (ValueError, KeyError, TypeError, IndexError, AttributeError, SyntaxError, csv.Error, OSError)
#: What the fits raise on data they cannot fit.
FIT_ERRORS = (ValueError, KeyError, IndexError, ArithmeticError, csv.Error, OSError)


#: Each loader, after the files it reads (relative to ``--data-dir``), to name them when it fails.
LOADERS: tuple[tuple[tuple[str, ...], Callable[[Path], object]], ...] = (
    (("synergy-osdi22/cpu_mem_sensitivity.csv",), loaders.load_synergy_cpu_profiles),
    ((loaders.AWS_PRICE_FILE.as_posix(),), loaders.load_aws_prices),
    (("alibaba-gpu-v2023/openb_pod_list_default.csv",), loaders.load_alibaba_cpus_per_gpu),
    (("gavel-osdi20/simulation_throughputs.json",), loaders.load_gavel_isolated),
    (("pollux-osdi21/traces/philly.csv",), loaders.load_philly_num_gpus),
    (("pollux-osdi21/workloads/workload-*.csv",), loaders.load_pollux_requested_replicas),
    *(
        (tuple(f"pollux-osdi21/traces/{app}/{name}" for name in names), partial(load, app))
        for app in loaders.POLLUX_APPS
        for names, load in (
            (("placements.csv", "scalability.csv"), loaders.load_pollux_step_times),
            (("validation-*.csv",), loaders.load_pollux_validation),
        )
    ),
)


def parser() -> OneLineArgumentParser:
    """The command line."""
    p = OneLineArgumentParser(
        prog=PROG,
        description="Fit the simulator's workload parameters to the vendored measurements.",
    )
    p.add_argument(
        "--data-dir",
        default=str(loaders.DEFAULT_DATA_DIR),
        help="folder with the vendored data (default: the copy inside the package)",
    )
    p.add_argument(
        "--output",
        default=None,
        help="where to write the JSON (a new .json file in an existing folder; "
        "default: rewrite slamorl_jax/env/calibrated_workloads.json)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.add_argument(
        "--markdown",
        action="store_true",
        help="also print the parameter and error tables as Markdown (for docs/calibration.md)",
    )
    return p


def describe(err: BaseException) -> str:
    """One line saying what went wrong in ``err`` (a ``KeyError`` alone is just the key)."""
    if isinstance(err, KeyError) and err.args:
        return f"missing {err.args[0]!r}"
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}: {err.filename!r}" if err.filename else err.strerror
    return first_line(err)


def check_output(text: str, replace: bool = True) -> Path:
    """``--output`` as a path, after refusing (one line, exit 2) one the JSON could not be written to,
    or an existing file unless ``replace``."""
    if not text.strip():
        fail("--output is empty", PROG)
    path = Path(text)
    try:
        if text.endswith(("/", os.sep)) or path.is_dir():
            fail(f"--output {text!r} is a folder; name the JSON file to write", PROG)
        if path.exists() and not path.is_file():
            fail(f"--output {text!r} is not a regular file", PROG)
        if path.suffix.lower() != ".json":
            fail(f"--output {text!r} must name a .json file (it is written as JSON)", PROG)
        if path.exists() and not replace:
            fail(f"--output {text!r} already exists; pass --overwrite to replace it", PROG)
        if not path.parent.is_dir():
            fail(f"--output {text!r}: its folder {str(path.parent)!r} does not exist", PROG)
        probe_writable(path)
    except OSError as err:
        fail(f"cannot write --output {text!r}: {err.strerror or first_line(err)}", PROG)
    return path


def _check_loaders(data_dir: Path) -> None:
    """Refuse a ``--data-dir`` without a file a loader reads (each pattern must match one), then run
    every loader once, naming the files of one that fails (the fits reuse the results of the two
    cached loaders and read the other, small files again)."""
    for patterns, load in LOADERS:
        missing = next((pattern for pattern in patterns if not any(data_dir.glob(pattern))), None)
        if missing is not None:
            fail(f"--data-dir {str(data_dir)!r} lacks {missing}", PROG)
        try:
            load(data_dir)
        except LOAD_ERRORS as err:
            files = ", ".join(repr(str(data_dir / pattern)) for pattern in patterns)
            fail(f"cannot use data file {files}: {describe(err)}", PROG)


def check_data_dir(text: str) -> Path:
    """``--data-dir`` as a path, after refusing (one line, exit 2) one the fits could not use."""
    if not text.strip():
        fail("--data-dir is empty", PROG)
    data_dir = Path(text)
    try:
        if not data_dir.exists():
            fail(f"--data-dir {text!r} does not exist", PROG)
        if not data_dir.is_dir():
            fail(f"--data-dir {text!r} is not a folder", PROG)
    except OSError as err:
        fail(f"cannot read --data-dir {text!r}: {err.strerror or first_line(err)}", PROG)
    _check_loaders(data_dir)
    return data_dir


def run_fits(data_dir: Path) -> tuple[dict[str, Any], Report]:
    """:func:`~slamorl_jax.calibration.build.calibrate` on ``data_dir``: the JSON dict and the report;
    data the fits cannot fit (or that fit to a value JSON cannot hold) is one line and exit 2."""
    from slamorl_jax.calibration.build import calibrate, dumps

    try:
        obj, report = calibrate(data_dir)
        dumps(obj)
    except FIT_ERRORS as err:
        fail(f"the fits failed on --data-dir {str(data_dir)!r}: {describe(err)}", PROG)
    return obj, report


def save(obj: dict[str, Any], output: Path, replace: bool = True) -> None:
    """Write the JSON atomically (only as a new file unless ``replace``); a failure is one line and exit
    2, an existing file stays as it was."""
    from slamorl_jax.calibration.build import dumps, write_json

    try:
        if replace:
            write_json(obj, output)
        else:
            write_new_text_atomically(output, dumps(obj))
    except FileExistsError:
        fail(f"--output {str(output)!r} was created while the fits ran; pass --overwrite to replace it", PROG)
    except OSError as err:
        fail(f"cannot write --output {str(output)!r}: {err.strerror or first_line(err)}", PROG)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, check them, calibrate, write the JSON, print the report; the exit status."""
    args = parser().parse_args(argv)
    replace = args.output is None or args.overwrite  # the package's own JSON is always rewritten
    output = check_output(str(DEFAULT_OUTPUT) if args.output is None else args.output, replace)
    data_dir = check_data_dir(args.data_dir)
    require_backend()  # a platform the machine lacks: one line and status 2, before any fit runs
    obj, report = run_fits(data_dir)
    from slamorl_jax.calibration.build import markdown_tables

    save(obj, output, replace)
    print(report.format_table())
    if args.markdown:
        print()
        print(markdown_tables(obj, report))
    print(f"\nwrote {output}")
    return 0


def run() -> None:
    """Entry point: :func:`main` under the package's quiet handling of Ctrl-C, SIGTERM and SIGPIPE."""
    run_command(main, PROG)


if __name__ == "__main__":
    run()
