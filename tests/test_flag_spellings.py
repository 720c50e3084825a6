"""Every command takes a flag in either spelling, ``--hold_below`` or ``--hold-below``
(``cli_args.respelled``): the package's commands spell flags with ``_``, most benchmarks with ``-``,
and train's absl flags take the dashed form too."""

from __future__ import annotations

import sys

import pytest

from slamorl_jax import evaluate, train
from slamorl_jax.cli_args import OneLineArgumentParser, respelled, respelled_argv
from slamorl_jax.history import __main__ as history_cli

KNOWN = {"--hold_below", "--front-points", "-x"}


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("--hold-below=0.2", "--hold_below=0.2"),
        ("--hold_below", "--hold_below"),
        ("--front_points=a_b-c", "--front-points=a_b-c"),  # the value is kept as given
        ("--no-such-flag", "--no-such-flag"),  # known in neither spelling: argparse refuses it
        ("-x", "-x"),
        ("value_with-dash", "value_with-dash"),  # not a flag
        ("-5", "-5"),
        ("-", "-"),
    ],
)
def test_a_flag_is_respelled_only_to_a_spelling_the_command_knows(arg: str, expected: str) -> None:
    assert respelled(arg, KNOWN.__contains__) == expected


def test_arguments_after_a_double_dash_are_kept() -> None:
    argv = ["--hold-below=1", "--", "--hold-below=2"]
    assert respelled_argv(argv, KNOWN.__contains__) == ["--hold_below=1", "--", "--hold-below=2"]


def test_parsers_and_their_sub_commands_take_both_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    parser = OneLineArgumentParser(prog="p")
    parser.add_argument("--hold_below", type=float)
    parser.add_argument("--front-points", type=int)
    args = parser.parse_args(["--hold-below", "0.5", "--front_points=3"])
    assert (args.hold_below, args.front_points) == (0.5, 3)
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--hold-belw=1"])
    assert exit_.value.code == 2 and "unrecognized arguments: --hold-belw=1" in capsys.readouterr().err
    built = history_cli.parser().parse_args(
        ["build", "--out=s.json", "--jobs", "8", "--compilation-cache-dir="]
    )
    assert (built.jobs, built.compilation_cache_dir) == (8, "")
    assert evaluate.parse_args(["--front-points=0", "--hold-below=0.25"]).hold_below == 0.25


def test_train_takes_dashed_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["slamorl_jax.train"])
    for negation in ("--no-moves-leave-contention", "--nomoves-leave-contention"):
        try:
            train.parse_flags(["slamorl_jax.train", "--num-envs=64", negation, "-rollout-length=8"])
            assert (train.FLAGS.num_envs, train.FLAGS.rollout_length) == (64, 8)
            assert train.FLAGS.moves_leave_contention is False
        finally:
            train.FLAGS.unparse_flags()


def test_a_shortened_name_is_refused_not_guessed(capsys: pytest.CaptureFixture[str]) -> None:
    """``--hold=0.5`` was read as ``--hold_below`` (argparse's prefix matching); train's absl flags
    never took it. Every command now wants the full name, in either spelling."""
    with pytest.raises(SystemExit) as exit_:
        evaluate.parse_args(["--hold=0.5"])
    assert exit_.value.code == 2 and "unrecognized arguments: --hold=0.5" in capsys.readouterr().err
