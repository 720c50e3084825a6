"""Bad input of every kind to ``train``, ``evaluate``, ``recommend`` and ``load_policy``.

The bar of issue 11: every generated bad input exits with status 2 (or the documented status), at
most three lines on stderr, no traceback, and no file left behind that was not there before. The
commands run in process (``cli_harness.py``); the rows of the issue's table are named in the ids.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_harness import assert_refused, call
from learner_fixtures import REPO_ROOT, TINY, shared_trainer

from slamorl_jax import checkpoint as ckpt
from slamorl_jax import recommend, train
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.train_checks import budget_note

SHIPPED = REPO_ROOT / "checkpoints" / "default"

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
        ckpt.load_policy(checkpoint_path(BAD_CHECKPOINTS[case], sandbox, checkpoints))
    assert len(str(error.value).splitlines()) == 1 and "TensorStore" not in str(error.value)


def test_load_policy_refuses_a_path_of_the_wrong_type() -> None:
    with pytest.raises(ckpt.CheckpointError):
        ckpt.load_policy(5)  # type: ignore[arg-type]


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


_SHIPPED: list[ckpt.LoadedPolicy] = []


@pytest.fixture
def shipped_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``load_policy`` of the shipped policy loads it once per session (the cases only vary the job)."""
    real = ckpt.load_policy

    def load(path: str | Path) -> ckpt.LoadedPolicy:
        if str(path) != str(SHIPPED):
            return real(path)
        if not _SHIPPED:
            _SHIPPED.append(real(path))
        return _SHIPPED[0]

    monkeypatch.setattr(ckpt, "load_policy", load)


@pytest.mark.parametrize("case", list(BAD_JOBS))
def test_recommend_refuses_bad_jobs(
    case: str, sandbox: Path, shipped_once: None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BAD_JOBS[case]
    job = sandbox / "empty" if text is None else sandbox / "job.json"
    if text is not None:
        job.write_bytes(text if isinstance(text, bytes) else text.encode())
    outcome = call(lambda: recommend.main([f"--job={job}", f"--checkpoint={SHIPPED}"]), capsys, sandbox)
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
    sandbox: Path, shipped_once: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 11: the answer comes with ``in_training_range: false``, the reasons, and one warning line."""
    (sandbox / "job.json").write_text(job_text(deadline_s=100))
    outcome = call(lambda: recommend.main(["--job=job.json", f"--checkpoint={SHIPPED}"]), capsys, sandbox)
    assert outcome.code == 0, outcome.report()
    answer = json.loads(outcome.stdout)
    assert answer["in_training_range"] is False
    assert any("deadline_s" in note for note in answer["outside_training"])
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and "warning: outside what the policy was trained on" in lines[0]
    (sandbox / "job.json").write_text(json.dumps(JOB))
    outcome = call(lambda: recommend.main(["--job=job.json", f"--checkpoint={SHIPPED}"]), capsys, sandbox)
    assert json.loads(outcome.stdout)["in_training_range"] is True and not outcome.stderr, outcome.report()
