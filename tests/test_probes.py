"""Probe runs (``env/probes.py``, ``env/probing_env.py``): billed exactly, not epochs, feeding the model."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.job_model import epoch_metrics
from slamorl_jax.env.online_model import posterior_deviation
from slamorl_jax.env.params import with_values
from slamorl_jax.env.probes import PROBE_FRACTION, first_placement, probe_allocations, suggested_allocation
from slamorl_jax.env.probing_env import ProbingEnv
from slamorl_jax.env.scenarios import scenario_params
from slamorl_jax.episodes import with_init_strategy

JOBS = 6


@pytest.fixture(scope="module")
def probed() -> dict:
    """Jobs reset by the plain env and by the probing one with the same keys, noise-free and
    uncontended (so the probe intervals follow from ``epoch_metrics`` alone), then one step each."""
    params = with_init_strategy(scenario_params("mixed"), "requested")
    params = with_values(params, epoch_time_noise=0.0, contention_start_prob=0.0)
    plain, probing, skipping = JobAllocationEnv(), ProbingEnv(budget=math.inf), ProbingEnv(budget=0.0)
    keys = jax.random.split(jax.random.key(3), JOBS)

    @jax.jit
    def run(keys: jax.Array) -> tuple:
        _, fresh = jax.vmap(plain.reset, in_axes=(0, None))(keys, params)
        _, started = jax.vmap(probing.reset, in_axes=(0, None))(keys, params)
        allocations = jax.vmap(probe_allocations, in_axes=(0, None))(fresh, params)
        no_op = jnp.zeros(JOBS, jnp.int32)
        stepped = jax.vmap(probing.step, in_axes=(0, 0, 0, None))(keys, started, no_op, params)[1]
        _, unprobed = jax.vmap(skipping.reset, in_axes=(0, None))(keys, params)
        pick = jax.vmap(first_placement, in_axes=(0, None))(fresh, params)
        return fresh, started, allocations, stepped, unprobed, pick

    fresh, started, allocations, stepped, unprobed, pick = jax.device_get(run(keys))
    return {
        "params": params,
        "fresh": fresh,
        "started": started,
        "probes": allocations,
        "stepped": stepped,
        "unprobed": unprobed,
        "forecast_pick": pick,
    }


def _job(tree: object, i: int) -> object:
    return jax.tree.map(lambda x: x[i], tree)


def _pause(a: tuple[int, int], b: tuple[int, int], params: object) -> float:
    if a[0] != b[0]:
        return float(params.reallocation_pause_s)
    return float(params.cpu_reallocation_pause_s) if a[1] != b[1] else 0.0


def test_probe_runs_are_billed_exactly(probed: dict) -> None:
    """Elapsed time and cost are the sum of the probe intervals and the switch to the first
    allocation, each computed by hand from ``epoch_metrics`` of the job's true constants."""
    params = probed["params"]
    for i in range(JOBS):
        job = _job(probed["fresh"], i).job
        gpus, cpus = (np.asarray(a)[i] for a in probed["probes"])
        started = _job(probed["started"], i)
        elapsed = cost = 0.0
        done: list[tuple[int, int]] = []
        for g, c in zip(gpus.tolist(), cpus.tolist(), strict=True):
            if (g, c) in done:
                continue  # a repeated probe is skipped
            m = epoch_metrics(job.constants, g, c, params)
            interval = (_pause(done[-1], (g, c), params) if done else 0.0) + PROBE_FRACTION * float(
                m.epoch_time_s
            )
            elapsed += interval
            cost += interval * float(m.price_per_hour) / 3600.0
            done.append((g, c))
        first = (int(started.gpus), int(started.cpus))
        switch = _pause(done[-1], first, params)
        elapsed += switch
        cost += switch * float(epoch_metrics(job.constants, *first, params).price_per_hour) / 3600.0
        np.testing.assert_allclose(float(started.elapsed_s), elapsed, rtol=1e-5)
        np.testing.assert_allclose(float(started.cost_usd), cost, rtol=1e-5)
        assert float(started.elapsed_s) > 0


def test_probes_are_not_epochs_and_the_job_continues(probed: dict) -> None:
    started, stepped, fresh = probed["started"], probed["stepped"], probed["fresh"]
    np.testing.assert_array_equal(started.epoch, 0)
    np.testing.assert_array_equal(started.steps, 0)
    np.testing.assert_array_equal(started.reallocations, 0)
    np.testing.assert_array_equal(stepped.epoch, 1)  # no job has a single epoch
    assert np.all(stepped.elapsed_s > started.elapsed_s)
    # The same jobs as the plain env's with the same keys.
    for name in ("workload", "gpu_type", "epochs", "requested_gpus", "requested_cpus"):
        np.testing.assert_array_equal(getattr(started.job, name), getattr(fresh.job, name))


