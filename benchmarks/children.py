"""Benchmarks that measure in child processes: a child killed with its parent (:func:`run_child`),
one per device count with fake CPU devices (:func:`run_in_child`), and the two sides of such a
benchmark (:func:`child_or_report`)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, add_out_flags, check_report_flags, in_own_flags, report
from slamorl_jax.cli_args import cleanup_on_interrupt, fail


def run_child(
    command: Sequence[str],
    *,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    text: bool = False,
    **popen_kwargs: Any,
) -> subprocess.CompletedProcess:
    """``subprocess.run`` whose child ends with this process: a stop signal (Ctrl-C, SIGTERM, SIGHUP)
    that ends the benchmark kills the child too (``cleanup_on_interrupt``), where ``subprocess.run``
    left it running on its own, and a ``timeout`` kills it as ``subprocess.run``'s does."""
    pipe = subprocess.PIPE if capture_output else None
    process = subprocess.Popen(command, stdout=pipe, stderr=pipe, text=text, **popen_kwargs)
    with process, cleanup_on_interrupt(process.kill):
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    done = subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


def run_in_child(module: str, devices: int, flags: Sequence[str], timeout_s: float = 1800) -> dict[str, Any]:
    """``python -m <module> --child <flags>`` in a process with ``devices`` fake CPU devices (the
    caller's other XLA flags kept): the last JSON line it prints, or ``{"devices", "error"}`` with the
    last line of its stderr (or that it ran past ``timeout_s``, the rows measured before it kept)."""
    from slamorl_jax.xla_flags import fake_cpu_devices_env

    try:
        done = run_child(
            [sys.executable, "-m", module, "--child", *flags],
            cwd=REPO_ROOT,
            env=fake_cpu_devices_env(devices),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"devices": devices, "error": f"timed out after {timeout_s:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"devices": devices, "error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def child_or_report(
    parser: argparse.ArgumentParser,
    argv: list[str] | None,
    default_out: Path,
    measure: Callable[[argparse.Namespace], dict[str, Any]],
    run: Callable[[argparse.Namespace], dict[str, Any]],
    to_markdown: Callable[[dict[str, Any]], str],
) -> None:
    """The two sides of a benchmark that measures in child processes (:func:`run_in_child`): adds
    the hidden ``--child`` flag, and ``--out`` and ``--overwrite`` as :func:`parse_and_report` does;
    parses ``argv``. A child prints ``measure(args)`` as one JSON line; the parent checks ``--out`` and
    every device count against ``--num-envs`` (the batch splits evenly over each, or no child starts)
    and reports."""
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_out_flags(parser, default_out)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args)), flush=True)
        return
    check_batches_split(getattr(args, "devices", ()), [args.num_envs], parser.prog)
    check_report_flags(args, parser.prog)
    report(args, run, to_markdown, parser.prog)


def check_batches_split(
    device_counts: Sequence[int | str],
    batches: Sequence[int],
    prog: str,
    renamed: dict[str, str] | None = None,
) -> None:
    """Exit 2 with one line unless every batch of ``batches`` envs splits evenly over every count
    of ``device_counts`` (``native``, the machine's own devices, is not known before its child
    starts), so no child is started for a row that can only fail."""
    from slamorl_jax.sharding import check_divisible

    for devices in (count for count in device_counts if isinstance(count, int)):
        for num_envs in batches:
            try:
                check_divisible(num_envs, devices)
            except ValueError as error:
                fail(f"--devices {devices}: {in_own_flags(str(error), renamed)}", prog)
