"""History stores built from what jobs ran, not from hindsight: a policy's own simulated runs
(``history build --source=policy``: each finished job at the allocation of its longest stretch of
epochs or its last, jobs cut short left out, and the episode figures those records come from) and a
platform's finished job reports (``history ingest``, ``history/finished_jobs.py``), which apply the
same longest-stretch rule."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_harness import assert_refused, call, new_job_from
from learner_fixtures import REPO_ROOT

from slamorl_jax.env import default_params, make
from slamorl_jax.env.action_sets import NUM_MOVES, WIDEST_ACTION_SET, apply
from slamorl_jax.env.params import with_values
from slamorl_jax.env.scenarios import with_scenario
from slamorl_jax.env.shifts import no_shift_probs
from slamorl_jax.episodes import (
    BUDGET_USD,
    DEADLINE_S,
    FINAL_CPUS,
    FINAL_GPUS,
    LONGEST_CPUS,
    LONGEST_EPOCHS,
    LONGEST_GPUS,
    RELOCATIONS,
    _counted,
    keep_allocation,
    run_episodes,
)
from slamorl_jax.history import HistoryStart
from slamorl_jax.history import __main__ as history_cli
from slamorl_jax.history.build import RECORDED_ALLOCATIONS, policy_records, records_from_episodes
from slamorl_jax.history.finished_jobs import longest_stretch, record_from_finished_job, with_unread_readings
from slamorl_jax.history.names import RECORDED
from slamorl_jax.history.records import load_records
from slamorl_jax.live_encoding import READINGS
from slamorl_jax.live_job import LiveJob

JOBS = 24
TARGET = 37  # one of the targets: a fixed allocation any job can be sent to


def always_target(policy_params: object, obs: jax.Array, weights: jax.Array, key: jax.Array) -> jax.Array:
    """Every decision: go to the target :data:`TARGET` (and stay there)."""
    return jnp.full(obs.shape[:-1], NUM_MOVES + TARGET, jnp.int32)


@pytest.fixture(scope="module")
def world() -> tuple:
    env, params = make("mixed", action_set=WIDEST_ACTION_SET)
    return env, params


def test_each_finished_job_is_recorded_at_the_allocation_it_ended_on(world: tuple) -> None:
    env, params = world
    figures = run_episodes(env, params, always_target, jax.random.key(3), JOBS)
    assert np.asarray(figures["finished"]).all()
    records = records_from_episodes(figures, env.catalog)
    goal = apply(NUM_MOVES + TARGET, jnp.int32(1), jnp.int32(1), params)
    assert {(r.best_gpus, r.best_cpus) for r in records} == {(int(goal[0]), int(goal[1]))}
    assert [r.epochs for r in records] == [int(e) for e in figures["epochs"]]
    assert [r.deadline_s for r in records] == pytest.approx(np.asarray(figures[DEADLINE_S]).tolist())


def test_the_recorded_deadline_and_budget_are_the_jobs_as_submitted(world: tuple) -> None:
    """Without mid-run events they are the targets ``deadline_met``/``budget_met`` judge; on
    ``shifting`` jobs, whose events may cut them, still the targets the jobs were submitted with
    (what a new job is matched on), not the cut ones."""
    env, params = world
    calm = with_values(params, shift_probs=no_shift_probs())
    figures = run_episodes(env, calm, keep_allocation, jax.random.key(4), JOBS)
    time_ok = np.asarray(figures["episode_time_s"]) <= np.asarray(figures[DEADLINE_S])
    cost_ok = np.asarray(figures["episode_cost_usd"]) <= np.asarray(figures[BUDGET_USD])
    np.testing.assert_array_equal(time_ok, np.asarray(figures["deadline_met"]))
    np.testing.assert_array_equal(cost_ok, np.asarray(figures["budget_met"]))
    assert 0 < time_ok.sum() < JOBS  # some of each: the comparison can fail either way
    shifting = with_scenario(params, "shifting")
    key, jobs = jax.random.key(5), 64
    figures = run_episodes(env, shifting, keep_allocation, key, jobs)
    # The runner's jobs are these resets (run_episodes splits its key so: the reset half first).
    reset_keys = jax.random.split(jax.random.split(key)[0], jobs)
    _, submitted = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(reset_keys, shifting)
    np.testing.assert_array_equal(np.asarray(figures["epochs"]), np.asarray(submitted.job.epochs))
    np.testing.assert_allclose(figures[DEADLINE_S], submitted.job.sla_targets.deadline_s, rtol=0)
    np.testing.assert_allclose(figures[BUDGET_USD], submitted.job.sla_targets.budget_usd, rtol=0)
    within_submitted = np.asarray(figures["episode_time_s"]) <= np.asarray(figures[DEADLINE_S])
    cut_below_its_time = ~np.asarray(figures["deadline_met"]) & within_submitted
    assert cut_below_its_time.any(), "no deadline was cut below a job's time: the test would prove nothing"


@dataclasses.dataclass(frozen=True)
class TargetThenLast:
    """Target ``first`` every epoch but the last, target ``last`` for the last (a controller: it
    knows the epoch), so a job's longest stretch and its final allocation differ."""

    first: int = 37
    last: int = 12

    def plan(self, state: object, params: object) -> jax.Array:
        return jnp.zeros((), jnp.int32)

    def act(self, plan: jax.Array, state: object, params: object) -> jax.Array:
        final_epoch = state.epoch >= state.job.epochs - 1
        return jnp.where(final_epoch, NUM_MOVES + self.last, NUM_MOVES + self.first).astype(jnp.int32)


