"""Bad input of every kind to ``train``, ``evaluate``, ``recommend`` and ``load_policy``.

The bar of issue 11: every generated bad input exits with status 2 (or the documented status), at
most three lines on stderr, no traceback, and no file left behind that was not there before. The
commands run in process (``cli_harness.py``); the rows of the issue's table are named in the ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_harness import assert_refused, call

from slamorl_jax import train
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.train_checks import budget_note

# The tiny run: valid on its own, so each case's one bad value is what gets refused.
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
NON_FINITE = ("inf", "-inf", "nan", "1e999")
HUGE = str(10**30)
FLOAT_FLAGS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.type == "float")
COUNT_FLAGS = (
    "num_envs",
    "total_timesteps",
    "rollout_length",
    "update_epochs",
    "num_minibatches",
    "updates_per_chunk",
    "seed",
    "eval_episodes",
)


def train_cases() -> dict[str, tuple[str, ...]]:
    """id -> the bad arguments (``{root}`` is the case's sandbox)."""
    cases: dict[str, tuple[str, ...]] = {
        "row 1 stray word": ("extra_arg",),
        "row 1 words after --": ("--", "one", "two"),
        "row 2 num_envs overflows int32": ("--num_envs=1000000000", "--total_timesteps=1"),
        "row 3 checkpoint_dir is a file": ("--checkpoint_dir={root}/a_file",),
        "row 3 run_dir under a file": ("--run_dir={root}/a_file/run",),
        "row 3 run_dir impossible": ("--run_dir=/proc/nope",),
        "row 3 log_dir is a file": ("--log_dir={root}/a_file",),
        "row 3 run_dir with a NUL byte": ("--run_dir={root}/x\0y",),
        "row 3 run_dir name too long": ("--run_dir={root}/" + "n" * 300,),
        "row 3 compilation cache is a file": ("--compilation_cache_dir={root}/a_file",),
        "row 13 less than one update": ("--total_timesteps=1",),
        "flagfile not UTF-8": ("--flagfile={root}/latin1.flags",),
        "flagfile is a directory": ("--flagfile={root}",),
        "flagfile missing": ("--flagfile={root}/missing.flags",),
        "unknown flag": ("--no_such_flag=1",),
        "preference not finite": ("--preference=nan,0,1",),
        "preference huge": ("--preference=1e309,0,0",),
        "hidden sizes huge": (f"--hidden_sizes={HUGE}",),
        "hidden sizes empty": ("--hidden_sizes=",),
        "save_interval zero": ("--save_interval=0",),
        "keep negative": ("--keep=-1",),
        "resume a file": ("--resume", "--checkpoint_dir={root}/a_file"),
        "resume a missing run": ("--resume", "--checkpoint_dir={root}/missing"),
        "resume an empty directory": ("--resume", "--checkpoint_dir={root}/empty"),
        "resume unreadable meta": ("--resume", "--checkpoint_dir={root}/garbage"),
    }
    for name in FLOAT_FLAGS:
        for value in (*NON_FINITE, "-1", "abc", ""):
            cases[f"row 4 --{name}={value}"] = (f"--{name}={value}",)
    for name in COUNT_FLAGS:
        for value in ("-1", HUGE, "abc", "1.5"):
            cases[f"--{name}={value}"] = (f"--{name}={value}",)
    return cases


TRAIN_CASES = train_cases()


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the files the cases point at (a file, a Latin-1 flagfile, an empty
    directory, a checkpoint directory with an unreadable step)."""
    (tmp_path / "a_file").write_text("not a directory\n")
    (tmp_path / "latin1.flags").write_bytes("--scenario=caf\xe9\n".encode("latin-1"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "garbage" / "3" / "meta").mkdir(parents=True)
    (tmp_path / "garbage" / "3" / "meta" / "metadata").write_bytes(b"\x00\xff not json")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    train.FLAGS.unparse_flags()


def train_main(args: tuple[str, ...], root: Path) -> Callable[[], object]:
    """The training command on ``args`` (after ``SMALL``), as ``app.run`` would call it."""
    argv = ["slamorl_jax.train", *SMALL, *(a.replace("{root}", str(root)) for a in args)]
    if "--run_dir" not in " ".join(args):
        argv.append(f"--run_dir={root}/run")
    return lambda: train.main(train.parse_flags(argv))


@pytest.mark.parametrize("case", list(TRAIN_CASES))
def test_train_refuses_bad_input(case: str, sandbox: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_refused(call(train_main(TRAIN_CASES[case], sandbox), capsys, sandbox))


def test_train_names_what_is_wrong(sandbox: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The one line names the input and what is allowed (rows 1, 2, 3, 4, 13)."""
    expected = {
        ("extra_arg",): ["'extra_arg'", "--flag"],
        ("--num_envs=1000000000", "--total_timesteps=1"): ["--num_envs", "4,194,304"],
        ("--checkpoint_dir={root}/a_file",): ["--checkpoint_dir", "a_file", "is a file"],
        ("--log_dir={root}/a_file/logs",): ["--log_dir", "is a file"],
        ("--entropy_coef=inf",): ["--entropy_coef", "finite", "inf"],
        ("--total_timesteps=1",): ["--total_timesteps=1", "less than one update", "32"],
    }
    for args, phrases in expected.items():
        assert_refused(call(train_main(args, sandbox), capsys, sandbox), *phrases)


def test_budget_rounding_is_announced() -> None:
    """Row 13: a budget that is not whole updates and chunks says what it rounds up to."""
    config = TrainConfig(num_envs=8, rollout_length=4, total_timesteps=100, updates_per_chunk=1)
    assert budget_note(config) == (
        "note: --total_timesteps=100 rounds up to 128 steps: 4 updates of 32 (num_envs x "
        "rollout_length), in chunks of --updates_per_chunk=1"
    )
    assert budget_note(TrainConfig(num_envs=8, rollout_length=4, total_timesteps=64)) is not None
    assert budget_note(dataclasses.replace(config, total_timesteps=128)) is None
