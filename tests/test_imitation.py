"""Pre-training on logged decisions: labels on hand-computed cases, the log format and its errors,
both ways to demonstrations agreeing, imitation that learns, and the checkpoint it writes."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_harness import assert_refused, call

from slamorl_jax import imitate
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.imitation import Demonstrations, ImitationConfig, fit
from slamorl_jax.agent.networks import init_params
from slamorl_jax.agent.trainer import env_params_from_config, make_train
from slamorl_jax.checkpoint import read_meta
from slamorl_jax.env import action_sets
from slamorl_jax.env.catalog import load_catalog
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.scenarios import scenario_params
from slamorl_jax.evaluation.baselines import BestStatic
from slamorl_jax.history.decisions import (
    Decision,
    decision_from_mapping,
    load_decisions,
    save_decisions,
)
from slamorl_jax.history.demonstrations import decision_demonstrations, oracle_demonstrations
from slamorl_jax.live_encoding import job_description
from slamorl_jax.live_job import LiveJob
from slamorl_jax.policy_checkpoint import load_policy, params_equal
from slamorl_jax.warm_start import initial_params

CONFIG = TrainConfig()
NUM_JOBS = 24
DEMO_KEY = jax.random.key(3)
# A new job of the README's kind, moved from 1 GPU to 4 GPUs and 16 CPUs before its first epoch.
DECISION = {
    "workload": "cifar10-resnet18",
    "gpu_type": "T4",
    "gpus": 1,
    "cpus": 4,
    "epochs_done": 0,
    "epochs_total": 30,
    "deadline_s": 5400,
    "budget_usd": 5,
    "preference": "time",
    "next_gpus": 4,
    "next_cpus": 16,
}


# From 4 GPUs and 16 CPUs on the default cluster (4 GPUs and 48 CPUs a node, 16 GPUs a job, CPU
# step 4); targets are ``9 + 5 x (GPUs - 1) + j`` for CPUs per GPU (fewest, 2, 4, 8, 12)[j].
@pytest.mark.parametrize(
    ("action_set", "start", "goal", "expected"),
    [
        ("targets", (4, 16), (4, 16), 4),  # stay: keep, not the target 4 x 4 that lands there too
        ("targets", (4, 16), (16, 64), 9 + 5 * 15 + 2),  # a target reached exactly
        ("targets", (4, 16), (5, 16), 7),  # a one-step move (no target lands there)
        ("targets", (1, 4), (6, 22), 9 + 5 * 5 + 2),  # off the grid: 6 x 4 = 24 CPUs is nearest
        ("targets", (4, 16), (64, 1000), 9 + 5 * 15 + 4),  # beyond the cluster: clipped to 16 x 12
        ("paper", (4, 16), (16, 64), 8),  # one step of each towards it
        ("paper", (4, 16), (4, 16), 4),
        ("paper", (4, 16), (1, 4), 0),
    ],
)
def test_nearest_action_on_hand_computed_cases(
    action_set: str, start: tuple[int, int], goal: tuple[int, int], expected: int
) -> None:
    params = scenario_params("mixed")
    action = action_sets.nearest_action(action_set, jnp.int32(start[0]), jnp.int32(start[1]), *goal, params)
    assert int(action) == expected, action_sets.action_names(action_set, params)[int(action)]


def test_json_and_jsonl_logs_read_the_same(tmp_path: Path) -> None:
    rows = [DECISION, {**DECISION, "gpus": 4, "cpus": 16, "next_gpus": 4, "next_cpus": 16}]
    save_decisions(rows, tmp_path / "log.jsonl")
    save_decisions(rows, tmp_path / "log.json")
    lines, document = load_decisions(tmp_path / "log.jsonl"), load_decisions(tmp_path / "log.json")
    assert lines == document and len(lines) == 2
    assert (lines[0].next_gpus, lines[0].next_cpus, lines[0].job.gpus) == (4, 16, 1)


BAD_LOGS = {
    "missing.jsonl": None,
    "log.csv": "workload\n",
    "empty.jsonl": "\n\n",
    "not_json.jsonl": json.dumps(DECISION) + "\n{oops\n",
    "no_list.json": json.dumps({"rows": []}),
    "no_next.jsonl": json.dumps({k: v for k, v in DECISION.items() if k != "next_cpus"}),
    "zero_gpus.jsonl": json.dumps({**DECISION, "next_gpus": 0}),
    "float_gpus.jsonl": json.dumps({**DECISION, "next_gpus": 1.5}),
    "unknown_field.jsonl": json.dumps({**DECISION, "colour": "red"}),
    "bad_job.json": json.dumps([{**DECISION, "workload": "no-such-model"}]),
}


@pytest.mark.parametrize("name", list(BAD_LOGS))
def test_bad_logs_are_refused_with_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if BAD_LOGS[name] is not None:
        (tmp_path / name).write_text(BAD_LOGS[name])
    monkeypatch.chdir(tmp_path)
    before = set(tmp_path.iterdir())
    outcome = call(lambda: imitate.main([f"--decisions={name}", "--out=policy"]), capsys, tmp_path)
    assert_refused(outcome, name)
    assert set(tmp_path.iterdir()) == before


def test_more_oracle_demonstrations_than_fit_in_memory_are_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each flag within its bound, their product about 1.5 TB of observations: XLA aborted with a C++
    stack trace (exit 134); one line and exit 2 now, before anything is built."""
    argv = ["--oracle_jobs=1048576", "--decisions_per_job=1000", f"--out={tmp_path / 'policy'}"]
    assert_refused(call(lambda: imitate.main(argv), capsys, tmp_path), "--decisions_per_job", "fit in memory")
    # The largest job count alone, at the default 8 decisions a job: killed for memory at 22 GB.
    argv = ["--oracle_jobs=1048576", f"--out={tmp_path / 'policy'}"]
    assert_refused(call(lambda: imitate.main(argv), capsys, tmp_path), "8,388,608 demonstrations")