def test_the_runner_records_the_longest_stretch_and_the_last_epoch_apart(world: tuple) -> None:
    env, params = world
    figures = run_episodes(env, params, keep_allocation, jax.random.key(6), JOBS, controller=TargetThenLast())
    first = [int(x) for x in apply(NUM_MOVES + 37, jnp.int32(1), jnp.int32(1), params)]
    last = [int(x) for x in apply(NUM_MOVES + 12, jnp.int32(1), jnp.int32(1), params)]
    assert first != last
    epochs = np.asarray(figures["epochs"])
    assert (epochs >= 3).any() and (epochs < 3).any()
    final = np.stack([figures[FINAL_GPUS], figures[FINAL_CPUS]], axis=-1)
    longest = np.stack([figures[LONGEST_GPUS], figures[LONGEST_CPUS]], axis=-1)
    np.testing.assert_array_equal(final, np.tile(last, (JOBS, 1)))
    # Three epochs or more: the first target's stretch is the longest; two: a tie, the later wins.
    expected = np.where((epochs >= 3)[:, None], first, last)
    np.testing.assert_array_equal(longest, expected)
    np.testing.assert_array_equal(figures[LONGEST_EPOCHS], np.where(epochs >= 3, epochs - 1, 1))
    records = records_from_episodes(figures, env.catalog)
    assert [[r.best_gpus, r.best_cpus] for r in records] == expected.tolist()


def test_jobs_cut_short_are_left_out_and_none_finished_is_an_error(world: tuple) -> None:
    env, params = world
    short = with_values(params, max_steps_in_episode=4)
    figures = run_episodes(env, short, always_target, jax.random.key(5), JOBS)
    finished = np.asarray(figures["finished"])
    assert 0 < finished.sum() < JOBS
    records = records_from_episodes(figures, env.catalog)
    assert [r.epochs for r in records] == [int(e) for e in np.asarray(figures["epochs"])[finished]]
    nothing = {**figures, "finished": np.zeros(JOBS, bool)}
    with pytest.raises(ValueError, match="no job ran to completion"):
        records_from_episodes(nothing, env.catalog)


def test_a_policy_store_starts_new_jobs_where_the_policy_ended_similar_ones(world: tuple) -> None:
    env, params = world
    records = policy_records(env, params, always_target, None, jax.random.key(6), JOBS, env.catalog)
    assert len(records) == JOBS
    start = HistoryStart.from_records(records)
    _, state = env.reset(jax.random.key(7), params)
    gpus, cpus = start(state, params)
    goal = apply(NUM_MOVES + TARGET, jnp.int32(1), jnp.int32(1), params)
    assert (int(gpus), int(cpus)) == (int(goal[0]), int(goal[1]))


