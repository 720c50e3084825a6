"""The shared command runner (``slamorl_jax.cli_args.run_command``): how a command ends."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from slamorl_jax.cli_args import (
    MAX_MESSAGE_CHARS,
    STOP_SIGNALS,
    OneLineArgumentParser,
    fail,
    run_command,
    summary,
)


@pytest.fixture(autouse=True)
def _keep_signal_handlers() -> object:
    """``run_command`` installs its stop-signal handlers: give the test process its own back."""
    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def _ends(main: object, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ended:
        run_command(main, "prog")
    return ended.value.code, capsys.readouterr().err


def test_a_reader_that_stops_early_ends_the_command_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    """Output piped to ``head``: status 141, as a SIGPIPE would end it, and nothing on stderr."""

    def main() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    assert _ends(main, capsys) == (128 + signal.SIGPIPE, "")


def test_an_unexpected_error_is_one_line_with_status_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLAMORL_JAX_TRACEBACK", raising=False)

    def main() -> int:
        raise KeyError("boom")

    code, err = _ends(main, capsys)
    assert code == 1 and err.count("\n") == 1 and "unexpected KeyError" in err


def test_a_commands_status_is_its_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert _ends(lambda: 2, capsys) == (2, "")


@pytest.mark.parametrize(
    ("flag", "phrase"),
    [
        ("--num-jobs=100000000000", "--num-jobs: must be in [1, 10,000,000]"),
        ("--seed=-1", "[0, 2,147,483,647]"),
    ],
)
def test_the_feasibility_table_refuses_counts_it_cannot_draw(
    flag: str, phrase: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bounded integer flag names its range in digits, in one line, before any job is drawn."""
    from slamorl_jax.env.feasibility import main

    with pytest.raises(SystemExit) as ended:
        main([flag])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and phrase in err and len(err.strip().splitlines()) == 1, err


def test_a_commands_summary_survives_stripped_docstrings() -> None:
    """``python -OO`` strips docstrings; the commands' ``--help`` crashed reading ``None``'s first line."""
    assert summary("Train a policy.\n\nMore.") == "Train a policy."
    assert summary("\n  Leading blank line.\n") == "Leading blank line."
    assert summary(None) is None and summary("  ") is None
    root = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-OO", "-m", "slamorl_jax.history", "--help"]
    run = subprocess.run(command, cwd=root, capture_output=True, text=True)
    assert run.returncode == 0 and "usage:" in run.stdout, run.stderr


def test_a_refusal_that_echoes_a_line_break_stays_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A path holding a newline (``export_policy $'no\\nsuch' out``) split the error over two lines."""
    with pytest.raises(SystemExit) as ended:
        fail("checkpoint path no\nsuch\r does not exist", "prog")
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err == "prog: error: checkpoint path no\\nsuch\\r does not exist\n"
    with pytest.raises(SystemExit):
        fail("x" * (MAX_MESSAGE_CHARS + 5), "prog")
    assert capsys.readouterr().err.endswith("... (5 more characters)\n")


def test_help_shows_each_default_once() -> None:
    """``evaluate --front_scenario``, ``history build --jobs`` and others left their default out of
    ``--help``: every option shows it once (where its help says none), and switches and options
    without one show none."""
    parser = OneLineArgumentParser(prog="x")
    parser.add_argument("--jobs", type=int, default=4096, help="jobs to record")
    parser.add_argument("--seeds", type=int, default=3, help="batches (default 3)")
    parser.add_argument("--rate", type=float, default=0.0, help="a rate")
    parser.add_argument("--store", default=None, help="a store")
    parser.add_argument("--names", default=[], help="names")
    parser.add_argument("--overwrite", action="store_true", help="replace")
    parser.add_argument("--devices", default=[1, 2, 8], help="device counts")
    parser.add_argument("--sizes", nargs="+", default=[[64, 64], [128, 128]], help="networks")
    parser.add_argument("--envs", default=[1, 64], help="batch sizes (default: %(default)s; more)")
    text = " ".join(parser.format_help().split())
    assert "batch sizes (default: 1,64; more)" in text
    assert "jobs to record (default: 4096)" in text and "a rate (default: 0.0)" in text
    # A list as the flag takes it (it refused "[1, 2, 8]"), one argument an item with nargs.
    assert "device counts (default: 1,2,8)" in text and "networks (default: 64,64 128,128)" in text
    assert text.count("default") == 6 and "batches (default 3)" in text


def test_every_option_of_every_command_has_help() -> None:
    """An option without help showed neither what it does nor its default in ``--help`` (17 of the
    benchmarks' did). Read from the source: every ``add_argument`` call passes ``help``."""
    import ast

    root = Path(__file__).resolve().parent.parent
    bare = []
    for path in [*(root / "slamorl_jax").rglob("*.py"), *(root / "benchmarks").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if call and node.func.attr == "add_argument" and "help" not in {k.arg for k in node.keywords}:
                bare.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not bare, bare
