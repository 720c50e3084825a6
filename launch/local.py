"""Run one multi-process training job on this machine: N processes, each with its own fake CPU devices.

    python launch/local.py --processes=2 --devices_per_process=4 -- --run_dir=runs/two --num_envs=64

Everything after ``--`` goes to ``python -m slamorl_jax.train`` in every process, with
``--coordinator_address``, ``--num_processes`` and ``--process_id`` added. Process 0's output goes
to this terminal; the others' to ``<worker_logs>/process-<i>.log`` (all opened before any process
starts). The launcher waits for every process and exits with the status of the first to fail
(``128 + N`` for one ended by signal ``N``; 0 when all succeed); Ctrl-C or SIGTERM is passed on to
every process. See ``launch/README.md``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slamorl_jax.cli_args import OneLineArgumentParser
from slamorl_jax.xla_flags import fake_cpu_devices_env

MAX_PROCESSES = 1024  # processes (or fake devices each) one machine is asked to run
REPO_ROOT = Path(__file__).resolve().parent.parent  # whose package the processes import


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def commands(processes: int, port: int, train_args: list[str], module: str) -> list[list[str]]:
    """The command line of each process."""
    common = [f"--coordinator_address=127.0.0.1:{port}", f"--num_processes={processes}"]
    return [
        [sys.executable, "-m", module, *common, f"--process_id={i}", *train_args] for i in range(processes)
    ]


def exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: ``128 + N`` for a child ended by signal ``N``
    (``Popen`` gives ``-N``, which ``SystemExit`` would turn into ``256 - N``)."""
    return 128 - returncode if returncode < 0 else returncode


def open_logs(processes: int, worker_logs: Path) -> list:
    """The log file of each process but the first, all opened before any process starts (a folder
    that cannot hold them stops the launch before a process runs on alone)."""
    worker_logs.mkdir(parents=True, exist_ok=True)
    logs = []
    try:
        for i in range(1, processes):
            logs.append((worker_logs / f"process-{i}.log").open("w"))
    except OSError:
        for log in logs:
            log.close()
        raise
    return logs


def launch(
    processes: int, devices: int, train_args: list[str], worker_logs: Path, module: str = "slamorl_jax.train"
) -> int:
    """Start the processes, wait for all of them; the status of the first to fail (in the order they
    ended), else 0. A process ended by a signal counts as ``128 +`` the signal."""
    logs = open_logs(processes, worker_logs)
    env = fake_cpu_devices_env(devices)
    # The processes import this checkout's package, as this launcher does, from any working folder
    # (a checkout that is not pip-installed is importable only from its root).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO_ROOT), env.get("PYTHONPATH"))))
    children: list[subprocess.Popen] = []
    try:
        for i, command in enumerate(commands(processes, free_port(), train_args, module)):
            log = logs[i - 1] if i else None
            children.append(
                subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT if log else None)
            )
    except BaseException:  # a process that cannot start: none of the others runs on alone
        for child in children:
            child.kill()
            child.wait()
        raise
    finally:
        for log in logs:
            log.close()  # each child holds its own copy

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    failed: list[int] = []
    running = set(range(processes))
    while running:
        for i in sorted(running):
            if children[i].poll() is not None:
                running.discard(i)
                status = exit_status(children[i].returncode)
                if status != 0:
                    failed.append(status)
                    print(f"launch: process {i} exited with status {status}", file=sys.stderr)
        time.sleep(0.2)
    return failed[0] if failed else 0


def main() -> None:
    """Parse the launcher's own options and run."""
    parser = OneLineArgumentParser(prog="launch/local.py", description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="processes to start (default 2)")
    parser.add_argument("--devices_per_process", type=int, default=1, help="fake CPU devices each")
    parser.add_argument("--worker_logs", type=Path, default=None, help="folder of processes 1..N-1's output")
    parser.add_argument("--module", default="slamorl_jax.train", help=argparse.SUPPRESS)
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="-- then the flags of slamorl_jax.train")
    args = parser.parse_args()
    if not 1 <= args.processes <= MAX_PROCESSES or not 1 <= args.devices_per_process <= MAX_PROCESSES:
        print(
            f"launch: --processes and --devices_per_process must be in [1, {MAX_PROCESSES}]", file=sys.stderr
        )
        raise SystemExit(2)
    train_args = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args
    logs = args.worker_logs
    if logs is None and args.processes > 1:
        logs = Path(tempfile.mkdtemp(prefix="slamorl-launch-"))
    if args.processes > 1:
        print(f"launch: {args.processes} processes; output of processes 1+ in {logs}", file=sys.stderr)
    try:
        status = launch(args.processes, args.devices_per_process, train_args, logs or Path("."), args.module)
    except OSError as err:
        print(
            f"launch: cannot write the worker logs in {str(logs)!r}: {err.strerror or err}",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    raise SystemExit(status)


if __name__ == "__main__":
    main()
