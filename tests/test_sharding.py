"""Scale-out: the env batch sharded over devices and processes gives the single-device results.

A fake device count must be set before JAX starts, so the sharded runs are subprocesses
(``sharded_worker.py``) that train ``TINY`` and print their parameters; this process trains the same
config with plain ``jax.jit`` (the compilation the other learner tests share). The multi-process
training runs (two processes on localhost joined by ``jax.distributed``) are slow tests; the
refusal tests join two real processes in the default suite.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import jax
import numpy as np
import pytest
from cli_harness import TRAIN_ERROR
from learner_fixtures import REPO_ROOT, TINY, Compiled, cli_flags, shared_trainer

from slamorl_jax import run_dirs
from slamorl_jax.distributed import (
    CoordinatorError,
    DistributedOptions,
    check_coordinator,
    port_in_use,
    resolve,
)
from slamorl_jax.distributed_agreement import StartRefusedError, agree_to_start, agreement_pending
from slamorl_jax.distributed_start import early_options, expand_flagfiles
from slamorl_jax.policy_checkpoint import load_policy
from slamorl_jax.sharding import check_divisible
from slamorl_jax.xla_flags import fake_cpu_devices_env

WORKER = Path(__file__).resolve().parent / "sharded_worker.py"
TIMEOUT_S = 300
# Sums over 8 devices' shares instead of one: float32 rounding, nothing more.
PARAM_ATOL = 1e-5
METRIC_RTOL = 1e-4


def worker_env(devices: int) -> dict[str, str]:
    """The environment of a helper process with ``devices`` fake CPU devices and the tests' cache."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {
        **fake_cpu_devices_env(devices),
        "PYTHONPATH": path,
        "SLAMORL_JAX_TEST_CACHE": jax.config.jax_compilation_cache_dir or "",
    }


@dataclasses.dataclass
class Worker:
    """A running ``sharded_worker.py`` whose output goes to files (a pipe left unread would block it)."""

    process: subprocess.Popen[bytes]
    out: Path
    err: Path

    def records(self) -> list[dict]:
        """The JSON lines of the finished worker (its stderr in the failure message)."""
        self.process.wait(timeout=TIMEOUT_S)
        assert self.process.returncode == 0, self.stderr()[-2000:]
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.startswith("{")]

    def stderr(self) -> str:
        """What the worker wrote to stderr so far."""
        return self.err.read_text(errors="replace")


def start_worker(folder: Path, devices: int, *args: str) -> Worker:
    """Start ``sharded_worker.py`` with ``args``, its output in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    out, err = folder / "stdout", folder / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            cwd=REPO_ROOT,
            env=worker_env(devices),
            stdout=stdout,
            stderr=stderr,
        )
    return Worker(process, out, err)


def flat_params(params: object) -> np.ndarray:
    """Every parameter in one vector (leaves in tree order)."""
    return np.concatenate([np.asarray(leaf, np.float64).ravel() for leaf in jax.tree.leaves(params)])


def single_device_chunk(reference: Compiled) -> tuple[np.ndarray, dict]:
    """This process's first chunk of ``TINY`` (plain ``jax.jit``): its parameters and metrics."""
    state, history = reference.run(reference.fresh(), 1)
    return flat_params(jax.device_get(state.params)), history[0]


def assert_matches_single_device(record: dict, expected: tuple[np.ndarray, dict]) -> None:
    """A worker's first chunk agrees with the single-device chunk within float rounding."""
    params, metrics = expected
    got = np.concatenate([np.asarray(leaf) for leaf in record["params"]])
    np.testing.assert_allclose(got, params, atol=PARAM_ATOL, rtol=0)
    for name, value in metrics.items():
        np.testing.assert_allclose(record["metrics"][name], float(value), rtol=METRIC_RTOL, atol=1e-6)


