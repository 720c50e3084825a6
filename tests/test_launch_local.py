"""``launch/local.py``: the status it exits with, and a log folder that cannot be written stopping the
launch before any process starts (a started process ran on alone until its join timed out)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("launch_local", REPO_ROOT / "launch" / "local.py")
local = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(local)


def test_a_child_ended_by_a_signal_is_128_plus_the_signal() -> None:
    """``Popen`` says -6 for an abort; ``SystemExit(-6)`` exited 250, where the docs say 134."""
    assert [local.exit_status(code) for code in (0, 2, -6, -9)] == [0, 2, 134, 137]


def test_worker_logs_that_cannot_be_written_start_no_process(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "launch" / "local.py"), "--processes=2", f"--worker_logs={blocker}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("launch: cannot write the worker logs in")
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # and no run folder: none started


def test_the_processes_import_this_checkout_from_any_folder(tmp_path: Path, monkeypatch) -> None:
    """Started outside the repository root, a checkout that is not pip-installed failed in every
    process (``No module named 'slamorl_jax'``); the launcher imports it, so its processes do too."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    # A module of the package that runs nothing: it exits 0 exactly when the package imports (here;
    # a pip-installed package imports from anywhere, so the child's path is checked too).
    started: list[dict] = []
    real_popen = subprocess.Popen

    def popen(*args: object, **kwargs: object) -> subprocess.Popen:
        started.append(dict(kwargs["env"]))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(local.subprocess, "Popen", popen)
    assert local.launch(1, 1, [], tmp_path / "logs", module="slamorl_jax.json_output") == 0
    assert started and started[0]["PYTHONPATH"].split(os.pathsep)[0] == str(REPO_ROOT)
