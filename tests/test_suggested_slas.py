"""SLA targets suggested from the forecast (``env/suggested_slas.py``): the online model's posterior
variance, the confidence margins and their answer for a real job."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from test_live_start import NEW_JOB

from slamorl_jax.env.online_model import empty_stats, posterior_log_time_variance, record_epoch
from slamorl_jax.env.scenarios import scenario_params
from slamorl_jax.env.suggested_slas import contention_share, margin_factor
from slamorl_jax.live import live_state
from slamorl_jax.live_job import LiveJob
from slamorl_jax.live_slas import suggested_slas

PARAMS = scenario_params("mixed")


def test_the_posterior_variance_is_the_priors_then_the_bayesian_regressions() -> None:
    """Before any epoch: ``s^2 spread_c^2 + q^2 spread_s^2``; after epochs: ``x^T P^-1 x`` with
    ``P = D + n X^T X`` over the measured rows ``X``, computed here by plain matrix inversion."""
    sc, ss, noise = (float(PARAMS.compute_spread), float(PARAMS.sync_spread), float(PARAMS.forecast_noise))
    s, q = 0.7, 0.3
    prior = float(posterior_log_time_variance(empty_stats(), PARAMS, jnp.float32(s), jnp.float32(q)))
    assert prior == pytest.approx(s * s * sc * sc + q * q * ss * ss, rel=1e-5)
    rows = [(1.0, 0.0, 0.05), (0.6, 0.4, -0.02), (0.6, 0.4, 0.01), (0.4, 0.6, 0.0)]
    stats = empty_stats()
    for share, sync, residual in rows:
        stats = record_epoch(stats, jnp.float32(np.exp(residual)), jnp.float32(1.0), share, sync)
    x = np.array([[a, b] for a, b, _ in rows])
    precision = np.diag([1 / sc**2, 1 / ss**2]) + x.T @ x / noise**2
    expected = np.array([s, q]) @ np.linalg.inv(precision) @ np.array([s, q])
    got = float(posterior_log_time_variance(stats, PARAMS, jnp.float32(s), jnp.float32(q)))
    assert got == pytest.approx(expected, rel=1e-4) and got < prior


def test_margins_grow_with_confidence_and_hold_the_mean_contention_at_one_half() -> None:
    """At confidence 0.5 the factor is the mean contention slowdown alone (1 with no contention);
    it grows with the confidence."""
    state = live_state(LiveJob.from_dict(NEW_JOB), PARAMS)
    choice = {"gpus": jnp.int32(8), "cpus": jnp.int32(32), "compute_share": 0.8, "sync_share": 0.2}
    share, _ = contention_share(PARAMS)
    factors = [float(margin_factor(state, PARAMS, choice, c)) for c in (0.5, 0.8, 0.9, 0.99)]
    assert factors == sorted(factors) and factors[0] > 1.0 and 0 < float(share) < 1
    calm = PARAMS.replace(contention_start_prob=jnp.float32(0.0))
    assert float(margin_factor(state, calm, choice, 0.5)) == pytest.approx(1.0, abs=1e-6)


def test_a_confident_suggestion_is_looser_and_probes_tighten_it() -> None:
    """With ``confidence`` 0.9 a new job's deadline is the projection x the reported factor, looser
    than x1.1 on the profile alone; probes that measured the job as its profile says tighten it."""
    plain = suggested_slas(LiveJob.from_dict(NEW_JOB), PARAMS, confidence=0.9)
    margin = plain["margins"]["time"]
    assert margin > 1.1 and plain["confidence"] == 0.9
    assert plain["deadline_s"] == pytest.approx(margin * plain["projected"]["time_s"], rel=1e-3)
    reference = suggested_slas(LiveJob.from_dict(NEW_JOB), PARAMS)
    assert reference["margins"]["time"] == 1.1 and reference["deadline_s"] < plain["deadline_s"]
    state = live_state(LiveJob.from_dict(NEW_JOB), PARAMS)
    probes = [
        {"gpus": g, "cpus": c, "epoch_time_s": float(state.profile_now.epoch_time_s) * 4 / g}
        for g, c in ((4, 32), (16, 64), (1, 8))
    ]
    probed = suggested_slas(LiveJob.from_dict({**NEW_JOB, "probes": probes}), PARAMS, confidence=0.9)
    assert probed["probes_used"] == 3 and 1.0 < probed["margins"]["time"] < margin
    with pytest.raises(ValueError, match="probability"):
        suggested_slas(LiveJob.from_dict(NEW_JOB), PARAMS, confidence=1.0)