def cli_divisibility_run(run_dir: Path) -> subprocess.Popen[str]:
    """The training CLI on 8 fake devices with 12 jobs (not a multiple of 8), into ``run_dir``."""
    flags = [f for f in cli_flags(TINY) if not f.startswith("--num_envs=")]
    return subprocess.Popen(
        [sys.executable, "-m", "slamorl_jax.train", *flags, "--num_envs=12", f"--run_dir={run_dir}"],
        cwd=REPO_ROOT,
        env=worker_env(8),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_eight_devices_match_one_and_num_envs_must_divide(tmp_path: Path) -> None:
    """The first chunk on 8 fake devices is the single-device one up to float rounding, its
    checkpoint loads in this one-device process (orbax restores onto the template's device, not the
    saved topology), and a --num_envs that 8 does not divide is refused in one line."""
    eight = start_worker(tmp_path, 8, f"--save={tmp_path / 'checkpoints'}")
    refused = cli_divisibility_run(tmp_path / "unused")
    try:
        expected = single_device_chunk(shared_trainer(TINY))  # while the subprocesses run
        _, err = refused.communicate(timeout=TIMEOUT_S)
        assert refused.returncode == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "--num_envs=12" in lines[0] and "8 devices" in lines[0], err
        assert not (tmp_path / "unused").exists()
        (record,) = eight.records()
    finally:  # a failed assertion leaves no process running after the test
        for process in (eight.process, refused):
            if process.poll() is None:
                process.kill()
                process.wait()
    assert record["devices"] == 8 and record["update"] == TINY.updates_per_chunk
    assert_matches_single_device(record, expected)
    policy = load_policy(tmp_path / "checkpoints")
    assert policy.step == record["update"] and jax.device_count() == 1
    np.testing.assert_array_equal(flat_params(policy.params), np.concatenate(record["params"]))


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_global_shuffle_on_eight_devices_matches_one(tmp_path: Path) -> None:
    """``--minibatch_shuffle=global`` (every pass shuffles all steps together, gathering the sharded
    rollout) trains the same on 8 fake devices as with plain ``jax.jit`` on one."""
    eight = start_worker(tmp_path / "eight", 8, "--global_shuffle")
    one = start_worker(tmp_path / "one", 1, "--global_shuffle", "--no_mesh")
    (record,) = eight.records()
    (single,) = one.records()
    assert record["devices"] == 8 and single["devices"] == 1
    params = np.concatenate([np.asarray(leaf) for leaf in single["params"]])
    assert_matches_single_device(record, (params, single["metrics"]))


def test_divisibility_message() -> None:
    check_divisible(64, 8)
    with pytest.raises(ValueError, match=r"--num_envs=12 must be a multiple of the 8 devices"):
        check_divisible(12, 8)


def test_multi_process_flags_in_a_flagfile_join_at_start_up(tmp_path: Path) -> None:
    """A ``--flagfile`` holding ``--distributed`` is read before the run joins (it used to be missed
    there, and the run was then told to start the way it had been started); a file that cannot be
    read is left for absl to report."""
    inner = tmp_path / "inner.flags"
    inner.write_text("--process_id=1\n")
    outer = tmp_path / "run.flags"
    outer.write_text(f"# the cluster\n--distributed\n--num_processes=2\n--flagfile={inner}\n")
    args = expand_flagfiles(["train", f"--flagfile={outer}", "--num_envs=8"])
    options = early_options(args[1:])
    assert (options.enabled, options.num_processes, options.process_id) == (True, 2, 1)
    missing = ["train", f"--flagfile={tmp_path / 'none.flags'}"]
    assert expand_flagfiles(missing) == missing


def test_distributed_settings_from_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    assert not resolve(DistributedOptions()).enabled
    args = ["--num_envs=8", "--coordinator_address", "host:1234", "--num_processes=4", "--process_id", "3"]
    options = resolve(early_options(args))
    assert (options.enabled, options.coordinator_address, options.num_processes, options.process_id) == (
        True,
        "host:1234",
        4,
        3,
    )
    assert early_options(["--distributed"]).enabled and not early_options(["--nodistributed"]).enabled
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "10.0.0.1:5000")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    monkeypatch.setenv("JAX_PROCESS_ID", "1")
    options = resolve(DistributedOptions())
    assert (options.enabled, options.num_processes, options.process_id) == (True, 2, 1)
    assert resolve(DistributedOptions(coordinator_address="[::1]:65535")).coordinator_address == "[::1]:65535"
    for bad, phrase in (
        (DistributedOptions(num_processes=2, process_id=2), "--process_id=2 must be less than"),
        (DistributedOptions(coordinator_address="nohost"), "host:port"),
        # XLA aborts the process (exit 134, no message) on a port out of range: refused first.
        (
            DistributedOptions(coordinator_address="localhost:99999", num_processes=2),
            "port in \\[1, 65535\\]",
        ),
        (DistributedOptions(coordinator_address="localhost:0"), "host:port"),
        (DistributedOptions(coordinator_address=":1234"), "host:port"),
        (DistributedOptions(coordinator_address="localhost:http"), "host:port"),
        (DistributedOptions(coordinator_address="localhost:\u0661\u0662\u0663"), "host:port"),  # not ASCII
        (DistributedOptions(heartbeat_timeout_s=0), "--distributed_heartbeat_s"),
        (DistributedOptions(enabled=True, num_processes=10**30), "--num_processes must be in"),
    ):
        with pytest.raises(ValueError, match=phrase):
            resolve(bad)
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS")
    with pytest.raises(ValueError, match="--process_id needs --distributed"):
        resolve(DistributedOptions(process_id=1))
    monkeypatch.setenv("JAX_PROCESS_ID", "first")
    with pytest.raises(ValueError, match="JAX_PROCESS_ID must be an integer"):
        resolve(DistributedOptions(enabled=True))