def test_probes_feed_the_online_model(probed: dict) -> None:
    """After the noise-free probes the model's compute deviation is closer to the job's hidden one
    than the profile's 0 is, for most jobs."""
    params, started = probed["params"], probed["started"]
    assert np.all(np.asarray(started.model_stats)[:, 0] > 0)
    mu_compute, _ = posterior_deviation(jnp.asarray(started.model_stats), params)
    truth = np.asarray(started.job.deviation)[:, 0]
    closer = np.abs(np.asarray(mu_compute) - truth) < np.abs(truth)
    assert closer.mean() >= 0.8, (mu_compute, truth)


def test_a_zero_budget_skips_the_probes_and_starts_at_the_forecasts_pick(probed: dict) -> None:
    unprobed = probed["unprobed"]
    np.testing.assert_array_equal(unprobed.elapsed_s, 0.0)
    np.testing.assert_array_equal(unprobed.cost_usd, 0.0)
    np.testing.assert_array_equal(unprobed.model_stats, 0.0)
    gpus, cpus = probed["forecast_pick"]
    np.testing.assert_array_equal(unprobed.gpus, gpus)
    np.testing.assert_array_equal(unprobed.cpus, cpus)


def test_a_job_that_has_run_nothing_is_ranked_as_if_every_start_were_free() -> None:
    """The forecast start (``first_placement``, ``ProbingEnv`` with the probes skipped) ranked with a
    pause from the reset allocation that the placement never pays: with a pause longer than any job,
    every cold-started job stayed at 1 GPU. Unlaunched, the ranking ignores the pause; launched
    (after an epoch or a probe), a move still pays it."""
    params = with_init_strategy(scenario_params("mixed"), "cold")
    slow_moves = with_values(params, reallocation_pause_s=1e7, cpu_reallocation_pause_s=1e7)
    keys = jax.random.split(jax.random.key(5), 16)

    @jax.jit
    def run(keys: jax.Array) -> tuple:
        _, fresh = jax.vmap(JobAllocationEnv().reset, in_axes=(0, None))(keys, slow_moves)
        _, skipped = jax.vmap(ProbingEnv(budget=0.0).reset, in_axes=(0, None))(keys, slow_moves)
        place = jax.vmap(first_placement, in_axes=(0, None))
        move = jax.vmap(suggested_allocation, in_axes=(0, None))
        return fresh, skipped, place(fresh, slow_moves), place(fresh, params), move(fresh, slow_moves)

    fresh, skipped, placed, placed_usual_pause, moved = jax.device_get(run(keys))
    np.testing.assert_array_equal(placed, placed_usual_pause)
    np.testing.assert_array_equal((skipped.gpus, skipped.cpus), placed)
    assert np.mean(placed[0] > fresh.gpus) > 0.5  # most jobs leave the cold start
    np.testing.assert_array_equal(moved, (fresh.gpus, fresh.cpus))  # a launched job would stay


def test_a_start_rule_on_a_probing_env_is_refused() -> None:
    """``run_episodes(ProbingEnv(), ..., start=rule)`` placed the probed jobs anew: the probes' time,
    cost and measurements were dropped, and the figures were the plain env's, without a word."""
    from slamorl_jax.episodes import keep_allocation, run_episodes
    from slamorl_jax.evaluation import baselines

    params = scenario_params("balanced")
    with pytest.raises(ValueError, match=r"ProbingEnv's jobs anew, dropping what its reset did"):
        run_episodes(ProbingEnv(), params, keep_allocation, jax.random.key(0), 2, start=baselines.requested)
    # Any env whose reset does more than draw a job (the suggested-SLAs benchmark's probes too).
    from benchmarks.suggested_slas import SuggestedSlaEnv

    suggesting = SuggestedSlaEnv(math.inf)
    with pytest.raises(ValueError, match="SuggestedSlaEnv's jobs anew"):
        run_episodes(suggesting, params, keep_allocation, jax.random.key(0), 2, start=baselines.requested)


def test_bad_probe_settings_are_refused() -> None:
    """``budget=True`` probed as a budget of 1 (a bool is an int to Python)."""
    for bad in (True, "1", None):
        with pytest.raises(TypeError, match="probe budget must be a number"):
            ProbingEnv(budget=bad)
    with pytest.raises(TypeError, match="probe fraction must be a number"):
        ProbingEnv(fraction=False)
    for budget in (-1.0, math.nan):
        with pytest.raises(ValueError, match="probe budget must be >= 0"):
            ProbingEnv(budget=budget)
    with pytest.raises(ValueError, match=r"probe fraction must be in \(0, 1\]"):
        ProbingEnv(fraction=1.5)
    assert ProbingEnv(budget=math.inf).budget == math.inf