# A second decision (line 2 of the log) changed so that one allocation leaves the default cluster
# (16 GPUs a job, 48 CPUs a node, CPU step 4), and what its one line must name.
OUTSIDE_THE_CLUSTER = {
    "current gpus": ({"gpus": 64, "cpus": 256}, ["line 2", "current allocation", "64 GPUs"]),
    "next gpus": ({"next_gpus": 1000}, ["line 2", "next_gpus", "1000 GPUs", "at most 16"]),
    "next cpus": ({"next_cpus": 100_000}, ["line 2", "next_cpus", "100000 CPUs"]),
    "next cpus off the step": ({"next_cpus": 18}, ["line 2", "next_cpus", "CPU step"]),
}


@pytest.mark.parametrize("case", list(OUTSIDE_THE_CLUSTER))
def test_a_decision_outside_the_cluster_is_refused_by_line_and_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The module's docstring: a decision outside the cluster exits 2 with one line, before any
    training and without counting it as merely inexact."""
    changes, phrases = OUTSIDE_THE_CLUSTER[case]
    save_decisions([DECISION, {**DECISION, **changes}], tmp_path / "log.jsonl")
    outcome = call(
        lambda: imitate.main([f"--decisions={tmp_path / 'log.jsonl'}", f"--out={tmp_path / 'out'}"]),
        capsys,
        tmp_path,
    )
    assert_refused(outcome, "log.jsonl", *phrases)


def test_a_decision_outside_the_cluster_is_refused_by_index_without_a_log() -> None:
    """Decisions made in Python (no log line to name) are named by their index."""
    job = LiveJob.from_dict({k: v for k, v in DECISION.items() if k not in ("next_gpus", "next_cpus")})
    decisions = [Decision(job, 4, 16), Decision(job, 1000, 16)]
    with pytest.raises(ValueError, match="decision 1: next_gpus: 1000 GPUs"):
        decision_demonstrations(decisions, CONFIG)


@pytest.fixture(scope="module")
def oracle_demos() -> Demonstrations:
    return oracle_demonstrations(CONFIG, NUM_JOBS, 4, DEMO_KEY)


def test_logged_decisions_demonstrate_as_the_simulated_jobs_do(oracle_demos: Demonstrations) -> None:
    """Fresh simulated jobs reported as a log (what they are, no readings; the oracle's allocation
    next) give the observations, weights and actions of the simulated demonstrations' first step."""
    env = JobAllocationEnv(action_set=CONFIG.actions)
    params = env_params_from_config(CONFIG, env.catalog)
    reset_keys = jax.random.split(jax.random.split(DEMO_KEY)[0], NUM_JOBS)  # oracle_demonstrations' jobs
    _, states = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(reset_keys, params)
    gpus, cpus = jax.jit(jax.vmap(BestStatic.for_params(params), in_axes=(0, None)))(states, params)
    rows = []
    for i in range(NUM_JOBS):
        state = jax.tree.map(lambda x, i=i: np.asarray(x)[i], states)
        rows.append(
            {**job_description(state), "epochs_done": 0, "next_gpus": int(gpus[i]), "next_cpus": int(cpus[i])}
        )
    demos, counts = decision_demonstrations([decision_from_mapping(r, "test") for r in rows], CONFIG)
    first = oracle_demos.rows(np.arange(NUM_JOBS))  # every job runs at its first decision
    np.testing.assert_allclose(demos.obs, first.obs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(demos.weights, first.weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(demos.actions, first.actions)
    assert counts["decisions"] == NUM_JOBS
    assert counts["moves"] == sum((r["gpus"], r["cpus"]) != (r["next_gpus"], r["next_cpus"]) for r in rows)
    # After the first decision a job that reached its goal keeps it.
    assert len(oracle_demos) > NUM_JOBS and np.mean(oracle_demos.actions[NUM_JOBS:] == 4) > 0.5


def test_imitation_learns_the_demonstrations_and_leaves_the_critic(oracle_demos: Demonstrations) -> None:
    trainer = make_train(CONFIG)
    params = init_params(trainer.network, jax.random.key(0), trainer.obs_dim)
    config = ImitationConfig(steps=400, batch_size=32, learning_rate=3e-3, holdout=0.2)
    learnt, report = fit(trainer.network, params, oracle_demos, config, jax.random.key(1))
    assert report["held_out_rows"] == round(0.2 * len(oracle_demos))
    assert report["rows"] + report["held_out_rows"] == len(oracle_demos)
    assert report["after"]["train"]["loss"] < 0.5 * report["before"]["train"]["loss"]
    assert report["after"]["train"]["accuracy"] >= 0.9
    assert params_equal(learnt["params"]["critic"], params["params"]["critic"])
    assert not params_equal(learnt["params"]["actor"], params["params"]["actor"])


def _refuse_constant(name: str) -> None:
    """``json.loads``'s hook for NaN and Infinity, which strict JSON has not."""
    raise ValueError(f"not strict JSON: {name}")


def test_the_cli_writes_a_policy_that_loads_and_warm_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    save_decisions([DECISION, {**DECISION, "gpus": 4, "cpus": 16}], log)
    out = tmp_path / "runs" / "imitated"  # folders that do not exist yet, as in a fresh clone's runs/
    argv = [f"--decisions={log}", f"--out={out}", "--steps=5", "--holdout=0"]
    outcome = call(lambda: imitate.main(argv), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    report = json.loads(outcome.stdout, parse_constant=_refuse_constant)  # strict JSON: no bare NaN
    assert report["source"] == {"log": str(log), "decisions": 2, "moves": 1, "inexact": 0}
    assert report["before"]["held_out"] == report["after"]["held_out"] == {"loss": None, "accuracy": None}
    policy = load_policy(out)
    assert policy.step == 0 and policy.config.actions == CONFIG.actions
    meta, _, _ = read_meta(out)
    assert meta["imitation"]["rows"] == 2
    assert params_equal(initial_params(out, policy.params), policy.params)  # what --init_from reads
    assert "warning" not in outcome.stderr and report["distinct_actions"] == 2
    again = call(lambda: imitate.main(argv), capsys, tmp_path)
    assert_refused(again, "new or empty folder")


def test_a_log_of_one_action_warns_that_the_policy_will_always_take_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log of a scheduler that never moved a job taught a policy that never moves, silently."""
    log = tmp_path / "log.jsonl"
    keep = {**DECISION, "next_gpus": DECISION["gpus"], "next_cpus": DECISION["cpus"]}
    save_decisions([keep, keep], log)
    argv = [f"--decisions={log}", f"--out={tmp_path / 'imitated'}", "--steps=2", "--holdout=0"]
    outcome = call(lambda: imitate.main(argv), capsys, tmp_path)
    assert outcome.code == 0 and json.loads(outcome.stdout)["distinct_actions"] == 1, outcome.report()
    assert (
        outcome.stderr.count("\n") == 1
        and "warning: every demonstration takes the same action" in outcome.stderr
    )


def test_fit_refuses_no_demonstrations_and_actions_the_network_lacks() -> None:
    """Through the API, no rows failed deep in a gather and an action past the last gave a NaN loss."""
    trainer = make_train(CONFIG)
    params = init_params(trainer.network, jax.random.key(0), trainer.obs_dim)
    obs, weights = np.zeros((2, trainer.obs_dim), np.float32), np.full((2, 3), 1 / 3, np.float32)
    config = ImitationConfig(steps=1, batch_size=2)
    with pytest.raises(ValueError, match="no demonstrations"):
        fit(
            trainer.network,
            params,
            Demonstrations(obs[:0], weights[:0], np.zeros(0, np.int32)),
            config,
            jax.random.key(1),
        )
    for bad in (-1, trainer.network.config.num_actions):
        demos = Demonstrations(obs, weights, np.array([0, bad], np.int32))
        with pytest.raises(ValueError, match=f"action {bad} is not one of the network's"):
            fit(trainer.network, params, demos, config, jax.random.key(1))


def test_an_out_folder_filled_while_it_trained_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another run saving into --out while this one trained ended "unexpected CheckpointError", exit 1."""
    from slamorl_jax import policy_checkpoint

    log = tmp_path / "log.jsonl"
    save_decisions([DECISION], log)
    out = tmp_path / "imitated"
    real = policy_checkpoint.save_policy

    def another_run_first(destination: Path, *args: object, **kwargs: object) -> Path:
        real(destination, *args, **kwargs)  # what the other run wrote
        return real(destination, *args, **kwargs)

    monkeypatch.setattr(policy_checkpoint, "save_policy", another_run_first)
    argv = [f"--decisions={log}", f"--out={out}", "--steps=2", "--holdout=0"]
    outcome = call(lambda: imitate.main(argv), capsys, tmp_path)
    assert outcome.code == 2 and "--out:" in outcome.stderr and "unexpected" not in outcome.stderr, (
        outcome.report()
    )


@pytest.mark.parametrize("when", ["saving", "reporting"])
def test_a_stop_signal_before_the_report_leaves_no_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """A signal while the policy was saved left a half-written step, which held --out (the next run
    was refused: "must be a new or empty folder"); one after the save, a checkpoint the command never
    announced. The clean-ups a stop signal runs (``cli_args``) now remove it, with its new folders."""
    from slamorl_jax import checkpoint, cli_args

    log = tmp_path / "log.jsonl"
    save_decisions([DECISION, {**DECISION, "gpus": 4, "cpus": 16}], log)  # two actions: no warning printed
    out = tmp_path / "new" / "imitated"
    real_wait = checkpoint.ocp.CheckpointManager.wait_until_finished

    def stop_signal() -> None:  # what cli_args._exit_interrupted does before os._exit
        assert any(out.parent.iterdir())  # the policy is written (staged beside --out, or in it)
        for cleanup in reversed(cli_args._cleanups):
            cleanup()
        raise SystemExit(130)

    def signal_while_saving(manager: object) -> None:
        real_wait(manager)
        if any(f.is_file() for f in out.parent.rglob("*")):  # orbax's own wait before it writes: none yet
            stop_signal()

    if when == "saving":
        monkeypatch.setattr(checkpoint.ocp.CheckpointManager, "wait_until_finished", signal_while_saving)
    else:
        monkeypatch.setattr(imitate, "print", lambda *args, **kwargs: stop_signal(), raising=False)
    argv = [f"--decisions={log}", f"--out={out}", "--steps=2", "--holdout=0"]
    assert call(lambda: imitate.main(argv), capsys, tmp_path).code == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl"]
    assert not cli_args._cleanups


def test_the_policy_config_follows_like_and_the_network_flags(tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parent.parent / "checkpoints" / "default"
    args = imitate.parser().parse_args(["--oracle_jobs=4", "--out=x", f"--like={shipped}", "--actions=paper"])
    config, catalog = imitate.policy_config(args)
    assert config.actions == "paper" and config.init_from is None
    assert config.hidden_sizes == load_policy(shipped).config.hidden_sizes
    assert catalog is load_catalog()  # the shipped policy's
    args = imitate.parser().parse_args(["--oracle_jobs=4", "--out=x", "--hidden_sizes=32,16"])
    assert imitate.policy_config(args)[0].hidden_sizes == (32, 16)


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["--decisions=log.jsonl", "--oracle_jobs=8", "--out=o"], "not allowed with"),
        (["--out=o"], "one of the arguments"),
        (["--oracle_jobs=0", "--out=o"], "--oracle_jobs"),
        (["--oracle_jobs=8", "--out=o", "--holdout=1"], "--holdout"),
        (["--oracle_jobs=8", "--out=o", "--like=no/such/run"], "does not exist"),
        # It was accepted and silently unused.
        (["--decisions=log.jsonl", "--decisions_per_job=5", "--out=o"], "--decisions_per_job applies to"),
        (["--oracle_jobs=8", "--out=o", "--like=."], "--like: no complete checkpoint"),
        (["--oracle_jobs=8", "--out=a_file/o"], "cannot be created: 'a_file' is a file"),
        (["--oracle_jobs=8", "--out=" + "n" * 300], "not a usable path: File name too long"),
    ],
)
def test_bad_command_lines_are_refused(
    argv: list[str],
    phrase: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("not a folder\n")
    assert_refused(call(lambda: imitate.main(argv), capsys, tmp_path), phrase)