def test_settings_from_the_environment_are_named_by_their_variable_and_nodistributed_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``JAX_COORDINATOR_ADDRESS=foo`` was reported as a bad ``--coordinator_address``, a flag never
    given, and an address in the environment joined a run that said ``--nodistributed``."""
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "foo")
    with pytest.raises(ValueError, match=r"^environment variable JAX_COORDINATOR_ADDRESS must be host:port"):
        resolve(DistributedOptions())
    assert not resolve(early_options(["--nodistributed"])).enabled  # the environment does not apply
    with pytest.raises(ValueError, match="--coordinator_address needs --distributed"):
        resolve(DistributedOptions(enabled=False, coordinator_address="host:1234"))
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "host:1234")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "0")
    with pytest.raises(ValueError, match=r"^environment variable JAX_NUM_PROCESSES must be in"):
        resolve(DistributedOptions())
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    monkeypatch.setenv("JAX_PROCESS_ID", "2")
    with pytest.raises(ValueError, match="JAX_PROCESS_ID=2 must be less than environment variable JAX_NUM"):
        resolve(DistributedOptions())
    with pytest.raises(ValueError, match=r"^--process_id=2 must be less than --num_processes=2"):
        resolve(DistributedOptions(num_processes=2, process_id=2))


def test_the_early_reading_takes_the_flags_as_absl_does() -> None:
    """absl takes ``-flag`` and ``t``/``f``; the early reading missed the one (and then told the run
    to start as it had been started) and refused the other, and took ``yes``, which absl refuses."""
    options = early_options(["-coordinator_address=127.0.0.1:1234", "-num_processes", "2", "-process_id=1"])
    assert (options.coordinator_address, options.num_processes, options.process_id) == (
        "127.0.0.1:1234",
        2,
        1,
    )
    assert early_options(["--distributed=t"]).enabled and not early_options(["-distributed=F"]).enabled
    assert early_options(["-distributed"]).enabled and early_options(["-nodistributed"]).enabled is False
    assert early_options(["--num_envs=8"]).enabled is None  # not given
    assert early_options(["--process_id", "-1"]).process_id == -1  # a value, not a flag (refused later)
    with pytest.raises(ValueError, match="--distributed must be true or false, got 'yes'"):
        early_options(["--distributed=yes"])


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_pair(folder: Path, chunks: int, heartbeat_s: int = 100) -> list[Worker]:
    """Two worker processes (one fake device each) joined into one run."""
    port = free_port()
    return [
        start_worker(
            folder / f"process-{i}",
            1,
            f"--chunks={chunks}",
            f"--coordinator=127.0.0.1:{port}",
            "--processes=2",
            f"--process_id={i}",
            f"--heartbeat_s={heartbeat_s}",
        )
        for i in range(2)
    ]


HEARTBEAT_S = 5
GIVE_UP_S = 90  # far beyond the heartbeat: a survivor still running then is hanging


def first_complete_record(worker: Worker) -> dict | None:
    """The worker's first JSON line once it is written whole (a line still being written has no
    newline yet), else ``None``."""
    complete_lines = worker.out.read_text().split("\n")[:-1]
    line = next((line for line in complete_lines if line.startswith("{")), None)
    return None if line is None else json.loads(line)


def first_records(pair: list[Worker]) -> list[dict]:
    """Each running worker's first JSON line, once both have written one (both are training)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        records = [first_complete_record(worker) for worker in pair]
        if all(record is not None for record in records):
            return records
        for worker in pair:
            assert worker.process.poll() is None and time.monotonic() < deadline, worker.stderr()[-2000:]
        time.sleep(0.5)


