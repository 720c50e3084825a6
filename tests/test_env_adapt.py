"""Adaptive objective weights (``adaptive_weights.adapt``) and SLA severities (``sla.py``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slamorl_jax.env import OBJECTIVES, SLA_NAMES, SlaTargets, adapt
from slamorl_jax.env.adaptive_weights import objective_pressure
from slamorl_jax.env.sla import over_limit_severity, sla_severities, under_limit_severity

# The objective each SLA's severity feeds (``adaptive_weights`` docstring): time and throughput ->
# time, cost -> cost, memory and GPU/CPU utilisation -> sla.
OBJECTIVE_OF_SLA = {
    "time": "time",
    "cost": "cost",
    "throughput": "time",
    "memory": "sla",
    "gpu_util": "sla",
    "cpu_util": "sla",
}

adapt_jit = jax.jit(adapt)


def unit_floats() -> st.SearchStrategy[float]:
    """Floats in [0, 1], exact 0 and 1 included."""
    return st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0, width=32))


preferences = st.lists(unit_floats(), min_size=3, max_size=3).filter(lambda w: sum(w) > 1e-3)
severities = st.lists(unit_floats(), min_size=6, max_size=6)
etas = st.one_of(st.sampled_from([0.0, 10.0]), st.floats(0.0, 10.0, width=32))


def weights_of(preference: list[float], severity: list[float], eta: float) -> np.ndarray:
    """``adapt`` (jitted once) on the normalised preference."""
    w = np.asarray(preference, np.float32) / np.float32(sum(preference))
    return np.asarray(adapt_jit(jnp.asarray(w), jnp.asarray(severity, jnp.float32), jnp.float32(eta)))


def test_grouping_covers_every_sla_and_objective() -> None:
    """The test's SLA -> objective map covers every SLA and objective."""
    assert set(OBJECTIVE_OF_SLA) == set(SLA_NAMES)
    assert set(OBJECTIVE_OF_SLA.values()) == set(OBJECTIVES)


@given(preference=preferences, severity=severities, eta=etas)
def test_weights_stay_on_the_simplex(preference: list[float], severity: list[float], eta: float) -> None:
    """Adapted weights are non-negative, sum to 1 and keep zero preferences at zero."""
    w = weights_of(preference, severity, eta)
    assert w.shape == (3,) and w.dtype == np.float32
    assert np.all(np.isfinite(w)) and np.all(w >= 0.0)
    assert math.isclose(float(w.sum()), 1.0, abs_tol=1e-5)
    # An objective the user gave no weight keeps none.
    assert np.all(w[np.asarray(preference) == 0.0] == 0.0)


@given(
    preference=preferences,
    severity=severities,
    eta=etas,
    sla=st.sampled_from(SLA_NAMES),
    raised_to=unit_floats(),
)
def test_raising_a_severity_never_lowers_its_objective_weight(
    preference: list[float], severity: list[float], eta: float, sla: str, raised_to: float
) -> None:
    """A higher severity never lowers the weight of the objective it feeds."""
    index = SLA_NAMES.index(sla)
    raised = list(severity)
    raised[index] = max(severity[index], raised_to)
    objective = OBJECTIVES.index(OBJECTIVE_OF_SLA[sla])
    before = weights_of(preference, severity, eta)[objective]
    after = weights_of(preference, raised, eta)[objective]
    assert after >= before - 1e-6


@given(preference=preferences, severity=severities)
def test_zero_eta_keeps_the_preference(preference: list[float], severity: list[float]) -> None:
    """eta = 0 is the static-weight ablation: the preference comes back."""
    w = weights_of(preference, severity, 0.0)
    expected = np.asarray(preference, np.float32) / np.float32(sum(preference))
    np.testing.assert_allclose(w, expected, rtol=1e-5, atol=1e-7)


@given(preference=preferences, eta=etas)
def test_no_violation_keeps_the_preference(preference: list[float], eta: float) -> None:
    """With every SLA met the preference comes back for any eta."""
    w = weights_of(preference, [0.0] * 6, eta)
    expected = np.asarray(preference, np.float32) / np.float32(sum(preference))
    np.testing.assert_allclose(w, expected, rtol=1e-5, atol=1e-7)


