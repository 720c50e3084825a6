"""Bad input of every kind to ``train``, ``evaluate``, ``recommend``, ``export_policy``,
``load_policy`` and the env.

The bar of issue 11: every generated bad input exits with status 2 (or the documented status: 128 +
signal for Ctrl-C and SIGTERM), at most three lines on stderr, no traceback, and no file left behind
that was not there before. The commands run in process (``cli_harness.py``, milliseconds a case); a
few real processes check what only they can (the interpreter's own reporting, signals). The rows of
the issue's table are named in the case ids: 1-4 and 13 train, 5 the signals, 6-8 checkpoints
(``load_policy``, ``recommend``, ``evaluate``, ``export_policy``), 9-11 recommend, 12 the env's
params and actions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cli_harness import assert_refused, call, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from learner_fixtures import REPO_ROOT, TINY, shared_trainer

from slamorl_jax import checkpoint as ckpt
from slamorl_jax import evaluate, export_policy, policy_checkpoint, recommend, train
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.compilation_cache import JAX_CACHE_VARIABLE
from slamorl_jax.env import default_params, validate_params
from slamorl_jax.env.params import with_values
from slamorl_jax.train_checks import budget_note
from slamorl_jax.training_loop import diverged_message

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
FLOAT_FLAGS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.type in ("float", "float | None"))
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
        "unknown weights form": ("--weights=lagrange",),
        "preference not finite": ("--preference=nan,0,1",),
        "preference huge": ("--preference=1e309,0,0",),
        "hidden sizes huge": (f"--hidden_sizes={HUGE}",),
        "hidden sizes empty": ("--hidden_sizes=",),
        "save_interval zero": ("--save_interval=0",),
        "resume with an empty run_dir": ("--resume", "--run_dir="),
        "an empty checkpoint_dir": ("--checkpoint_dir=",),
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
    directory, a folder holding a text file, a checkpoint directory with an unreadable step)."""
    (tmp_path / "a_file").write_text("not a directory\n")
    (tmp_path / "latin1.flags").write_bytes("--scenario=caf\xe9\n".encode("latin-1"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("a folder that is not empty\n")
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


def test_train_refuses_a_run_dir_that_is_a_policy_checkpoint(
    sandbox: Path, checkpoints: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A --run_dir that holds a policy of its own (an export, an imitated policy) is refused: a run
    in it would make ``--checkpoint=<it>`` load one policy and ``--resume`` continue another."""
    shutil.copytree(checkpoints["good"], sandbox / "exported")
    outcome = call(train_main(("--run_dir={root}/exported",), sandbox), capsys, sandbox)
    assert_refused(outcome, "exported holds a policy checkpoint of its own", "--run_dir")


def test_budget_rounding_is_announced() -> None:
    """Row 13: a budget that is not whole updates and chunks says what it rounds up to."""
    config = TrainConfig(num_envs=8, rollout_length=4, total_timesteps=100, updates_per_chunk=1)
    assert budget_note(config) == (
        "note: --total_timesteps=100 rounds up to 128 steps: 4 updates of 32 (num_envs x "
        "rollout_length), in chunks of --updates_per_chunk=1"
    )
    assert budget_note(TrainConfig(num_envs=8, rollout_length=4, total_timesteps=64)) is not None
    assert budget_note(dataclasses.replace(config, total_timesteps=128)) is None


# --- damaged checkpoints, shared by load_policy, recommend and evaluate -----------------------------


def largest_file(directory: Path) -> Path:
    """The biggest file under ``directory`` (an item's array data)."""
    return max((p for p in directory.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A fresh TINY checkpoint (with digests) and damaged copies: policy array data truncated (row 7)
    or with 64 bytes flipped (row 8), and a step whose meta is not UTF-8."""
    root = tmp_path_factory.mktemp("checkpoints")
    good = root / "good"
    ckpt.save(ckpt.make_manager(good), shared_trainer(TINY).fresh(), TINY)
    paths = {"good": good}
    for name in ("truncated", "flipped", "bad meta"):
        paths[name] = Path(shutil.copytree(good, root / name.replace(" ", "_")))
    data = largest_file(paths["truncated"] / "0" / "policy")
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    data = largest_file(paths["flipped"] / "0" / "policy")
    raw = bytearray(data.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 64] = bytes(b ^ 0xFF for b in raw[middle : middle + 64])
    data.write_bytes(bytes(raw))
    (paths["bad meta"] / "0" / "meta" / "metadata").write_bytes(b"\xff\xfe{")
    return paths


BAD_CHECKPOINTS = {
    "row 6 a file": "{root}/a_file",
    "missing": "{root}/missing",
    "NUL byte": "{root}/x\0y",
    "empty directory": "{root}/empty",
    "row 7 truncated array data": "{truncated}",
    "row 8 flipped array bytes": "{flipped}",
    "meta not UTF-8": "{bad meta}",
}


def checkpoint_path(template: str, root: Path, checkpoints: dict[str, Path]) -> str:
    """A ``BAD_CHECKPOINTS`` template filled in."""
    path = template.replace("{root}", str(root))
    for name, where in checkpoints.items():
        path = path.replace("{" + name + "}", str(where))
    return path


@pytest.mark.parametrize("case", list(BAD_CHECKPOINTS))
def test_load_policy_refuses_bad_checkpoints(case: str, sandbox: Path, checkpoints: dict[str, Path]) -> None:
    """Rows 6-8 for Python users: a :class:`CheckpointError` of one line."""
    with pytest.raises(ckpt.CheckpointError) as error:
        policy_checkpoint.load_policy(checkpoint_path(BAD_CHECKPOINTS[case], sandbox, checkpoints))
    assert len(str(error.value).splitlines()) == 1 and "TensorStore" not in str(error.value)


def test_load_policy_refuses_a_path_of_the_wrong_type() -> None:
    with pytest.raises(ckpt.CheckpointError):
        policy_checkpoint.load_policy(5)  # type: ignore[arg-type]


EXPORT_CASES = {
    "destination a file": (["{good}", "a_file"], "new or empty folder"),
    "destination holds checkpoints": (["{good}", "garbage"], "already holds checkpoints"),
    "destination holds other files": (["{good}", "notes"], "new or empty folder"),
    "destination under a file": (["{good}", "a_file/out"], "cannot be created: 'a_file' is a file"),
    "source missing": (["{root}/missing", "out"], "does not exist"),
    "source damaged": (["{flipped}", "out"], "flipped"),
    "an extra argument": (["{good}", "out", "extra"], "unrecognized arguments"),
    "no destination": (["{good}"], "destination"),
}


@pytest.mark.parametrize("case", list(EXPORT_CASES))
def test_export_policy_refuses_bad_input(
    case: str, sandbox: Path, checkpoints: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``export_policy``: a destination that is not a new or empty folder, a bad source or bad
    arguments get one line and exit 2, and nothing is written."""
    argv, phrase = EXPORT_CASES[case]
    argv = [checkpoint_path(arg, sandbox, checkpoints) for arg in argv]
    assert_refused(call(lambda: export_policy.main(argv), capsys, sandbox), phrase)


@pytest.mark.parametrize("destination", ["empty", "new/nested/out"])
def test_export_policy_writes_into_an_empty_or_new_folder(
    destination: str, sandbox: Path, checkpoints: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The same command with an empty destination, or one whose folders do not exist yet, exports the
    policy, which loads as the source."""
    outcome = call(lambda: export_policy.main([str(checkpoints["good"]), destination]), capsys, sandbox)
    assert outcome.code == 0 and outcome.new_paths, outcome.report()
    exported = policy_checkpoint.load_policy(sandbox / destination)
    assert policy_checkpoint.params_equal(
        exported.params, policy_checkpoint.load_policy(checkpoints["good"]).params
    )


def test_export_policy_into_the_current_folder_is_refused_and_through_a_link_is_written(
    sandbox: Path,
    checkpoints: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An empty current folder failed in the rename ("cannot write .: Device or resource busy"); a
    link to an empty folder was refused as "filled by another program meanwhile"."""
    monkeypatch.chdir(sandbox / "empty")
    outcome = call(lambda: export_policy.main([str(checkpoints["good"]), "."]), capsys, sandbox)
    assert_refused(outcome, "is the current folder: name a new folder inside it")
    monkeypatch.chdir(sandbox)
    (sandbox / "link").symlink_to(sandbox / "empty")
    outcome = call(lambda: export_policy.main([str(checkpoints["good"]), "link"]), capsys, sandbox)
    assert outcome.code == 0 and (sandbox / "link").is_symlink(), outcome.report()
    exported = policy_checkpoint.load_policy(sandbox / "empty")
    assert policy_checkpoint.params_equal(
        exported.params, policy_checkpoint.load_policy(checkpoints["good"]).params
    )
    # A link is judged by the folder it names: one inside a run's checkpoint folder is refused
    (sandbox / "garbage" / "inside").mkdir()
    (sandbox / "into-a-run").symlink_to(sandbox / "garbage" / "inside")
    outcome = call(lambda: export_policy.main([str(checkpoints["good"]), "into-a-run"]), capsys, sandbox)
    assert_refused(outcome, "inside a run's checkpoint folder")


# --- recommend ----------------------------------------------------------------------------------------

# A job of the README's workload with readings near its profile's forecast (within training ranges).
JOB = {
    "workload": "imagenet-resnet50",
    "gpu_type": "T4",
    "gpus": 4,
    "cpus": 32,
    "epochs_done": 10,
    "epochs_total": 60,
    "elapsed_s": 15_500,
    "cost_usd": 14,
    "last_epoch_time_s": 1550,
    "throughput": 830,
    "gpu_util": 0.82,
    "cpu_util": 0.4,
    "memory_used_gib": 60,
    "memory_alloc_gib": 128,
    "price_per_hour": 3.23,
    "deadline_s": 90_000,
    "budget_usd": 80,
    "preference": "time",
}
HUGE_INT_TEXT = "1" + "0" * 400  # a JSON integer beyond any float


def job_text(**changes: object) -> str:
    """``JOB`` with ``changes`` as JSON text."""
    return json.dumps({**JOB, **changes})


def job_with_token(field: str, token: str) -> str:
    """``JOB`` as JSON text with ``field`` set to the raw JSON ``token`` (``NaN``, a huge integer)."""
    return job_text(**{field: 0}).replace(f'"{field}": 0', f'"{field}": {token}')


BAD_JOBS: dict[str, bytes | str | None] = {
    "row 9 gpus 1e30": job_text(gpus=1e30),
    "row 9 gpus 10**30": job_text(gpus=10**30),
    "row 9 epochs_total 1e12": job_text(epochs_total=1e12),
    "row 9 an integer beyond floats": job_text(elapsed_s=0).replace(
        '"elapsed_s": 0', f'"elapsed_s": {HUGE_INT_TEXT}'
    ),
    "row 9 Infinity": job_text(cost_usd=0).replace('"cost_usd": 0', '"cost_usd": Infinity'),
    "row 9 NaN": job_text(gpu_util=0).replace('"gpu_util": 0', '"gpu_util": NaN'),
    "row 10 not UTF-8": job_with_token("workload", '"caf\xe9"').encode("latin-1"),
    "row 11 gpus beyond the cluster": job_text(gpus=1000),
    "row 11 cpus beyond the cluster": job_text(cpus=100_000),
    "row 11 cpus off the step": job_text(cpus=30),
    "row 11 memory used above allocated": job_text(memory_used_gib=500),
    "row 11 a finished job": job_text(epochs_done=60),
    "not JSON": "{not json",
    "empty file": "",
    "null": "null",
    "a list": "[1, 2]",
    "nested too deeply": "[" * 100_000 + "]" * 100_000,
    "an integer past Python's 4,300 digits": job_with_token("gpus", "1" * 5000),
    "gpus a string": job_text(gpus="4"),
    "gpus a boolean": job_text(gpus=True),
    "gpus null": job_text(gpus=None),
    "gpus fractional": job_text(gpus=2.5),
    "unknown field": job_text(colour="blue"),
    "missing field": json.dumps({k: v for k, v in JOB.items() if k != "deadline_s"}),
    "unknown workload": job_text(workload="x" * 10_000),
    "bad preference": job_text(preference=[1, 2]),
    "preference not finite": job_with_token("preference", "[Infinity, 1, 1]"),
    "preference too long": job_text(preference=[1, 1, 1, 1]),
    "history not a list": job_text(history=5),
    "history entry incomplete": job_text(history=[{"gpus": 4}]),
    "history beyond the cluster": job_text(history=[{"gpus": 64, "cpus": 32, "epoch_time_s": 100}]),
    "history longer than the job": job_text(history=[{"gpus": 4, "cpus": 32, "epoch_time_s": 9}] * 11),
    "utilisation above 1": job_text(cpu_util=7),
    "a directory": None,
}


_LOADED: dict[str, policy_checkpoint.LoadedPolicy] = {}


@pytest.fixture
def policy(checkpoints: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The path of the fresh TINY policy, which ``load_policy`` then loads once per session (the
    cases vary the rest); a checkpoint saved by this code, so the cases do not depend on the shipped
    policy matching the current network."""
    real, good = policy_checkpoint.load_policy, checkpoints["good"]

    def load(path: str | Path) -> policy_checkpoint.LoadedPolicy:
        if str(path) != str(good):
            return real(path)
        if str(good) not in _LOADED:
            _LOADED[str(good)] = real(good)
        return _LOADED[str(good)]

    monkeypatch.setattr(policy_checkpoint, "load_policy", load)
    return good


@pytest.mark.parametrize("case", list(BAD_JOBS))
def test_recommend_refuses_bad_jobs(
    case: str, sandbox: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BAD_JOBS[case]
    job = sandbox / "empty" if text is None else sandbox / "job.json"
    if text is not None:
        job.write_bytes(text if isinstance(text, bytes) else text.encode())
    outcome = call(lambda: recommend.main([f"--job={job}", f"--checkpoint={policy}"]), capsys, sandbox)
    assert_refused(outcome)
    assert "checkpoint" not in outcome.stderr, outcome.report()  # refused for the job, not the policy


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
# Hypothesis runs every example in one test call, so the sandbox and the patched loader are shared.
FUZZ_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ_SETTINGS
@given(field=st.sampled_from([*JOB, "history", "requested_gpus", "colour"]), value=JSON_VALUES)
def test_recommend_answers_or_refuses_any_field_value(
    field: str, value: object, sandbox: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any JSON value in any field: an answer (status 0) or one refusal line (status 2), never more."""
    (sandbox / "job.json").write_text(json.dumps({**JOB, field: value}, allow_nan=True))
    outcome = call(lambda: recommend.main(["--job=job.json", f"--checkpoint={policy}"]), capsys, sandbox)
    if outcome.code != 0:
        assert_refused(outcome)
    assert "Traceback" not in outcome.stderr


@FUZZ_SETTINGS
@given(data=st.binary(max_size=200))
def test_recommend_refuses_random_bytes(
    data: bytes, sandbox: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (sandbox / "job.json").write_bytes(data)
    outcome = call(lambda: recommend.main(["--job=job.json", f"--checkpoint={policy}"]), capsys, sandbox)
    assert_refused(outcome)


@pytest.mark.parametrize("case", list(BAD_CHECKPOINTS))
def test_recommend_refuses_bad_checkpoints(
    case: str, sandbox: Path, checkpoints: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (sandbox / "job.json").write_text(json.dumps(JOB))
    path = checkpoint_path(BAD_CHECKPOINTS[case], sandbox, checkpoints)
    outcome = call(lambda: recommend.main(["--job=job.json", f"--checkpoint={path}"]), capsys, sandbox)
    assert_refused(outcome)


def test_recommend_flags_readings_outside_training(
    sandbox: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 11: the answer comes with ``in_training_range: false``, the reasons, and one warning line."""
    (sandbox / "job.json").write_text(job_text(deadline_s=100))
    outcome = call(lambda: recommend.main(["--job=job.json", f"--checkpoint={policy}"]), capsys, sandbox)
    assert outcome.code == 0, outcome.report()
    answer = json.loads(outcome.stdout)
    assert answer["in_training_range"] is False
    assert any("deadline_s" in note for note in answer["outside_training"])
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and "warning: outside what the policy was trained on" in lines[0]
    (sandbox / "job.json").write_text(json.dumps(JOB))
    outcome = call(lambda: recommend.main(["--job=job.json", f"--checkpoint={policy}"]), capsys, sandbox)
    assert json.loads(outcome.stdout)["in_training_range"] is True and not outcome.stderr, outcome.report()


# --- evaluate -----------------------------------------------------------------------------------------


def evaluate_cases() -> dict[str, tuple[str, ...]]:
    """id -> bad arguments of the evaluate command (``{root}`` is the sandbox)."""
    cases: dict[str, tuple[str, ...]] = {
        f"checkpoint {name}": (f"--checkpoint={path}",) for name, path in BAD_CHECKPOINTS.items()
    }
    cases.update(
        {
            "compare a file": ("--compare=other={root}/a_file",),
            "compare twice": ("--compare=a={good},a={good}",),
            "compare without a name": ("--compare={good}",),
            "out_dir a file": ("--out_dir={root}/a_file",),
            "out_dir under a file": ("--out_dir={root}/a_file/out",),
            "out_dir with a NUL byte": ("--out_dir={root}/x\0y",),
            "out_dir name too long": ("--out_dir={root}/" + "n" * 300,),
            "out_dir impossible": ("--out_dir=/proc/nope/out",),
            "compilation cache under a file": ("--compilation_cache_dir={root}/a_file/cache",),
            "stray word": ("extra_arg",),
            "unknown scenario": ("--scenarios=nope",),
            "no scenario": ("--scenarios=",),
            "one front point": ("--front_points=1",),
            "too many front points": ("--front_points=1000",),
            "unknown front scenario": ("--front_scenario=x",),
            "plots maybe": ("--plots=maybe",),
            "no seeds": ("--seeds=0",),
            "negative seed": ("--seed=-1",),
            "huge seed": (f"--seed={HUGE}",),
        }
    )
    for value in (*NON_FINITE, "-1", "0", HUGE, "abc", "1e3", ""):
        cases[f"--episodes={value}"] = (f"--episodes={value}",)
    for value in (*NON_FINITE, "-0.1", "1.5", "abc", ""):
        cases[f"--hold_below={value}"] = (f"--hold_below={value}",)
    for value in (*NON_FINITE, "-1", "101", "abc", ""):
        cases[f"--relocate_payback={value}"] = (f"--relocate_payback={value}",)
    return cases


EVALUATE_CASES = evaluate_cases()


@pytest.mark.parametrize("case", list(EVALUATE_CASES))
def test_evaluate_refuses_bad_input(
    case: str,
    sandbox: Path,
    checkpoints: dict[str, Path],
    policy: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [checkpoint_path(a, sandbox, checkpoints) for a in EVALUATE_CASES[case]]
    argv = [f"--checkpoint={policy}", "--out_dir=out", "--compilation_cache_dir=", "--noprogress", *args]
    assert_refused(call(lambda: evaluate.main(argv), capsys, sandbox))


# --- the env's params and actions (row 12) -----------------------------------------------------------

PARAMS = default_params()
BAD_PARAM_VALUES = {
    "gpus_per_node 2.5": ("gpus_per_node", 2.5),
    "cpu_step NaN": ("cpu_step", np.nan),
    "max_nodes 2**40": ("max_nodes", 2**40),
    "use_fixed_preference 0.5": ("use_fixed_preference", 0.5),
    "epoch_time_noise NaN": ("epoch_time_noise", np.nan),
    "epoch_time_noise inf": ("epoch_time_noise", np.inf),
    "reward_clip -1": ("reward_clip", -1.0),
    "contention_start_prob 2": ("contention_start_prob", 2.0),
    "weights_mode 3": ("weights_mode", 3),
    "dual_decay 2": ("dual_decay", 2.0),
    "dual_step NaN": ("dual_step", np.nan),
    "kind_preference off the simplex": ("kind_preference", np.full((3, 3), 0.5)),
}


@pytest.mark.parametrize("case", list(BAD_PARAM_VALUES))
def test_row_12_bad_env_params_are_refused_before_the_env_runs(case: str) -> None:
    """A bad value is refused by ``with_values`` (a lossy cast) or by ``validate_params`` (a range),
    naming the field."""
    field, value = BAD_PARAM_VALUES[case]
    with pytest.raises(ValueError, match=field):
        validate_params(with_values(PARAMS, **{field: value}))


# --- real processes: the interpreter's own reporting and signals (rows 1, 5, 6, 10) -----------------


def run_process(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` in ``cwd`` with the repository importable."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_each_command_refuses_bad_input_in_a_real_process(sandbox: Path) -> None:
    """One bad input per command as a user would run it: status 2, one line, nothing new on disk."""
    runs = [
        ("slamorl_jax.train", ["extra_arg", *SMALL]),
        ("slamorl_jax.recommend", ["--job=latin1.flags", "--checkpoint=empty"]),
        ("slamorl_jax.evaluate", ["--checkpoint=a_file", "--out_dir=out", "--compilation_cache_dir="]),
    ]
    before = snapshot(sandbox)
    for module, args in runs:
        result = run_process(module, args, sandbox)
        report = f"{module}: exit {result.returncode}\n{result.stderr[-3000:]}"
        assert result.returncode == 2, report
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, report
    assert snapshot(sandbox) == before


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"]
)
def test_row_5_a_signal_while_compiling_exits_quietly_and_removes_the_run(sandbox: Path, signum: int) -> None:
    """Ctrl-C, SIGTERM or SIGHUP (a closed terminal: it killed the run at once, leaving its logs)
    while the run compiles (no cache, so it is still compiling): status 128 + signal, one line, and
    the run's new directories removed."""
    run_dir = sandbox / "run"
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    # No cache at all: not even the suite's, which conftest.py names in JAX's own variable.
    environ = {k: v for k, v in os.environ.items() if k != JAX_CACHE_VARIABLE}
    process = subprocess.Popen(
        [sys.executable, "-m", "slamorl_jax.train", *SMALL, f"--run_dir={run_dir}"],
        cwd=sandbox,
        env={**environ, "PYTHONPATH": path},
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
        # At once: the clean-up is armed before the first folder is made (a signal between making
        # them and arming it left them; the test waited 0.5 s to miss that window).
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    report = f"exit {process.returncode}\nstdout: {stdout}\nstderr: {stderr}"
    assert process.returncode == 128 + signum, report
    lines = stderr.strip().splitlines()  # the run's "run: ..." line, then the interrupt
    assert lines[-1] == f"python -m slamorl_jax.train: interrupted ({signal.Signals(signum).name})", report
    assert len(lines) <= 3 and "Traceback" not in stderr, report
    assert not run_dir.exists(), report


def test_row_4_a_run_that_diverges_before_saving_says_so(tmp_path: Path) -> None:
    """A first update that diverges does not claim a checkpoint is kept."""
    message = diverged_message(1, 0, tmp_path)
    assert "non-finite loss at update 1" in message and "No checkpoint had been saved yet" in message


def test_resume_keeps_a_run_in_its_folder(sandbox: Path) -> None:
    """``--resume`` with ``--run_dir``, or with only ``--checkpoint_dir=<run>/checkpoints``, logs to
    ``<run>/logs`` (the metrics of a resumed run stay in one folder)."""
    for flag in ("--run_dir=old", "--checkpoint_dir=old/checkpoints"):
        train.parse_flags(["slamorl_jax.train", "--resume", flag])
        checkpoint_dir, log_dir, _, _ = train.resolve_paths()
        assert (checkpoint_dir, log_dir) == (Path("old/checkpoints"), Path("old/logs"))
        assert not train.default_run_dir_needed()


def test_resume_from_a_bare_checkpoint_dir_logs_to_a_claimed_folder(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--resume`` with only a ``--checkpoint_dir`` not named ``checkpoints`` logs to a new folder
    of its own under ``runs/`` (claimed, so no other command shares it), and a refused resume leaves
    no such folder behind."""
    train.parse_flags(["slamorl_jax.train", "--resume", "--checkpoint_dir=old/ckpt"])
    assert train.default_run_dir_needed()
    checkpoint_dir, log_dir, _, _ = train.resolve_paths(Path("runs/claimed"))
    assert (checkpoint_dir, log_dir) == (Path("old/ckpt"), Path("runs/claimed/logs"))
    train.parse_flags(["slamorl_jax.train", "--resume", "--checkpoint_dir=old/ckpt", "--log_dir=old/logs"])
    assert not train.default_run_dir_needed()
    argv = ["slamorl_jax.train", *SMALL, "--resume", f"--checkpoint_dir={sandbox}/missing"]
    assert_refused(call(lambda: train.main(train.parse_flags(argv)), capsys, sandbox), "no run to continue")
    assert not (sandbox / "runs").exists()


def test_a_distributed_run_names_one_folder_for_every_process(sandbox: Path) -> None:
    """Every process of a ``--distributed`` run must find the same folders: a run given only a
    ``--checkpoint_dir`` (not ``<run>/checkpoints`` on a resume) would have each process claim a
    ``runs/<date-time>`` of its own for the logs, so it is refused before anything is made."""
    cluster = ["--distributed", "--coordinator_address=localhost:1234", "--num_processes=2", "--process_id=0"]
    refused = {
        (): "needs --run_dir (or --checkpoint_dir)",
        ("--checkpoint_dir=ck",): "needs --log_dir too",
        ("--resume", "--checkpoint_dir=old/ck"): "needs --log_dir too",
    }
    for args, phrase in refused.items():
        train.parse_flags(["slamorl_jax.train", *cluster, *args])
        with pytest.raises(ValueError, match=re.escape(phrase)):
            train.distributed_options()
    for args in (
        ("--run_dir=run",),
        ("--checkpoint_dir=ck", "--log_dir=logs"),
        ("--resume", "--checkpoint_dir=old/checkpoints"),
    ):
        train.parse_flags(["slamorl_jax.train", *cluster, *args])
        assert train.distributed_options().enabled
    assert not (sandbox / "runs").exists()