def kill_and_expect_the_survivor_to_fail(victim: Worker, survivor: Worker) -> None:
    """SIGKILL ``victim``; ``survivor`` must end with an error naming the lost peer, not hang."""
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait()
    killed_at = time.monotonic()
    try:
        survivor.process.wait(timeout=GIVE_UP_S)
    except subprocess.TimeoutExpired:
        survivor.process.kill()
        pytest.fail(f"the surviving process still runs {GIVE_UP_S} s after its peer was killed")
    assert survivor.process.returncode != 0
    assert time.monotonic() - killed_at < GIVE_UP_S
    err = survivor.stderr()
    # JAX's own words: the task that stopped sending heartbeats, or that another task died.
    assert any(phrase in err for phrase in ("heartbeat", "unhealthy", "another task died")), err[-2000:]


@pytest.fixture
def endless_pair(tmp_path: Path) -> Iterator[list[Worker]]:
    """Two workers joined into one run of (practically) endless chunks, heartbeat ``HEARTBEAT_S``;
    whatever the test does, neither outlives it."""
    pair = start_pair(tmp_path, chunks=100_000, heartbeat_s=HEARTBEAT_S)
    try:
        yield pair
    finally:
        for worker in pair:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()


# slow: two training processes compiling beside the suite, then a heartbeat window (22-28 s on the
# 2-core machine). The default suite joins two real processes in the refusal tests below and
# checks sharded training on 8 devices (test_eight_devices_match_one_and_num_envs_must_divide).
@pytest.mark.slow
def test_two_processes_agree_then_killing_the_worker_ends_the_coordinator(endless_pair: list[Worker]) -> None:
    """Two processes on localhost train together: after the first chunk both hold the same
    parameters, those of one device; then the worker is killed mid-run and the coordinator exits
    with an error within the heartbeat window instead of hanging. One pair serves both checks, so
    the slow run starts (and compiles) it once."""
    pair = endless_pair
    expected = single_device_chunk(shared_trainer(TINY))  # while the pair compiles
    first, second = first_records(pair)
    assert first["processes"] == second["processes"] == 2
    assert first["devices"] == 2
    assert first["params_sha256"] == second["params_sha256"]
    assert_matches_single_device(first, expected)
    kill_and_expect_the_survivor_to_fail(victim=pair[1], survivor=pair[0])


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_killing_the_coordinator_ends_the_worker_with_an_error(endless_pair: list[Worker]) -> None:
    """A killed coordinator: the worker exits with an error within the heartbeat window instead of
    hanging."""
    first_records(endless_pair)
    kill_and_expect_the_survivor_to_fail(victim=endless_pair[0], survivor=endless_pair[1])


