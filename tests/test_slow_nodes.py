"""Slow nodes in the online model (``online_model.observe_epoch``) and the forecast
(``forecast.candidate_totals``): an epoch far slower than the model expects is the nodes', and only
keep and the targets that keep the GPU count carry it, for as long as a spell lasts on average."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.forecast import candidate_totals, node_slowdown_ahead
from slamorl_jax.env.online_model import (
    NODE_SIGMAS,
    empty_stats,
    epoch_surprise,
    observe_epoch,
    posterior_deviation,
    posterior_log_time_variance,
    record_epoch,
)
from slamorl_jax.env.params import with_values
from slamorl_jax.env.pauses import move_pause_s

ENV = JobAllocationEnv()
SLOW_NODES = with_values(ENV.default_params, separate_slow_nodes=True)
SHARES = (0.8, 0.2)  # compute and sync shares of the allocation every epoch here runs on
PROFILE_S = 100.0


def _measured_three_epochs() -> jax.Array:
    """Statistics after three noise-free epochs 10 % slower than the profile at one allocation."""
    stats = empty_stats()
    for _ in range(3):
        stats = record_epoch(stats, jnp.float32(110.0), jnp.float32(PROFILE_S), *map(jnp.float32, SHARES))
    return stats


def test_observe_epoch_records_within_the_bound_and_sets_apart_beyond_it() -> None:
    """The bound is NODE_SIGMAS predictive deviations, by hand: just inside, the epoch is recorded
    and leaves no node slowdown; just outside, the model is untouched and the surprise is the
    slowdown."""
    params = SLOW_NODES
    stats = _measured_three_epochs()
    s, q = (jnp.float32(x) for x in SHARES)
    spread = float(
        np.sqrt(float(params.forecast_noise) ** 2 + float(posterior_log_time_variance(stats, params, s, q)))
    )
    mu_c, mu_s = (float(x) for x in posterior_deviation(stats, params))
    forecast = PROFILE_S * np.exp(SHARES[0] * mu_c + SHARES[1] * mu_s)
    for factor, slow in ((0.98, False), (1.02, True)):
        measured = jnp.float32(forecast * np.exp(factor * NODE_SIGMAS * spread))
        new_stats, surprise, nodes = observe_epoch(stats, measured, jnp.float32(PROFILE_S), s, q, params)
        np.testing.assert_allclose(
            float(surprise), float(epoch_surprise(stats, measured, jnp.float32(PROFILE_S), s, q, params))
        )
        np.testing.assert_allclose(float(surprise), factor * NODE_SIGMAS * spread, rtol=1e-4)
        if slow:
            np.testing.assert_array_equal(np.asarray(new_stats), np.asarray(stats))
            assert float(nodes) == float(surprise) > 0
        else:
            expected = record_epoch(stats, measured, jnp.float32(PROFILE_S), s, q)
            np.testing.assert_array_equal(np.asarray(new_stats), np.asarray(expected))
            assert float(nodes) == 0.0


def test_without_the_rule_every_epoch_is_recorded() -> None:
    """The default (``separate_slow_nodes`` off): an epoch twice the forecast is recorded and leaves
    no node slowdown."""
    params = ENV.default_params
    assert not bool(params.separate_slow_nodes)
    stats = _measured_three_epochs()
    s, q = (jnp.float32(x) for x in SHARES)
    measured, profile = jnp.float32(220.0), jnp.float32(PROFILE_S)
    new_stats, surprise, nodes = observe_epoch(stats, measured, profile, s, q, params)
    assert float(surprise) > 0.5 and float(nodes) == 0.0
    np.testing.assert_array_equal(
        np.asarray(new_stats), np.asarray(record_epoch(stats, measured, profile, s, q))
    )


def test_a_faster_epoch_is_always_the_jobs() -> None:
    """Only slowness is put down to the nodes: an epoch far faster than the model is recorded."""
    params = SLOW_NODES
    stats = _measured_three_epochs()
    s, q = (jnp.float32(x) for x in SHARES)
    new_stats, surprise, nodes = observe_epoch(stats, jnp.float32(50.0), jnp.float32(PROFILE_S), s, q, params)
    assert float(surprise) < -0.5 and float(nodes) == 0.0
    assert np.any(np.asarray(new_stats) != np.asarray(stats))


def _work_left(state, params, nodes: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Projected time past elapsed and pause, of keep and of every target, with ``nodes`` as the
    job's log node slowdown; and which targets keep the job's GPU count."""
    state = state.replace(node_log_slowdown=jnp.float32(nodes))
    mu_c, mu_s = posterior_deviation(state.model_stats, params)
    keep, targets, _, _ = candidate_totals(state, params, mu_c, mu_s)
    target_gpus, target_cpus = params.target_allocation[:, 0], params.target_allocation[:, 1]
    pause = move_pause_s(state.gpus, state.cpus, target_gpus, target_cpus, params)
    same_gpus = np.asarray(target_gpus == state.gpus)
    return (
        np.asarray(keep.time_s - state.elapsed_s),
        np.asarray(targets.time_s - state.elapsed_s - pause),
        same_gpus,
    )


@pytest.mark.parametrize("epochs_left", [1, 4, 40])
def test_the_node_slowdown_lasts_as_long_as_a_spell_on_average(epochs_left: int) -> None:
    """Nodes 1.5x slow: over 1 or 4 epochs left (a spell's mean length at the default end rate 0.25)
    every epoch left is slowed; over 40, the first 4 are, so the mean factor is 1 + 0.5 x 4 / 40."""
    params = SLOW_NODES
    _, state = ENV.reset(jax.random.key(5), params)
    state = state.replace(epoch=state.job.epochs - epochs_left, node_log_slowdown=jnp.float32(np.log(1.5)))
    spell = 1.0 / float(params.contention_end_prob)
    assert spell == 4.0
    expected = 1.0 + 0.5 * min(epochs_left, spell) / epochs_left
    np.testing.assert_allclose(float(node_slowdown_ahead(state, params)), expected, rtol=1e-6)


@pytest.mark.parametrize("leave", [True, False])
def test_only_keep_and_the_same_gpu_count_carry_the_node_slowdown(leave: bool) -> None:
    """With a log node slowdown of log 1.5, keep's work left and that of every target at the job's GPU
    count grow by the mean factor ahead (:func:`forecast.node_slowdown_ahead`); the other targets'
    are unchanged where a GPU change leaves the nodes, and grow by it too where it does not
    (``moves_leave_contention`` off)."""
    params = with_values(SLOW_NODES, moves_leave_contention=leave)
    _, state = ENV.reset(jax.random.key(5), params)
    keep0, targets0, same = _work_left(state, params, 0.0)
    keep1, targets1, _ = _work_left(state, params, float(np.log(1.5)))
    factor = float(node_slowdown_ahead(state.replace(node_log_slowdown=jnp.float32(np.log(1.5))), params))
    assert same.any() and not same.all() and factor > 1.0
    np.testing.assert_allclose(keep1, factor * keep0, rtol=1e-5)
    np.testing.assert_allclose(targets1[same], factor * targets0[same], rtol=1e-5)
    expected_other = factor * targets0[~same] if not leave else targets0[~same]
    np.testing.assert_allclose(targets1[~same], expected_other, rtol=1e-5)
