"""Ctrl-C and SIGTERM while a command starts up or compiles: status 128 + signal, one line, no
traceback, and none of the run's new directories left behind (issue 11, row 5).

These need a real process (the signal, the interpreter's own reporting); the run compiles without a
cache so that it is still compiling when the signal comes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slamorl_jax.training_loop import diverged_message

REPO_ROOT = Path(__file__).resolve().parent.parent
SMALL = (
    "--num_envs=8",
    "--rollout_length=4",
    "--num_minibatches=1",
    "--update_epochs=1",
    "--hidden_sizes=8",
    "--eval_episodes=0",
    "--total_timesteps=64",
    "--updates_per_chunk=1",
    "--noprogress",
    "--compilation_cache_dir=",
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_compiling_exits_quietly_and_removes_the_run(tmp_path: Path, signum: int) -> None:
    run_dir = tmp_path / "run"
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    process = subprocess.Popen(
        [sys.executable, "-m", "slamorl_jax.train", *SMALL, f"--run_dir={run_dir}"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (run_dir / "logs").exists():  # created after validation, before compiling
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.5)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    report = f"exit {process.returncode}\nstdout: {stdout}\nstderr: {stderr}"
    assert process.returncode == 128 + signum, report
    assert stderr.strip().splitlines() == [f"slamorl_jax.train: interrupted ({signal.Signals(signum).name})"]
    assert not run_dir.exists(), report


def test_a_run_that_diverges_before_saving_says_so(tmp_path: Path) -> None:
    """Row 4: a first update that diverges does not claim a checkpoint is kept."""
    message = diverged_message(1, 0, tmp_path)
    assert "non-finite loss at update 1" in message and "No checkpoint had been saved yet" in message