def test_build_from_the_shipped_policy_writes_a_store_that_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "store.json"
    argv = ["build", "--source=policy", "--jobs=8", "--seed=2", f"--out={out}"]
    outcome = call(lambda: history_cli.main(argv), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    assert "records to" in outcome.stdout
    notes = json.loads(out.read_text())
    assert "--source=policy" in notes["source"] and "longest stretch" in notes["source"]
    records = load_records(out, cluster=default_params())  # every allocation fits the cluster
    assert 1 <= len(records) <= 8


# Allocations (GPUs; CPUs are 4 per GPU) epoch by epoch, and the longest stretch's (GPUs, epochs).
STRETCHES = [
    ([2, 2, 2, 4, 4, 2], (2, 3)),
    ([2, 4, 4, 2, 2], (2, 2)),  # the later of two stretches of 2
    ([1, 2, 4, 8], (8, 1)),
    ([4], (4, 1)),
]


@pytest.mark.parametrize(("allocations", "expected"), STRETCHES)
def test_the_longest_stretch_is_the_allocation_most_consecutive_epochs_ran_on(
    world: tuple, allocations: list[int], expected: tuple[int, int]
) -> None:
    """The episode runner's count (relocations keep a stretch going; a tie goes to the later)."""
    env, params = world
    _, start = env.reset(jax.random.key(8), params)

    def at(gpus: int) -> object:
        return start.replace(gpus=jnp.int32(gpus), cpus=jnp.int32(4 * gpus))

    counts = {name: jnp.int32(0) for name in (RELOCATIONS, "_stretch_epochs", LONGEST_EPOCHS)}
    counts[LONGEST_GPUS], counts[LONGEST_CPUS] = start.gpus, start.cpus
    before = at(allocations[0])
    for gpus in allocations:
        after = at(gpus)
        counts = _counted(counts, before, after, jnp.bool_(False))
        before = after
    gpus, epochs = expected
    assert (int(counts[LONGEST_GPUS]), int(counts[LONGEST_CPUS]), int(counts[LONGEST_EPOCHS])) == (
        gpus,
        4 * gpus,
        epochs,
    )


@pytest.mark.parametrize(("allocations", "expected"), STRETCHES)
def test_a_reported_history_gives_the_same_stretch(allocations: list[int], expected: tuple[int, int]) -> None:
    """``history ingest``'s rule on a job report's history agrees with the episode runner's."""
    assert longest_stretch([(g, 4 * g) for g in allocations]) == (expected[0], 4 * expected[0])


def test_a_job_never_moved_settled_on_its_start_for_all_its_epochs(world: tuple) -> None:
    env, params = world
    figures = run_episodes(env, params, keep_allocation, jax.random.key(9), JOBS)
    done = np.asarray(figures["finished"])
    np.testing.assert_array_equal(
        np.asarray(figures[LONGEST_EPOCHS])[done], np.asarray(figures["epochs"])[done]
    )
    for name, final in ((LONGEST_GPUS, FINAL_GPUS), (LONGEST_CPUS, FINAL_CPUS)):
        np.testing.assert_array_equal(np.asarray(figures[name]), np.asarray(figures[final]))
    assert records_from_episodes(figures, env.catalog, "final") == records_from_episodes(figures, env.catalog)
    with pytest.raises(ValueError, match="allocation must be one of longest, final"):
        records_from_episodes(figures, env.catalog, "best")


def test_the_command_offers_every_recorded_allocation_the_builder_knows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tuple(RECORDED_ALLOCATIONS) == RECORDED
    # The oracle's store reads no --recorded: said, not ignored.
    argv = ["build", "--recorded=final", f"--out={tmp_path / 'store.json'}", "--jobs=2"]
    outcome = call(lambda: history_cli.main(argv), capsys, tmp_path)
    assert_refused(outcome, "--recorded picks which allocation of a policy's run a record holds")


def finished_job(**changes: object) -> dict:
    """The README's example job run to its end: 3 epochs at 4 GPUs, 6 at 8, 3 at 4 again."""
    history = (
        [{"gpus": 4, "cpus": 32, "epoch_time_s": 1550.0}] * 3
        + [{"gpus": 8, "cpus": 32, "epoch_time_s": 800.0}] * 6
        + [{"gpus": 4, "cpus": 32, "epoch_time_s": 1550.0}] * 3
    )
    job = json.loads((REPO_ROOT / "docs" / "example_job.json").read_text())
    job.update(epochs_done=12, epochs_total=12, elapsed_s=15_000.0, cost_usd=40.0, history=history)
    job.update(changes)
    return job


def running_job() -> dict:
    """:func:`finished_job` three epochs before its end, still on 8 GPUs."""
    history = finished_job()["history"][:9]
    return finished_job(epochs_done=9, history=history, gpus=8, last_epoch_time_s=800.0)


def write_jobs(path: Path, *jobs: dict) -> Path:
    path.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    return path


def test_a_finished_report_is_recorded_where_it_settled_or_where_it_ended() -> None:
    job = LiveJob.from_dict(finished_job())
    settled = record_from_finished_job(job)
    assert (settled.best_gpus, settled.best_cpus) == (8, 32)
    assert (settled.workload, settled.gpu_type, settled.epochs) == ("imagenet-resnet50", "T4", 12)
    assert (settled.deadline_s, settled.budget_usd) == (90_000.0, 80.0)
    assert settled.preference == pytest.approx((0.6, 0.2, 0.2))
    ended = record_from_finished_job(job, "final")
    assert (ended.best_gpus, ended.best_cpus) == (4, 32)
    no_history = LiveJob.from_dict(finished_job(history=None))
    assert (
        record_from_finished_job(no_history).best_gpus,
        record_from_finished_job(no_history).best_cpus,
    ) == (4, 32)
    with pytest.raises(ValueError, match=r"has not finished \(9 of 12 epochs\)"):
        record_from_finished_job(LiveJob.from_dict(running_job()))


def test_ingest_writes_a_store_check_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = write_jobs(tmp_path / "finished.jsonl", finished_job(), finished_job(preference="cost"))
    out = tmp_path / "store.csv"
    outcome = call(lambda: history_cli.main(["ingest", f"--jobs={jobs}", f"--out={out}"]), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    assert "wrote 2 records" in outcome.stdout
    records = load_records(out, cluster=default_params())
    assert [(r.best_gpus, r.best_cpus) for r in records] == [(8, 32), (8, 32)]
    assert records[1].preference == pytest.approx((0.2, 0.6, 0.2))
    outcome = call(lambda: history_cli.main(["check", f"--store={out}"]), capsys, tmp_path)
    assert outcome.code == 0 and json.loads(outcome.stdout)["records"] == 2, outcome.report()


@pytest.mark.parametrize(
    ("second", "phrases"),
    [
        (
            running_job(),
            ["line 2", "has not finished (9 of 12 epochs)"],
        ),
        (finished_job(gpus=64, history=None), ["line 2", "64 GPUs is outside the policy's cluster"]),
        ({"workload": "imagenet-resnet50"}, ["line 2", "missing job field(s)"]),
    ],
)
def test_ingest_refuses_a_bad_report_by_its_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], second: dict, phrases: list[str]
) -> None:
    jobs = write_jobs(tmp_path / "finished.jsonl", finished_job(), second)
    out = tmp_path / "store.json"
    outcome = call(lambda: history_cli.main(["ingest", f"--jobs={jobs}", f"--out={out}"]), capsys, tmp_path)
    assert_refused(outcome, "slamorl_jax.history", *phrases)