def test_adapt_by_hand_and_batched() -> None:
    """Pressures and weights match a hand computation, also with batch axes."""
    preference = np.array([0.5, 0.3, 0.2], np.float32)
    severity = np.array([0.3, 0.0, 0.2, 0.5, 0.1, 0.0], np.float32)
    # Pressures: time max(0.3, 0.2), cost 0, sla max(0.5, 0.1, 0.0).
    np.testing.assert_allclose(np.asarray(objective_pressure(severity)), [0.3, 0.0, 0.5], rtol=1e-6)
    tilted = preference * np.exp(2.0 * np.array([0.3, 0.0, 0.5]))
    np.testing.assert_allclose(np.asarray(adapt(preference, severity, 2.0)), tilted / tilted.sum(), rtol=1e-5)
    # Leading batch axes broadcast.
    batch = adapt(np.tile(preference, (4, 1)), np.tile(severity, (4, 1)), 2.0)
    assert batch.shape == (4, 3)
    np.testing.assert_allclose(np.asarray(batch), np.tile(tilted / tilted.sum(), (4, 1)), rtol=1e-5)


def test_weights_stay_finite_for_every_valid_eta() -> None:
    """Weights stay finite at eta = 100, the largest value validation accepts."""
    time_only_violated = jnp.asarray([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    w = adapt_jit(jnp.asarray([0.0, 1.0, 0.0]), time_only_violated, jnp.float32(100.0))
    np.testing.assert_allclose(np.asarray(w), [0.0, 1.0, 0.0], atol=1e-6)


# --- SLA severities -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [(12.0, 10.0, 0.2), (10.0, 10.0, 0.0), (5.0, 10.0, 0.0), (25.0, 10.0, 1.0), (0.75, 0.5, 0.5)],
)
def test_over_limit_severity_by_hand(value: float, limit: float, expected: float) -> None:
    """Upper-limit severity is the relative overshoot, capped at 1."""
    assert float(over_limit_severity(value, limit)) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [
        (8.0, 10.0, 0.2),
        (10.0, 10.0, 0.0),
        (12.0, 10.0, 0.0),
        (0.0, 10.0, 1.0),
        (0.3, 0.4, 0.25),
        (0.0, 0.0, 0.0),
    ],
)
def test_under_limit_severity_by_hand(value: float, limit: float, expected: float) -> None:
    """Lower-limit severity is the relative shortfall, capped at 1, 0 for no limit."""
    assert float(under_limit_severity(value, limit)) == pytest.approx(expected, abs=1e-6)


def test_sla_severities_by_hand() -> None:
    """The six severities in SLA_NAMES order for hand-picked readings."""
    targets = SlaTargets(
        deadline_s=jnp.float32(100.0),
        budget_usd=jnp.float32(10.0),
        min_throughput=jnp.float32(50.0),
        max_memory_gib=jnp.float32(20.0),
        min_gpu_util=jnp.float32(0.5),
        min_cpu_util=jnp.float32(0.2),
    )
    got = sla_severities(
        projected_time_s=130.0,  # 30 % over the deadline
        projected_cost_usd=9.0,  # inside the budget
        throughput=40.0,  # 20 % short
        memory_used_gib=50.0,  # 150 % over: capped at 1
        gpu_util=0.25,  # half the minimum
        cpu_util=0.3,  # above the minimum
        targets=targets,
    )
    assert len(got) == len(SLA_NAMES)
    np.testing.assert_allclose([float(s) for s in got], [0.3, 0.0, 0.2, 1.0, 0.5, 0.0], atol=1e-6)


@given(value=st.floats(0.0, 1e6, width=32), limit=st.floats(0.0625, 1e6, width=32))
def test_severities_lie_in_unit_interval_and_vanish_when_met(value: float, limit: float) -> None:
    """Severities lie in [0, 1] and are 0 exactly when the SLA is met."""
    over = float(over_limit_severity(value, limit))
    under = float(under_limit_severity(value, limit))
    assert 0.0 <= over <= 1.0 and 0.0 <= under <= 1.0
    assert (over == 0.0) == (value <= limit) or math.isclose(value, limit, rel_tol=1e-6)
    assert (under == 0.0) == (value >= limit) or math.isclose(value, limit, rel_tol=1e-6)
