"""``python -m slamorl_jax.train`` end to end: outputs, bad flags, ``--resume``, signals, non-finite losses.

The CLI runs train ``TINY`` (``learner_fixtures.py``) and share the tests' persistent compilation
cache, so after the in-process tests have compiled TINY's update the subprocesses only load it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest
from absl import app
from cli_harness import TRAIN_ERROR, Outcome, assert_refused, call
from learner_fixtures import REPO_ROOT, TINY, Compiled, cli_flags, shared_trainer, trees_equal

from slamorl_jax import checkpoint as ckpt
from slamorl_jax import policy_checkpoint, run_dirs, train, training_loop
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.schedule import learning_rate_after
from slamorl_jax.env.scenarios import SCENARIO_KINDS

CLI_TIMEOUT_S = 300


def cli_env() -> dict[str, str]:
    """The test environment with the repository importable."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def cli_command(*args: str) -> list[str]:
    """The training CLI with ``args`` and the tests' compilation cache."""
    cache = jax.config.jax_compilation_cache_dir or ""
    return [sys.executable, "-m", "slamorl_jax.train", *args, f"--compilation_cache_dir={cache}"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion from the repository root."""
    return subprocess.run(
        cli_command(*args),
        cwd=REPO_ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file."""
    return [json.loads(line) for line in path.read_text().splitlines()]


@dataclasses.dataclass(frozen=True)
class FinishedRun:
    """A tiny CLI run that ran to the end."""

    run_dir: Path
    result: subprocess.CompletedProcess[str]

    @property
    def checkpoint_dir(self) -> Path:
        """Where the run saved its checkpoints (the default under ``--run_dir``)."""
        return self.run_dir / "checkpoints"

    @property
    def log_dir(self) -> Path:
        """Where the run wrote its metrics and summary (the default under ``--run_dir``)."""
        return self.run_dir / "logs"


@pytest.fixture(scope="module")
def flagfile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TINY's flags, one a line."""
    path = tmp_path_factory.mktemp("flags") / "tiny.flags"
    path.write_text("\n".join(cli_flags(TINY)) + "\n")
    return path


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    """TINY's jitted ``init`` and ``update_chunk`` (shared with the other learner test modules)."""
    return shared_trainer(TINY)


@pytest.fixture(scope="module")
def finished(flagfile: Path, tmp_path_factory: pytest.TempPathFactory, compiled: Compiled) -> FinishedRun:
    """TINY trained to the end through ``--flagfile``, with a small final evaluation."""
    compiled.run(
        compiled.fresh(), 1
    )  # compile TINY's functions here first; the CLI loads them from the cache
    run_dir = tmp_path_factory.mktemp("finished")
    result = run_cli(f"--flagfile={flagfile}", f"--run_dir={run_dir}", "--eval_episodes=4")
    assert result.returncode == 0, result.stderr[-3000:]
    return FinishedRun(run_dir, result)


def test_tiny_run_writes_metrics_events_summary_config_and_checkpoint(
    finished: FinishedRun, compiled: Compiled
) -> None:
    updates = TINY.num_updates
    records = read_jsonl(finished.log_dir / "metrics.jsonl")
    assert [r["update"] for r in records] == list(
        range(TINY.updates_per_chunk, updates + 1, TINY.updates_per_chunk)
    )
    for record in records:
        assert record["env_steps"] == record["update"] * TINY.batch_size
        assert {"loss", "return", "policy_loss", "value_loss", "entropy", "all_slas_met"} <= set(record)
        assert all(math.isfinite(record[k]) for k in ("loss", "return"))
        assert record["learning_rate"] == learning_rate_after(TINY, record["update"])
    assert list(finished.log_dir.glob("events.out.tfevents.*"))

    # config.json holds the flagfile's values, i.e. --flagfile was read.
    assert TrainConfig.from_dict(json.loads((finished.log_dir / "config.json").read_text())) == TINY
    summary = json.loads((finished.log_dir / "summary.json").read_text())
    assert summary["updates"] == updates
    assert summary["env_steps_this_run"] == updates * TINY.batch_size
    assert Path(summary["checkpoint"]) == (finished.checkpoint_dir / str(updates)).absolute()
    assert set(summary["evaluation"]) == set(SCENARIO_KINDS)
    assert f"trained {updates} updates" in finished.result.stdout
    # and what to run next, on the policy it wrote
    policy_dir = shlex.quote(str(finished.checkpoint_dir.absolute()))
    assert f"next: python -m slamorl_jax.evaluate --checkpoint={policy_dir}" in finished.result.stdout
    assert "Traceback" not in finished.result.stderr

    policy = policy_checkpoint.load_policy(finished.checkpoint_dir)
    assert policy.step == updates and policy.config == TINY
    # Same seed and flags as the library run: identical parameters.
    state, _ = compiled.run(compiled.fresh(), TINY.num_chunks)
    assert trees_equal(policy.params, state.params)


BAD_FLAGS = {
    "num_envs zero": (["--num_envs=0"], ["--num_envs"]),
    "empty log dir": (["--log_dir="], ["--log_dir is empty"]),  # it ran, logging under --run_dir
    "minibatches do not divide": (["--num_envs=32", "--rollout_length=8", "--num_minibatches=3"], ["256"]),
    "unknown scenario": (["--scenario=nope"], ["--scenario", "deadline-critical"]),
    "hidden sizes not integers": (["--hidden_sizes=a,b"], ["--hidden_sizes"]),
    "seventeen hidden layers": (
        ["--hidden_sizes=" + ",".join(["4"] * 17)],
        ["must give 1 to 16 layers, got 17"],
    ),
    "target grid of three values": (["--target_cpus_per_gpu=0,2,4"], ["--target_cpus_per_gpu must be 5"]),
    "target grid not numbers": (
        ["--target_cpus_per_gpu=0,2,x,6,10"],
        ["--target_cpus_per_gpu must be numbers"],
    ),
    "target grid not increasing": (["--target_cpus_per_gpu=0,4,2,6,10"], ["increasing", "[0.0, 4.0, 2.0"]),
    "target grid negative": (["--target_cpus_per_gpu=-1,2,4,6,10"], ["in [0, 1024]"]),
    "unknown flag": (["--no_such_flag=1"], ["no_such_flag"]),
    "float flag not a number": (["--learning_rate=abc"], ["learning_rate"]),
    "learning rate out of range": (["--learning_rate=2"], ["--learning_rate"]),
    "bad preference": (["--preference=fast"], ["--preference"]),
    "negative SLA bonus": (["--sla_met_bonus=-1"], ["--sla_met_bonus"]),
    "dual decay above 1": (["--weights=dual", "--dual_decay=1.5"], ["--dual_decay"]),
    "negative dual step": (["--weights=dual", "--dual_step=-1"], ["--dual_step"]),
    "event share above 1": (["--event_share=1.5"], ["--event_share"]),
    "negative restart pause": (["--reallocation_pause_s=-5"], ["--reallocation_pause_s"]),
    "resume without checkpoint dir": (["--resume"], ["--resume", "--checkpoint_dir"]),
    "missing flagfile": (["--flagfile=/nonexistent/tiny.flags"], ["flagfile"]),
    # Flags the weight mode or action set never reads: recorded and silently unused before.
    "adapt strength with static weights": (
        ["--weights=static", "--adapt_strength=2"],
        ["--adapt_strength has no effect with --weights=static"],
    ),
    "dual step without dual weights": (
        ["--dual_step=7"],
        ["--dual_step has no effect with --weights=severity"],
    ),
    "target head with the paper moves": (
        ["--actions=paper", "--target_head"],
        ["--target_head has no effect with --actions=paper"],
    ),
    "paper prior with targets": (["--nopaper_suggestion_prior"], ["--paper_suggestion_prior has no effect"]),
    "relocate gain without relocate": (
        ["--actions=targets", "--relocate_gain_init=3"],
        ["--relocate_gain_init has no effect"],
    ),
    "relocation gate out of range": (["--relocate_gate=1.5"], ["--relocate_gate must be in [0, 1]"]),
    "relocation gate without the relocate prior": (
        ["--relocate_gain_init=0", "--relocate_gate=0.2"],
        ["--relocate_gate has no effect without the relocate prior"],
    ),
    "heartbeat of a one-process run": (
        ["--distributed_heartbeat_s=5"],
        ["--distributed_heartbeat_s has no effect without --distributed"],
    ),
    "join timeout of a one-process run": (
        ["--distributed_init_timeout_s=5"],
        ["--distributed_init_timeout_s has no effect without --distributed"],
    ),
    "gain without a prior": (
        ["--nosuggestion_prior", "--suggestion_gain_init=2"],
        ["--suggestion_gain_init has no effect without a suggestion prior"],
    ),
}


def train_in_process(args: list[str], capsys: pytest.CaptureFixture[str], root: Path) -> Outcome:
    """The training command on ``args`` in this process (as ``app.run`` calls it; milliseconds where a
    subprocess pays seconds of imports), with what it left under ``root``. The properties only a real
    process has (no interpreter traceback, exit by signal) are checked by the subprocess tests here
    and by ``test_fuzz_inputs``. A run refused late, after it turned on its compilation cache, leaves
    the suite's cache as it was (``conftest.suite_cache_settings``)."""
    try:
        return call(lambda: train.main(train.parse_flags(["slamorl_jax.train", *args])), capsys, root)
    finally:
        train.FLAGS.unparse_flags()


def assert_one_error_line(outcome: Outcome, *phrases: str) -> None:
    """Exit code 2, exactly one ``python -m slamorl_jax.train: error:`` line on stderr (the package's
    other commands' form) naming ``phrases``, no traceback, nothing new on disk."""
    assert_refused(outcome, *phrases)
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{TRAIN_ERROR} "), outcome.report()


@pytest.mark.parametrize("case", list(BAD_FLAGS))
def test_bad_flags_exit_2_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, phrases = BAD_FLAGS[case]
    outcome = train_in_process([*args, f"--run_dir={tmp_path}"], capsys, tmp_path)
    assert_one_error_line(outcome, *phrases)
    assert not any(tmp_path.iterdir())  # nothing written


def test_only_check_args_checks_the_flags_as_a_run_does_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """absl's ``--only_check_args`` exited 0 once the flags parsed, before any of the run's checks:
    ``--num_envs=-5`` passed. The parse now checks them as a starting run does (absl then exits 0
    for good flags, as ``app.run`` does after the parse), and nothing is written either way."""
    run_dir = tmp_path / "run"

    def parse(*args: str) -> object:
        return call(
            lambda: train.parse_flags(["slamorl_jax.train", "--only_check_args", *args]), capsys, tmp_path
        )

    try:
        assert_one_error_line(parse("--num_envs=-5", f"--run_dir={run_dir}"), "--num_envs")
        good = parse(*cli_flags(TINY), f"--run_dir={run_dir}")
        assert isinstance(good.code, list) and not good.stderr.strip(), good.report()  # parsed: argv
        assert not any(tmp_path.iterdir())
    finally:
        train.FLAGS.unparse_flags()


def test_only_check_args_checks_the_runs_folders_too(
    finished: FinishedRun, flagfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only_check_args`` refuses what a starting run refuses in its folders (a resume with no
    run, a resume whose flags differ from the run's config, a new run where checkpoints are) and
    passes a resume that would start, writing nothing."""
    checkpoints = f"--checkpoint_dir={finished.checkpoint_dir}"

    def parse(*args: str) -> object:
        return call(
            lambda: train.parse_flags(["slamorl_jax.train", "--only_check_args", *args]), capsys, tmp_path
        )

    before = sorted(finished.checkpoint_dir.parent.rglob("*"))
    try:
        missing = parse("--resume", f"--run_dir={tmp_path / 'none'}")
        assert_one_error_line(missing, "--resume: no run to continue")
        # a --checkpoint_dir with no --log_dir leaves the logs to a new dated folder (named, not made)
        missing = parse("--resume", f"--checkpoint_dir={tmp_path / 'none'}")
        assert_one_error_line(missing, "--resume: no run to continue")
        (tmp_path / "file").write_text("x")
        assert_one_error_line(parse(f"--checkpoint_dir={tmp_path / 'file'}"), "is a file, not a directory")
        (tmp_path / "file").unlink()
        assert_one_error_line(parse(f"--flagfile={flagfile}", checkpoints), "already holds checkpoints")
        differ = parse("--resume", checkpoints, "--learning_rate=0.5")
        assert_one_error_line(differ, "flags differ from the checkpoint's config: learning_rate")
        good = parse("--resume", checkpoints)
        assert isinstance(good.code, list) and not good.stderr.strip(), good.report()
    finally:
        train.FLAGS.unparse_flags()
    assert not any(tmp_path.iterdir())
    assert sorted(finished.checkpoint_dir.parent.rglob("*")) == before


def test_existing_checkpoints_without_resume_exit_2(
    finished: FinishedRun, flagfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [f"--flagfile={flagfile}", f"--checkpoint_dir={finished.checkpoint_dir}", f"--run_dir={tmp_path}"]
    assert_one_error_line(train_in_process(args, capsys, tmp_path), str(finished.checkpoint_dir), "--resume")


def test_resuming_a_finished_run_trains_nothing_and_keeps_its_summary(
    finished: FinishedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--resume`` of a run that reached its last update says so and exits 0; it used to rewrite
    ``summary.json`` with its own zero steps (and drop the final evaluation), and then to announce a
    compilation it does not do."""
    run = tmp_path / "run"
    shutil.copytree(finished.run_dir, run)
    kept = {
        name: (run / "logs" / name).read_bytes() for name in ("summary.json", "metrics.jsonl", "config.json")
    }
    outcome = train_in_process(["--resume", f"--run_dir={run}", "--progress=true"], capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    assert "the run is complete" in outcome.stdout + outcome.stderr, outcome.report()
    assert "compiling" not in outcome.stdout + outcome.stderr, outcome.report()  # it compiles no chunk
    assert {name: (run / "logs" / name).read_bytes() for name in kept} == kept


def test_resuming_a_finished_run_that_stopped_before_its_summary_writes_it(
    finished: FinishedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run stopped after its last save, in its final evaluation, had no ``summary.json``, and
    ``--resume`` said "nothing to train" and wrote none: the evaluation was lost for good."""
    run = tmp_path / "run"
    shutil.copytree(finished.run_dir, run)
    (run / "logs" / "summary.json").unlink()
    metrics = (run / "logs" / "metrics.jsonl").read_bytes()
    outcome = train_in_process(["--resume", f"--run_dir={run}", "--progress=false"], capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    assert "stopped before writing summary.json: writing it" in outcome.stderr, outcome.report()
    summary = json.loads((run / "logs" / "summary.json").read_text())
    expected = json.loads((finished.log_dir / "summary.json").read_text())
    assert summary["updates"] == TINY.num_updates and summary["env_steps_this_run"] == 0
    assert summary["evaluation"] == expected["evaluation"]  # the run's own --eval_episodes=4, seeded
    assert (run / "logs" / "metrics.jsonl").read_bytes() == metrics


def test_resuming_a_finished_run_into_a_new_log_folder_writes_no_second_summary(
    finished: FinishedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``--checkpoint_dir`` not named ``checkpoints`` resumed without its ``--log_dir`` logs to a
    new folder, which has no summary: that is no sign the run stopped before writing its own."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(finished.checkpoint_dir, tmp_path / "ck")
    outcome = train_in_process(["--resume", "--checkpoint_dir=ck", "--progress=false"], capsys, tmp_path)
    assert outcome.code == 0 and "nothing to train" in outcome.stderr, outcome.report()
    assert not (tmp_path / "runs").exists(), outcome.report()  # nor the new, empty log folder


def test_resuming_into_another_runs_logs_is_refused(
    finished: FinishedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--resume --log_dir=<another run's logs>`` replaced that run's metrics past the checkpoint's
    update, its summary and its config."""
    other = tmp_path / "other"
    shutil.copytree(finished.run_dir, other)
    config = json.loads((other / "logs" / "config.json").read_text())
    (other / "logs" / "config.json").write_text(json.dumps({**config, "seed": config["seed"] + 1}))
    before = {p.name: p.read_bytes() for p in (other / "logs").iterdir() if p.is_file()}
    args = ["--resume", f"--run_dir={finished.run_dir}", f"--log_dir={other / 'logs'}"]
    assert_one_error_line(train_in_process(args, capsys, tmp_path), "holds the logs of another run")
    assert {p.name: p.read_bytes() for p in (other / "logs").iterdir() if p.is_file()} == before
    # Without a config to tell whose they are (gone, or damaged), they were written into.
    for damage in ("{bad", None):
        if damage is None:
            (other / "logs" / "config.json").unlink()
        else:
            (other / "logs" / "config.json").write_text(damage)
        before = {p.name: p.read_bytes() for p in (other / "logs").iterdir() if p.is_file()}
        outcome = train_in_process(args, capsys, tmp_path)
        assert_one_error_line(outcome, "holds run logs (", "without a readable config.json")
        assert {p.name: p.read_bytes() for p in (other / "logs").iterdir() if p.is_file()} == before


@pytest.mark.parametrize("held_folder", ["checkpoints", "logs"])
def test_a_folder_another_run_trains_in_is_refused_and_left_alone(
    held_folder: str, flagfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs into one folder both trained and interleaved their checkpoints and metrics (two runs
    given one ``--log_dir`` kept one run's metrics of the two). A run holds its checkpoint and log
    folders' locks (here one taken by the test, as another process would); a second run is refused
    with one line and leaves the folder, which is the other run's, as it was."""
    held_dir = tmp_path / "shared" / held_folder
    held_dir.mkdir(parents=True)
    folder_flags = {
        "checkpoints": [f"--run_dir={tmp_path / 'shared'}"],
        "logs": [f"--run_dir={tmp_path / 'own'}", f"--log_dir={held_dir}"],
    }[held_folder]
    held = run_dirs.lock_run_dir(held_dir)
    assert held is not None and held >= 0
    try:
        outcome = train_in_process([f"--flagfile={flagfile}", *folder_flags], capsys, tmp_path)
        assert_one_error_line(outcome, str(held_dir), "in use by another training run")
        assert held_dir.is_dir()  # the other run's; the empty folders this run made are gone
    finally:
        run_dirs.unlock_run_dir(held)
    again = run_dirs.lock_run_dir(held_dir)  # released: the next run may take it
    assert again is not None
    run_dirs.unlock_run_dir(again)


def test_another_runs_logs_without_resume_exit_2_and_stay_as_they_were(
    finished: FinishedRun, flagfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new run pointed at a finished run's logs (``--log_dir``) would append to its metrics and
    replace its summary: refused in one line, the logs untouched."""
    logs = finished.run_dir / "logs"
    before = {path.name: path.read_bytes() for path in logs.iterdir() if path.is_file()}
    args = [f"--flagfile={flagfile}", f"--log_dir={logs}", f"--run_dir={tmp_path / 'new'}"]
    assert_one_error_line(train_in_process(args, capsys, tmp_path), str(logs), "--resume")
    assert {path.name: path.read_bytes() for path in logs.iterdir() if path.is_file()} == before


@pytest.mark.parametrize("name", ["config.json", "summary.json", "events.out.tfevents.1.host"])
def test_a_log_dir_holding_any_run_log_exits_2_and_keeps_it(
    flagfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Not only metrics: a folder with a ``config.json`` (a project's own, or an aborted run's), a
    summary or TensorBoard events would have them replaced or mixed with this run's."""
    logs = tmp_path / "mine"
    logs.mkdir()
    (logs / name).write_text("keep me\n")
    args = [f"--flagfile={flagfile}", f"--log_dir={logs}", f"--run_dir={tmp_path / 'new'}"]
    assert_one_error_line(train_in_process(args, capsys, tmp_path), str(logs), name, "--resume")
    assert [path.name for path in logs.iterdir()] == [name] and (logs / name).read_text() == "keep me\n"
    assert not (tmp_path / "new").exists()


def test_a_checkpoint_dir_holding_other_files_exits_2_and_keeps_them(
    flagfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Numbered folders of the user's in ``--checkpoint_dir`` would be taken for steps and deleted
    past ``--keep``: such a folder is refused in one line and left as it was."""
    mine = tmp_path / "mine"
    (mine / "1").mkdir(parents=True)
    (mine / "1" / "important.txt").write_text("keep me\n")
    args = [f"--flagfile={flagfile}", f"--checkpoint_dir={mine}", "--keep=1", f"--run_dir={tmp_path / 'new'}"]
    assert_one_error_line(train_in_process(args, capsys, tmp_path), str(mine), "not checkpoints")
    assert (mine / "1" / "important.txt").read_text() == "keep me\n"


def test_resume_with_a_conflicting_flag_exits_2(
    finished: FinishedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "--resume",
        f"--checkpoint_dir={finished.checkpoint_dir}",
        f"--total_timesteps={10 * TINY.total_timesteps}",
        f"--run_dir={tmp_path}",
    ]
    # A longer run is another run: the refusal says how to train on from this one.
    outcome = train_in_process(args, capsys, tmp_path)
    assert_one_error_line(outcome, "total_timesteps", f"--init_from={finished.checkpoint_dir}")
    assert policy_checkpoint.load_policy(finished.checkpoint_dir).step == TINY.num_updates  # untouched


def test_resume_from_a_missing_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--resume", f"--checkpoint_dir={tmp_path / 'none'}", f"--run_dir={tmp_path}"]
    assert_one_error_line(train_in_process(args, capsys, tmp_path), "does not exist")


def test_helpfull_lists_every_flag_with_its_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app.define_help_flags()  # what app.run does before parsing (idempotent)
    outcome = train_in_process(["--helpfull"], capsys, tmp_path)
    assert outcome.code == 0, outcome.report()  # absl exits 1 after its help: asked-for help is a success
    assert "Traceback" not in outcome.stderr
    text = outcome.stdout
    for field in dataclasses.fields(TrainConfig):
        assert f"--{field.name}:" in text or f"--[no]{field.name}:" in text, field.name
    for phrase in ("Jobs simulated in parallel", "Continue from the latest checkpoint", "--flagfile"):
        assert phrase in text


def test_sigterm_saves_a_checkpoint_and_exits_143(flagfile: Path, tmp_path: Path, compiled: Compiled) -> None:
    log_dir = tmp_path / "logs"
    checkpoint_dir = tmp_path / "checkpoints"
    process = subprocess.Popen(
        cli_command(
            f"--flagfile={flagfile}",
            "--total_timesteps=1000000000",  # never finishes on its own
            "--save_interval=1000000000",  # the only checkpoint is the one the signal asks for
            "--eval_episodes=0",
            "--noprogress",
            f"--run_dir={tmp_path}",
        ),
        cwd=REPO_ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + CLI_TIMEOUT_S
        metrics = log_dir / "metrics.jsonl"
        while not (metrics.exists() and metrics.read_text().strip()):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no metrics line before the timeout"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    report = f"exit {process.returncode}\nstdout: {stdout[-2000:]}\nstderr: {stderr[-3000:]}"
    assert process.returncode == 128 + signal.SIGTERM, report
    assert "Traceback" not in stderr, report
    last_update = read_jsonl(metrics)[-1]["update"]
    assert f"SIGTERM: saved checkpoint at update {last_update}" in stderr, report  # a status line

    policy = policy_checkpoint.load_policy(checkpoint_dir)
    assert policy.step == last_update
    restored = ckpt.restore_state(checkpoint_dir, compiled.fresh())
    assert int(restored.update) == last_update
    assert trees_equal(restored.params, policy.params)


# The CLI with the loss of its second chunk replaced by NaN (no flags reliably make the loss NaN).
NAN_ON_SECOND_CHUNK = """
import sys
from slamorl_jax import run_dirs, train, training_loop
real_summarise = training_loop.summarise
calls = []
def summarise(metrics):
    calls.append(1)
    out = real_summarise(metrics)
    return {**out, "loss": float("nan")} if len(calls) == 2 else out
training_loop.summarise = summarise
sys.argv = ["slamorl_jax.train", *sys.argv[1:]]
train.run()
"""


def test_cli_exits_3_on_a_non_finite_loss_and_keeps_the_metrics_that_show_it(
    flagfile: Path, tmp_path: Path
) -> None:
    """A run that diverged before its first save removed its whole new folder, the metrics of the
    updates before the divergence with it (up to 9 chunks' at the defaults). The last good
    checkpoint, when there is one, is kept too (the in-process test below)."""
    run_dir = tmp_path / "run"
    command = cli_command(
        f"--flagfile={flagfile}",
        "--save_interval=1000",  # no save before the second chunk diverges
        "--eval_episodes=0",
        "--noprogress",
        f"--run_dir={run_dir}",
    )
    command[1:3] = ["-c", NAN_ON_SECOND_CHUNK]  # instead of -m slamorl_jax.train
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=cli_env(), capture_output=True, text=True, timeout=CLI_TIMEOUT_S
    )
    assert result.returncode == 3, result.stderr[-3000:]
    assert "non-finite loss" in result.stderr and "Traceback" not in result.stderr
    assert "No checkpoint had been saved yet. Its metrics up to there are in" in result.stderr
    assert [r["update"] for r in read_jsonl(run_dir / "logs" / "metrics.jsonl")] == [TINY.updates_per_chunk]
    assert not ckpt.has_checkpoint(run_dir / "checkpoints")
    assert not (run_dir / "logs" / "summary.json").exists()


def test_a_run_that_diverges_in_its_first_chunk_leaves_no_folder(
    flagfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing logged and nothing saved there is nothing to keep: the logger's empty
    ``metrics.jsonl`` (made before the first chunk) is no reason to leave the run's new folders."""
    real_summarise = training_loop.summarise
    monkeypatch.setattr(training_loop, "summarise", lambda m: {**real_summarise(m), "loss": float("nan")})
    run_dir = tmp_path / "run"
    args = [f"--flagfile={flagfile}", f"--run_dir={run_dir}", "--eval_episodes=0", "--progress=false"]
    outcome = train_in_process(args, capsys, tmp_path)
    assert outcome.code == 3 and "No checkpoint had been saved yet." in outcome.stderr, outcome.report()
    assert "Its metrics" not in outcome.stderr and not run_dir.exists(), outcome.report()


def run_options(root: Path, **overrides: Any) -> training_loop.RunOptions:
    """In-process run options: checkpoints after every chunk, no evaluation, no progress bar."""
    values: dict[str, Any] = {
        "checkpoint_dir": root / "checkpoints",
        "log_dir": root / "logs",
        "save_interval": TINY.updates_per_chunk,
        "eval_episodes": 0,
        "progress": False,
        **overrides,
    }
    return training_loop.RunOptions(**values)


def nan_loss_on_second_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the loop see a NaN loss after its second chunk (in process)."""
    calls = []
    real_summarise = training_loop.summarise

    def summarise(metrics: dict[str, Any]) -> dict[str, float]:
        calls.append(1)
        out = real_summarise(metrics)
        return {**out, "loss": float("nan")} if len(calls) == 2 else out

    monkeypatch.setattr(training_loop, "summarise", summarise)


def test_non_finite_loss_stops_with_exit_3_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, compiled: Compiled, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_summarise = training_loop.summarise
    nan_loss_on_second_chunk(monkeypatch)
    options = run_options(tmp_path)
    assert training_loop.run_training(TINY, options) == training_loop.EXIT_NON_FINITE == 3
    out = capsys.readouterr().err  # a status line: stderr, as every other
    assert "non-finite loss" in out and f"update {TINY.updates_per_chunk}" in out
    kept = sorted(int(p.name) for p in options.checkpoint_dir.iterdir() if p.name.isdigit())
    assert kept == [TINY.updates_per_chunk]
    assert len(read_jsonl(options.log_dir / "metrics.jsonl")) == 1
    assert policy_checkpoint.load_policy(options.checkpoint_dir).step == TINY.updates_per_chunk

    # The kept checkpoint is a good place to resume: the finished run equals an uninterrupted one.
    monkeypatch.setattr(training_loop, "summarise", real_summarise)
    assert training_loop.run_training(TINY, dataclasses.replace(options, resume=True)) == 0
    straight, _ = compiled.run(compiled.fresh(), TINY.num_chunks)
    resumed = ckpt.restore_state(options.checkpoint_dir, compiled.fresh())
    assert int(resumed.update) == TINY.num_updates
    assert trees_equal(resumed, straight)
    updates = [r["update"] for r in read_jsonl(options.log_dir / "metrics.jsonl")]
    assert updates == list(range(TINY.updates_per_chunk, TINY.num_updates + 1, TINY.updates_per_chunk))


def stop_after_first_chunk(monkeypatch: pytest.MonkeyPatch, signum: int) -> None:
    """Make the loop's first ``summarise`` call deliver ``signum`` to the installed handler.

    The handler is called directly (no real signal), so a missing handler fails the test instead of
    killing the test process.
    """
    calls = []
    real_summarise = training_loop.summarise

    def summarise(metrics: dict[str, Any]) -> dict[str, float]:
        calls.append(1)
        if len(calls) == 1:
            handler = signal.getsignal(signum)
            assert isinstance(handler, training_loop.StopRequest)
            handler(signum, None)  # what the signal arriving during the chunk would do
        return real_summarise(metrics)

    monkeypatch.setattr(training_loop, "summarise", summarise)


def test_stop_signal_right_after_a_periodic_save_exits_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop_after_first_chunk(monkeypatch, signal.SIGTERM)
    options = run_options(tmp_path)  # saves after every chunk
    assert training_loop.run_training(TINY, options) == 128 + signal.SIGTERM
    assert policy_checkpoint.load_policy(options.checkpoint_dir).step == TINY.updates_per_chunk


def test_stop_signal_in_process_saves_and_resume_continues_exactly(
    tmp_path: Path, compiled: Compiled, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_summarise = training_loop.summarise
    stop_after_first_chunk(monkeypatch, signal.SIGINT)
    options = run_options(tmp_path, save_interval=10**6)
    assert training_loop.run_training(TINY, options) == 128 + signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is not None
    assert not isinstance(signal.getsignal(signal.SIGINT), training_loop.StopRequest)  # restored
    assert policy_checkpoint.load_policy(options.checkpoint_dir).step == TINY.updates_per_chunk

    monkeypatch.setattr(training_loop, "summarise", real_summarise)
    capsys.readouterr()
    assert training_loop.run_training(TINY, dataclasses.replace(options, resume=True)) == 0
    # it said where it went on from (it said nothing of it)
    assert f"resume: from update {TINY.updates_per_chunk} of {TINY.num_updates}" in capsys.readouterr().err
    resumed = policy_checkpoint.load_policy(options.checkpoint_dir)
    straight, _ = compiled.run(compiled.fresh(), TINY.num_chunks)
    assert resumed.step == TINY.num_updates
    assert trees_equal(resumed.params, straight.params)
    summary = json.loads((options.log_dir / "summary.json").read_text())
    assert summary["env_steps_this_run"] == (TINY.num_updates - TINY.updates_per_chunk) * TINY.batch_size
    assert np.isfinite(summary["steps_per_s"])


def test_argparse_negations_of_boolean_flags_read_as_absl_ones() -> None:
    """``--no-progress`` (evaluate's spelling) turns the progress bar off as ``--noprogress`` does;
    ``--no-NAME`` of a flag that is not boolean, or not a flag, stays as it is for absl to refuse."""
    assert train.absl_spelling("--no-progress") == "--noprogress"
    assert train.absl_spelling("--no-moves_leave_contention") == "--nomoves_leave_contention"
    assert train.absl_spelling("-h") == "--help"
    for kept in ("--no-seed", "--no-such_flag", "--noprogress", "--progress", "--", "-x"):
        assert train.absl_spelling(kept) == kept
    try:
        train.parse_flags(["slamorl_jax.train", "--no-progress"])
        assert train.FLAGS.progress is False
    finally:
        train.FLAGS.unparse_flags()


@pytest.mark.parametrize("resume", [False, True])
def test_a_checkpoint_dir_named_checkpoints_keeps_the_logs_beside_it(resume: bool, tmp_path: Path) -> None:
    """``--checkpoint_dir=<X>/checkpoints`` alone: a resumed run logged to ``<X>/logs`` and a started
    one to a new ``runs/<date-time>/logs``, so a run's metrics ended up in two folders."""
    run = tmp_path / "X"
    try:
        train.parse_flags(["train", f"--checkpoint_dir={run / 'checkpoints'}", f"--resume={resume}"])
        assert not train.default_run_dir_needed()
        assert train.resolve_paths()[:2] == (run / "checkpoints", run / "logs")
        train.parse_flags(["train", f"--checkpoint_dir={tmp_path / 'ck'}", f"--resume={resume}"])
        assert train.default_run_dir_needed()  # another name: its logs go to a new run folder
    finally:
        train.FLAGS.unparse_flags()
