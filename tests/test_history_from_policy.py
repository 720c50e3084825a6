"""History stores built from a policy's own runs (``history build --source=policy``): each finished
job recorded with the allocation it ran its last epoch on, jobs cut short left out, and the episode
figures those records come from (``episodes``' final allocation, deadline and budget)."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_harness import call

from slamorl_jax.env import default_params, make
from slamorl_jax.env.action_sets import NUM_MOVES, WIDEST_ACTION_SET, apply
from slamorl_jax.env.params import with_values
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
from slamorl_jax.history.records import load_records

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


def test_the_recorded_deadline_and_budget_are_the_ones_the_job_was_judged_by(world: tuple) -> None:
    """``deadline_met`` and ``budget_met`` are the job's time and cost against the recorded SLAs."""
    env, params = world
    figures = run_episodes(env, params, keep_allocation, jax.random.key(4), JOBS)
    time_ok = np.asarray(figures["episode_time_s"]) <= np.asarray(figures[DEADLINE_S])
    cost_ok = np.asarray(figures["episode_cost_usd"]) <= np.asarray(figures[BUDGET_USD])
    np.testing.assert_array_equal(time_ok, np.asarray(figures["deadline_met"]))
    np.testing.assert_array_equal(cost_ok, np.asarray(figures["budget_met"]))
    assert 0 < time_ok.sum() < JOBS  # some of each: the comparison can fail either way
    # Kept where it started: a real allocation, never moved.
    assert np.all(np.asarray(figures["reallocations"]) == 0)
    assert np.all(np.asarray(figures[FINAL_GPUS]) >= 1) and np.all(np.asarray(figures[FINAL_CPUS]) >= 1)


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


def test_the_longest_stretch_is_the_allocation_most_consecutive_epochs_ran_on(world: tuple) -> None:
    """Relocations keep a stretch going; a tie goes to the later stretch."""
    env, params = world
    _, start = env.reset(jax.random.key(8), params)

    def at(gpus: int) -> object:
        return start.replace(gpus=jnp.int32(gpus), cpus=jnp.int32(4 * gpus))

    def longest(allocations: list[int]) -> tuple[int, int, int]:
        counts = {name: jnp.int32(0) for name in (RELOCATIONS, "_stretch_epochs", LONGEST_EPOCHS)}
        counts[LONGEST_GPUS], counts[LONGEST_CPUS] = start.gpus, start.cpus
        before = at(allocations[0])
        for gpus in allocations:
            after = at(gpus)
            counts = _counted(counts, before, after, jnp.bool_(False))
            before = after
        return int(counts[LONGEST_GPUS]), int(counts[LONGEST_CPUS]), int(counts[LONGEST_EPOCHS])

    assert longest([2, 2, 2, 4, 4, 2]) == (2, 8, 3)
    assert longest([2, 4, 4, 2, 2]) == (2, 8, 2)  # the later of two stretches of 2
    assert longest([1, 2, 4, 8]) == (8, 32, 1)


def test_a_job_never_moved_settled_on_its_start_for_all_its_epochs(world: tuple) -> None:
    env, params = world
    figures = run_episodes(env, params, keep_allocation, jax.random.key(9), JOBS)
    done = np.asarray(figures["finished"])
    np.testing.assert_array_equal(
        np.asarray(figures[LONGEST_EPOCHS])[done], np.asarray(figures["epochs"])[done]
    )
    for name, final in ((LONGEST_GPUS, FINAL_GPUS), (LONGEST_CPUS, FINAL_CPUS)):
        np.testing.assert_array_equal(np.asarray(figures[name]), np.asarray(figures[final]))
    assert records_from_episodes(figures, env.catalog, "final") == records_from_episodes(
        figures, env.catalog
    )
    with pytest.raises(ValueError, match="allocation must be one of longest, final"):
        records_from_episodes(figures, env.catalog, "best")


def test_the_command_offers_every_recorded_allocation_the_builder_knows() -> None:
    assert tuple(history_cli.RECORDED_WORDS) == tuple(RECORDED_ALLOCATIONS)