def test_ingest_refuses_an_unusable_out_before_reading_any_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ingest", "--jobs=no/such/file.jsonl", f"--out={tmp_path / 'store.txt'}"]
    outcome = call(lambda: history_cli.main(argv), capsys, tmp_path)
    assert_refused(outcome, "--out", "must end in .json or .csv")


READINGS_LEFT_OUT = READINGS  # the last epoch's readings, which a record does not read


@pytest.mark.parametrize("with_history", [True, False])
def test_ingest_takes_a_finished_report_without_the_last_epochs_readings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], with_history: bool
) -> None:
    """A platform's log of finished jobs may keep the job, its allocations and epoch times, and no
    utilisations: a record reads none of them, so ingest does not ask for them."""
    bare = {k: v for k, v in finished_job().items() if k not in READINGS_LEFT_OUT}
    if not with_history:
        bare.pop("history")
    jobs = write_jobs(tmp_path / "finished.jsonl", bare)
    out = tmp_path / "store.json"
    outcome = call(lambda: history_cli.main(["ingest", f"--jobs={jobs}", f"--out={out}"]), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    (record,) = load_records(out)
    assert (record.best_gpus, record.best_cpus) == ((8, 32) if with_history else (4, 32))
    # Readings it does give are still checked, as in every report.
    bad = write_jobs(tmp_path / "bad.jsonl", {**bare, "gpu_util": 1.5})
    outcome = call(
        lambda: history_cli.main(["ingest", f"--jobs={bad}", f"--out={tmp_path / 'bad.json'}"]),
        capsys,
        tmp_path,
    )
    assert_refused(outcome, "line 1: gpu_util is a fraction in [0, 1], got 1.5")


def test_a_policy_store_can_be_built_from_runs_started_by_a_rule(world: tuple) -> None:
    """A later round of a store (``exploration_overhead --history_rounds``): jobs started by an earlier
    store's rule and then kept where they started are recorded there."""
    env, params = world

    def two_gpus(state: object, params: object) -> tuple[jax.Array, jax.Array]:
        return jnp.int32(2), jnp.int32(8)

    records = policy_records(env, params, keep_allocation, None, jax.random.key(12), 8, start_rule=two_gpus)
    assert {(r.best_gpus, r.best_cpus) for r in records} == {(2, 8)}


def test_a_simulated_store_writes_the_envs_numbers_not_their_binary_noise(world: tuple) -> None:
    """A float32 deadline was written as its exact double (2993.17578125); now as the shortest
    decimal of the same float32, so the file reads as the env's number and loads back to it."""
    env, params = world
    figures = run_episodes(env, params, keep_allocation, jax.random.key(13), JOBS)
    records = records_from_episodes(figures, env.catalog)
    for record, deadline in zip(records, np.asarray(figures[DEADLINE_S]), strict=True):
        assert np.float32(record.deadline_s) == deadline
        assert repr(record.deadline_s) == str(deadline)


@pytest.mark.parametrize(
    ("report", "phrase"),
    [
        # a running report without readings: refused as not finished, not for readings ingest skips
        (
            {k: v for k, v in running_job().items() if k not in READINGS_LEFT_OUT},
            "has not finished (9 of 12 epochs)",
        ),
        # no history and no time so far: the report's own figure is named, not a filled-in one
        (
            {
                **{k: v for k, v in finished_job().items() if k not in READINGS_LEFT_OUT},
                "history": None,
                "elapsed_s": 0,
            },
            "missing job field(s): last_epoch_time_s",
        ),
    ],
)
def test_ingest_refuses_a_report_for_what_is_wrong_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], report: dict, phrase: str
) -> None:
    jobs = write_jobs(tmp_path / "jobs.jsonl", report)
    argv = ["ingest", f"--jobs={jobs}", f"--out={tmp_path / 's.json'}"]
    assert_refused(call(lambda: history_cli.main(argv), capsys, tmp_path), "line 1", phrase)


