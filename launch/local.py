"""Run one multi-process training job on this machine: N processes, each with its own fake CPU devices.

    python launch/local.py --processes=2 --devices_per_process=4 -- --run_dir=runs/two --num_envs=64

Everything after ``--`` goes to ``python -m slamorl_jax.train`` in every process, with
``--coordinator_address``, ``--num_processes`` and ``--process_id`` added. Process 0's output goes
to this terminal; the others' to ``<worker_logs>/process-<i>.log``. The launcher waits for every
process and exits with the first non-zero status (0 when all succeed); Ctrl-C or SIGTERM is passed
on to every process. See ``launch/README.md``.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slamorl_jax.xla_flags import fake_cpu_devices_env


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


def launch(
    processes: int, devices: int, train_args: list[str], worker_logs: Path, module: str = "slamorl_jax.train"
) -> int:
    """Start the processes, wait for all of them; the first non-zero exit status, else 0."""
    worker_logs.mkdir(parents=True, exist_ok=True)
    env = fake_cpu_devices_env(devices)
    children: list[subprocess.Popen] = []
    for i, command in enumerate(commands(processes, free_port(), train_args, module)):
        if i == 0:
            children.append(subprocess.Popen(command, env=env))
        else:
            with (worker_logs / f"process-{i}.log").open("w") as log:
                children.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    codes: dict[int, int] = {}
    while len(codes) < processes:
        for i, child in enumerate(children):
            if i not in codes and child.poll() is not None:
                codes[i] = child.returncode
                if child.returncode != 0:
                    print(f"launch: process {i} exited with status {child.returncode}", file=sys.stderr)
        time.sleep(0.2)
    failed = [code for _, code in sorted(codes.items()) if code != 0]
    return failed[0] if failed else 0


def main() -> None:
    """Parse the launcher's own options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="processes to start (default 2)")
    parser.add_argument("--devices_per_process", type=int, default=1, help="fake CPU devices each")
    parser.add_argument("--worker_logs", type=Path, default=None, help="folder of processes 1..N-1's output")
    parser.add_argument("--module", default="slamorl_jax.train", help=argparse.SUPPRESS)
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="-- then the flags of slamorl_jax.train")
    args = parser.parse_args()
    if args.processes < 1 or args.devices_per_process < 1:
        print("launch: --processes and --devices_per_process must be >= 1", file=sys.stderr)
        raise SystemExit(2)
    train_args = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args
    logs = args.worker_logs or Path(tempfile.mkdtemp(prefix="slamorl-launch-"))
    if args.processes > 1:
        print(f"launch: {args.processes} processes; output of processes 1+ in {logs}", file=sys.stderr)
    raise SystemExit(launch(args.processes, args.devices_per_process, train_args, logs, args.module))


if __name__ == "__main__":
    main()
