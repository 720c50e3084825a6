"""How the package's commands start: which processes count as a command, a machine without the
platform asked for, and help that is asked for."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from absl import app
from learner_fixtures import REPO_ROOT

from slamorl_jax import cli_start, train


@pytest.mark.parametrize(
    ("main_spec", "argv0", "expected"),
    [
        ("slamorl_jax.train", "train.py", "slamorl_jax.train"),
        ("slamorl_jax.history.__main__", "__main__.py", "slamorl_jax.history"),  # python -m <package>
        ("slamorl_jax.export_policy", "export_policy.py", "slamorl_jax.export_policy"),
        (None, "/usr/bin/slamorl-imitate", "slamorl-imitate"),
        (None, "/venv/bin/slamorl-export-policy", "slamorl-export-policy"),
        ("slamorl_jax.env.feasibility", "feasibility.py", "slamorl_jax.env.feasibility"),  # a tool
        ("benchmarks.oracle_bounds", "oracle_bounds.py", "benchmarks.oracle_bounds"),
        (None, "benchmarks/oracle_bounds.py", "benchmarks.oracle_bounds"),  # python benchmarks/X.py
        ("slamorl_jax.checkpoint", "checkpoint.py", None),  # a module, not a command
        (None, "pytest", None),
    ],
)
def test_a_command_is_known_by_its_module_or_script(
    monkeypatch: pytest.MonkeyPatch, main_spec: str | None, argv0: str, expected: str | None
) -> None:
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name=main_spec) if main_spec else None  # type: ignore[assignment]
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", [argv0])
    assert cli_start.launched_command() == expected


@pytest.mark.parametrize(
    ("orig_argv", "expected"),
    [
        (["python", "-m", "slamorl_jax.env.feasibility", "--num-jobs=4"], "slamorl_jax.env.feasibility"),
        (["python", "-X", "dev", "-W", "error", "-mbenchmarks.oracle_bounds"], "benchmarks.oracle_bounds"),
        (["python", "-u", "train.py", "-m", "x"], None),  # a script's own arguments
        (["python", "-c", "pass", "-m", "x"], None),
        (["python", "-Im", "slamorl_jax.env.feasibility"], "slamorl_jax.env.feasibility"),  # -I -m
        (["python", "-Wmodule", "-m", "benchmarks.oracle_bounds"], "benchmarks.oracle_bounds"),
        (["python", "--check-hash-based-pycs", "never", "-m", "x"], None),  # its value reads as a script
        (["python"], None),
    ],
)
def test_the_module_run_with_dash_m_is_read_from_the_command_line(
    orig_argv: list[str], expected: str | None
) -> None:
    """While ``python -m a.b.c`` imports its packages, ``__main__`` has no spec: the command line tells."""
    assert cli_start.module_after_dash_m(orig_argv) == expected


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("slamorl_jax.env.feasibility", ["--num-jobs=8"]),  # its package's gymnax import computes arrays
        ("slamorl_jax.calibration", ["--output=calibrated.json"]),
        ("benchmarks.oracle_bounds", ["--episodes=8"]),  # every benchmark checks in benchmarks.common
        ("slamorl_jax.train", ["--help"]),  # its imports compute arrays: checked before them
        ("slamorl_jax.history", ["check", "--store=missing.json"]),  # a package: its __init__ first
        ("slamorl_jax.recommend", ["--job=missing.json"]),  # imports JAX only once the flags parsed
        ("slamorl_jax.export_policy", ["checkpoints/default", "exported"]),
    ],
)
def test_a_platform_the_machine_lacks_is_one_line_and_status_2(
    tmp_path: Path, module: str, args: list[str]
) -> None:
    """``JAX_PLATFORMS=gpu`` on a CPU-only machine (or a broken CUDA install): one line naming the
    backend, status 2, nothing written, instead of a 60-line traceback of the first import that
    touched a device."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path, "JAX_PLATFORMS": "no_such_platform"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = f"exit {result.returncode}\n{result.stderr[-3000:]}"
    assert result.returncode == 2, report
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, report
    assert "JAX cannot start its backend" in result.stderr, report
    assert "JAX_PLATFORMS=no_such_platform asks for it; unset JAX_PLATFORMS" in result.stderr, report
    assert not any(tmp_path.iterdir()), report


@pytest.mark.parametrize("flag", ["-h", "--help", "--helpfull"])
def test_train_help_is_status_0_and_h_is_help(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """absl ends its help flags with status 1 and knows no ``-h``: asked-for help is a success."""
    app.define_help_flags()  # what app.run does before it parses
    with pytest.raises(SystemExit) as ended:
        train.parse_flags(["slamorl_jax.train", flag])
    assert ended.value.code == 0
    assert "USAGE" in capsys.readouterr().out


def test_train_h_after_a_double_dash_is_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """Past ``--`` every argument is positional, ``-h`` included (train then refuses it as one)."""
    assert train.parse_flags(["slamorl_jax.train", "--", "-h"])[-1] == "-h"


def _first_non_stdlib_import(path: Path) -> str:
    """The module the first top-level import of ``path`` that is not the standard library's names."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names = (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level == 0
            else []
        )
        for name in names:
            if name != "__future__" and name.split(".")[0] not in sys.stdlib_module_names:
                return name
    return ""


@pytest.mark.parametrize(
    "module", [*(f"slamorl_jax.{c}" for c in cli_start.COMMANDS), *cli_start.TOOL_MODULES]
)
def test_every_command_installs_its_signal_handlers_before_a_heavy_import(module: str) -> None:
    """``job_spread`` imported JAX and NumPy before ``cli_start``: a Ctrl-C in its first second was
    swallowed by a garbage-collection callback (the table printed, status 0) or a traceback."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    path = Path(spec.origin)
    if path.name == "__init__.py":  # a package run with -m runs its __main__
        path = path.with_name("__main__.py")
    if module.startswith("slamorl_jax.env."):  # its package's __init__ runs first, and starts so
        path = path.with_name("__init__.py")
    first = _first_non_stdlib_import(path)
    assert first in ("slamorl_jax.cli_start", "absl"), (path, first)  # absl's flags load no array library


def test_every_package_command_has_its_console_script() -> None:
    """The README's package commands are train, evaluate, recommend, imitate, history and
    export_policy; pyproject.toml installed scripts for the first four only."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {cli_start.console_script(command) for command in cli_start.COMMANDS}
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target


def test_the_console_scripts_help_lists_trains_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """``slamorl-train --help`` printed a usage line and no flag: absl lists the main module's
    flags, and a console script's main module is pip's wrapper."""
    wrapper = types.ModuleType("__main__")  # pip's wrapper: no docstring, no flags
    monkeypatch.setitem(sys.modules, "__main__", wrapper)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/slamorl-train-under-test"])
    assert "--num_envs" not in train.FLAGS.main_module_help()
    train.help_as_main_module()
    assert "--num_envs" in train.FLAGS.main_module_help() and "--run_dir" in train.FLAGS.main_module_help()
    assert wrapper.__doc__ == train.__doc__


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [("/venv/bin/slamorl-evaluate", "slamorl-evaluate"), ("pytest", "python -m slamorl_jax.evaluate")],
)
def test_a_command_names_itself_as_it_was_started(
    monkeypatch: pytest.MonkeyPatch, argv0: str, expected: str
) -> None:
    """A console script said ``python -m slamorl_jax.evaluate: error:``, and its interrupt line
    changed name mid-run (the script's before the imports, ``python -m ...`` after)."""
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    monkeypatch.setattr(sys, "argv", [argv0])
    assert cli_start.program_name("slamorl_jax.evaluate") == expected