def test_a_filled_memory_allocation_holds_the_memory_the_report_used() -> None:
    bare = {k: v for k, v in finished_job().items() if k not in READINGS_LEFT_OUT}
    filled = with_unread_readings({**bare, "memory_used_gib": 64})
    assert filled["memory_alloc_gib"] == 64 and filled["memory_used_gib"] == 64
    LiveJob.from_dict(filled)  # passes every report check


def test_a_platforms_finished_jobs_start_its_next_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The loop a platform runs: its finished jobs' reports -> ``history ingest`` -> ``recommend
    --history`` for a new job of the same workload, which starts where those jobs settled."""
    from slamorl_jax import recommend as recommend_cli

    jobs = write_jobs(tmp_path / "finished.jsonl", finished_job(), finished_job(deadline_s=95_000))
    store = tmp_path / "store.json"
    outcome = call(lambda: history_cli.main(["ingest", f"--jobs={jobs}", f"--out={store}"]), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    new_job = tmp_path / "new_job.json"
    new_job.write_text(json.dumps(new_job_from(finished_job())))
    checkpoint = REPO_ROOT / "checkpoints" / "default"
    argv = [f"--job={new_job}", f"--checkpoint={checkpoint}", f"--history={store}"]
    outcome = call(lambda: recommend_cli.main(argv), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    answer = json.loads(outcome.stdout)
    assert (answer["source"], answer["gpus"], answer["cpus"]) == ("history", 8, 32)
    assert answer["match"] == "workload and GPU type" and not outcome.stderr