def test_bad_multi_process_settings_are_one_line_errors(tmp_path: Path) -> None:
    env = {k: v for k, v in worker_env(1).items() if not k.startswith(("SLURM_", "JAX_COORDINATOR", "OMPI_"))}
    cases = {
        ("--distributed",): "no SLURM or other cluster detected",
        ("--distributed", "--process_id=-1"): "--process_id must be >= 0",
        ("--coordinator_address=nohost",): "host:port",
    }
    runs = {
        args: subprocess.Popen(
            [sys.executable, "-m", "slamorl_jax.train", *args, f"--run_dir={tmp_path / 'run'}"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in cases
    }
    for args, process in runs.items():
        _, err = process.communicate(timeout=TIMEOUT_S)
        assert process.returncode == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and cases[args] in lines[0], err
    assert not (tmp_path / "run").exists()


def test_fake_device_env_replaces_the_count_and_keeps_other_flags() -> None:
    """A child's environment for N fake devices: CPU only, the count replaced, other flags kept."""
    base = {"XLA_FLAGS": "--xla_backend_optimization_level=1 --xla_force_host_platform_device_count=3"}
    env = fake_cpu_devices_env(8, base)
    assert env["XLA_FLAGS"].split() == [
        "--xla_backend_optimization_level=1",
        "--xla_force_host_platform_device_count=8",
    ]
    assert env["JAX_PLATFORMS"] == "cpu" and base["XLA_FLAGS"].endswith("=3")  # the base is untouched
    assert fake_cpu_devices_env(2, {})["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"


def run_env() -> dict[str, str]:
    """The environment of one process of a two-process test run: one CPU device, no cluster's
    variables (a SLURM job running the suite would otherwise fill in what the flags leave out)."""
    return {
        k: v for k, v in worker_env(1).items() if not k.startswith(("SLURM_", "JAX_COORDINATOR", "OMPI_"))
    }


def pair_command(port: int, process_id: int, *flags: str) -> list[str]:
    """``python -m slamorl_jax.train`` as process ``process_id`` of two, its coordinator on ``port``."""
    return [
        sys.executable,
        "-m",
        "slamorl_jax.train",
        f"--coordinator_address=127.0.0.1:{port}",
        "--num_processes=2",
        f"--process_id={process_id}",
        *flags,
    ]


def start_training_pair(
    run_dir_of: Callable[[int], Path],
    flags: tuple[str, ...] = ("--num_envs=64",),
    logs: Path | None = None,
    extra_of: Callable[[int], tuple[str, ...]] = lambda i: (),
) -> list[subprocess.Popen[str]]:
    """Two real ``python -m slamorl_jax.train`` processes of one run on a free port, process ``i``
    given ``--run_dir=run_dir_of(i)`` and ``flags``; their output goes to pipes, or with ``logs`` to
    ``logs/<i>.txt`` (a process that trains writes more than a pipe holds while the test waits on
    the other one, and would block there)."""
    port = free_port()
    processes = []
    for process_id in (0, 1):
        args = [*flags, *extra_of(process_id), f"--run_dir={run_dir_of(process_id)}"]
        output = subprocess.PIPE
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
            output = (logs / f"{process_id}.txt").open("w")
        processes.append(
            subprocess.Popen(
                pair_command(port, process_id, *args),
                cwd=REPO_ROOT,
                env=run_env(),
                stdout=output,
                stderr=subprocess.STDOUT if logs is not None else subprocess.PIPE,
                text=True,
            )
        )
        if logs is not None:
            output.close()  # the child holds its own copy
    return processes


def refusal_lines(processes: list[subprocess.Popen[str]]) -> list[str]:
    """Each process's one stderr line, after asserting it exited with status 2 and wrote one line;
    every process is ended whatever happens."""
    try:
        lines = []
        for process in processes:
            _, err = process.communicate(timeout=TIMEOUT_S)
            assert process.returncode == 2, err
            assert len(err.strip().splitlines()) == 1, err
            lines.append(err.strip())
        return lines
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_a_process_that_cannot_start_stops_every_process_of_the_run_with_its_reason(tmp_path: Path) -> None:
    """Two runs of two processes each, in which one process (the coordinator in one run, the worker
    in the other) is given a --run_dir its host cannot create: every process ends within seconds with
    status 2 and one line, the refusing one with its own reason and the other naming that process
    and the same reason, and no process leaves a folder behind. (Without the agreement the healthy
    process trained on, into a collectives timeout whose message named no cause.)"""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    runs = {
        refusing: start_training_pair(
            lambda i, refusing=refusing: blocker / "run" if i == refusing else tmp_path / f"run-{refusing}"
        )
        for refusing in (0, 1)
    }
    errors = {refusing: refusal_lines(processes) for refusing, processes in runs.items()}
    for refusing, lines in errors.items():
        reason = lines[refusing]
        assert reason.startswith(f"{TRAIN_ERROR} --run_dir ") and "is a file" in reason, reason
        assert lines[1 - refusing] == (
            f"{TRAIN_ERROR} process {refusing} of 2 cannot start: " + reason.removeprefix(f"{TRAIN_ERROR} ")
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_multi_process_run_cannot_start_in_a_folder_another_run_trains_in(tmp_path: Path) -> None:
    """Process 0 takes the folder's training lock for the run, as a single-process run does: a second
    run into a folder a run holds is refused by all its processes (it trained into it, and one run's
    metrics were lost when the other rewrote the log)."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    held = run_dirs.lock_run_dir(run_dir / "checkpoints")  # the other run
    try:
        lines = refusal_lines(start_training_pair(lambda i: run_dir))
    finally:
        run_dirs.unlock_run_dir(held)
    assert "is in use by another training run" in lines[0], lines
    assert lines[1] == f"{TRAIN_ERROR} process 0 of 2 cannot start: " + lines[0].removeprefix(
        f"{TRAIN_ERROR} "
    )
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints"]


def test_a_single_process_run_agrees_with_itself() -> None:
    """Outside a multi-process run the agreement is this process's own answer: nothing to wait for."""
    assert not agreement_pending()
    agree_to_start(None, timeout_s=1)
    with pytest.raises(StartRefusedError, match=r"^no folder$"):
        agree_to_start("no folder", timeout_s=1)


class FakeCoordinationClient:
    """The key-value store and barriers of JAX's coordination service, for processes played by
    threads of this one: what ``check_shared`` uses of it."""

    def __init__(self, count: int) -> None:
        self.values: dict[str, str] = {}
        self.changed = threading.Condition()
        self.barriers: dict[str, threading.Barrier] = {}
        self.count = count

    def key_value_set(self, key: str, value: str) -> None:
        with self.changed:
            self.values[key] = value
            self.changed.notify_all()

    def blocking_key_value_get(self, key: str, timeout_ms: int) -> str:
        with self.changed:
            if not self.changed.wait_for(lambda: key in self.values, timeout_ms / 1000):
                raise RuntimeError(f"DEADLINE_EXCEEDED: {key}")
            return self.values[key]

    def wait_at_barrier(self, name: str, timeout_ms: int) -> None:
        with self.changed:
            barrier = self.barriers.setdefault(name, threading.Barrier(self.count))
        barrier.wait(timeout_ms / 1000)


@pytest.mark.parametrize("case", ["shared", "not shared", "unwritable", "unreadable"])
def test_processes_that_do_not_share_the_checkpoint_folder_all_stop(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On separate disks each process wrote a checkpoint folder of its own, and all of them waited
    at the first save for orbax's 600 s. Process 0 now writes a file in the folder that every
    process must see; here process 1's folder is another one when the disk is not shared, and
    process 0's is missing when it cannot write it (every process stops with its reason)."""
    from slamorl_jax.distributed_agreement import check_shared

    shared = case == "shared"
    folders = [
        tmp_path / ("gone" if case == "unwritable" else "a"),
        tmp_path / ("b" if case == "not shared" else "a"),
    ]
    for folder in folders[1:] if case == "unwritable" else folders:
        folder.mkdir(exist_ok=True)
    if case == "unreadable":  # process 1 may not look into the folder: it must still post, not hang
        real_is_file = Path.is_file

        def is_file(path: Path) -> bool:
            if threading.current_thread().name == "process-1":
                raise PermissionError(13, "Permission denied", str(path))
            return real_is_file(path)

        monkeypatch.setattr(Path, "is_file", is_file)
    real_unlink = Path.unlink

    def slow_unlink(path: Path, missing_ok: bool = False) -> None:  # process 0 removes its marker late
        time.sleep(0.3)
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", slow_unlink)
    client = FakeCoordinationClient(2)
    outcomes: list[BaseException | None] = [None, None]

    left_on_return: list[str] = []

    def process(me: int) -> None:
        try:
            check_shared(client, me, 2, 10_000, folders[me])
            # what the run's folder checks would find next (a marker there was "not a checkpoint")
            left_on_return.extend(p.name for p in folders[me].iterdir() if p.name.startswith(".shared"))
        except BaseException as error:
            outcomes[me] = error

    threads = [threading.Thread(target=process, args=(me,), name=f"process-{me}") for me in (0, 1)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert time.monotonic() - started < 9  # no process waited out the 10 s a wait may take
    if shared:
        assert outcomes == [None, None] and left_on_return == []
    else:
        assert all(isinstance(error, StartRefusedError) for error in outcomes), outcomes
        said = (
            "process 0 cannot write in" if case == "unwritable" else "process 1 of 2 does not see process 0's"
        )
        assert all(said in str(error) for error in outcomes), outcomes
    kept = [path for folder in folders if folder.is_dir() for path in folder.iterdir()]
    assert not [path for path in kept if path.name.startswith(".shared")]


# slow: trains a two-process run twice (about 40 s)
@pytest.mark.slow
def test_a_multi_process_resume_sets_a_damaged_step_aside_once(tmp_path: Path) -> None:
    """Every process of a resumed run found the damaged newest step, and each renamed it: one rename
    failed, that process died, and the other hung in orbax's next collective for minutes. Now process
    0 alone sets it aside, and the run continues from the step before."""
    run_dir = tmp_path / "run"
    flags = (
        *cli_flags(TINY),
        "--eval_episodes=0",
        "--progress=false",
        f"--save_interval={TINY.updates_per_chunk}",
    )
    first = start_training_pair(lambda i: run_dir, flags, logs=tmp_path / "first")
    assert finished_codes(first) == [0, 0], read_logs(tmp_path / "first")
    steps = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert len(steps) >= 2, steps
    (run_dir / "checkpoints" / str(steps[-1]) / "state" / "manifest.ocdbt").write_bytes(b"damaged")
    resumed = start_training_pair(lambda i: run_dir, (*flags, "--resume"), logs=tmp_path / "resumed")
    codes = finished_codes(resumed)
    outputs = read_logs(tmp_path / "resumed")
    assert codes == [0, 0], outputs
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.name.startswith("damaged")) == [
        f"damaged-{steps[-1]}"
    ]
    assert "set aside as damaged-" in outputs[0], outputs[0]


def finished_codes(processes: list[subprocess.Popen[str]]) -> list[int]:
    """The exit statuses of ``processes`` once all ended (killed after ``TIMEOUT_S``)."""
    try:
        for process in processes:
            process.wait(timeout=TIMEOUT_S)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return [process.returncode for process in processes]


def read_logs(folder: Path) -> list[str]:
    """What each process of :func:`start_training_pair` wrote into ``folder``, by process."""
    return [(folder / f"{i}.txt").read_text(errors="replace") for i in (0, 1)]


def test_a_coordinator_port_in_use_is_one_line_before_joining(tmp_path: Path) -> None:
    """Process 0 on a port another program listens on: gRPC ended it with a segmentation fault
    (status 139) and a raw log line, and the other processes waited out their join timeout."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert port_in_use(port)
        done = subprocess.run(
            pair_command(port, 0, f"--run_dir={tmp_path / 'run'}"),
            cwd=REPO_ROOT,
            env=run_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"{TRAIN_ERROR} --coordinator_address '127.0.0.1:{port}': port {port} is in use on "
        "this machine, where process 0 runs the coordinator; choose another port"
    )
    assert not port_in_use(free_port()) and not (tmp_path / "run").exists()


def test_ctrl_c_while_waiting_to_join_ends_the_process() -> None:
    """A process waiting for the run's other processes (here for a coordinator that never comes)
    ignored Ctrl-C until its join timed out: JAX's join blocks in C++, where Python's signal
    handlers do not run. It now joins on a thread of its own and ends at once."""
    process = subprocess.Popen(
        pair_command(free_port(), 1, "--distributed_init_timeout_s=900", "--num_envs=16"),
        cwd=REPO_ROOT,
        env=run_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(3)  # into the join, most likely; a Ctrl-C during the imports ends it the same way
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)  # far below the 900 s the join would wait
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == "python -m slamorl_jax.train: interrupted (SIGINT)", err


@pytest.mark.parametrize(
    ("folder", "extra", "named"),
    [
        ("run", "--seed={i}", "seed"),
        # Other folders: each trained apart and both hung at the first save for orbax's 600 s.
        ("run{i}", "--keep=3", "checkpoint_dir, log_dir"),
    ],
)
def test_processes_given_different_flags_are_refused_naming_them(
    tmp_path: Path, folder: str, extra: str, named: str
) -> None:
    """Every process posts its config and run options with its "ready": processes given different
    flags (another seed) stopped in a collective's assertion that named none, and processes given
    other folders hung; now all stop at the start."""
    lines = refusal_lines(
        start_training_pair(lambda i: tmp_path / folder.format(i=i), extra_of=lambda i: (extra.format(i=i),))
    )
    expected = (
        f"{TRAIN_ERROR} process 1 of 2 was given other settings than process 0 ({named}); every process of a "
        "run takes the same flags"
    )
    assert lines == [expected, expected]
    assert not any(tmp_path.iterdir())


def test_a_coordinator_host_that_does_not_resolve_is_one_line() -> None:
    """An unresolvable coordinator host waited out the join timeout and aborted (status 134) with a
    stack dump saying another task died."""
    with pytest.raises(CoordinatorError, match=r"'nosuchhost\.invalid:1234': its host does not resolve"):
        check_coordinator("nosuchhost.invalid:1234", runs_it=False)
    check_coordinator(f"127.0.0.1:{free_port()}", runs_it=True)  # resolves, and its port is free
