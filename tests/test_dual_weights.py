"""Weight forms (``dual_weights.py``): dual multipliers on hand-computed cases, the properties every
form keeps, the env carrying them, and the ``conflict`` scenario's jobs."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.env import adapt, validate_params
from slamorl_jax.env.dual_weights import (
    DEFAULT_DUAL_MAX,
    DUAL,
    SEVERITY,
    STATIC,
    dual_weights,
    mode_weights,
    update_multipliers,
)
from slamorl_jax.env.objectives import preference_vector
from slamorl_jax.env.params import WEIGHT_MODES, with_values
from slamorl_jax.env.scenario_kinds import SCENARIO_KINDS
from slamorl_jax.env.scenarios import scenario_params

COST = (0.2, 0.6, 0.2)  # the ``cost`` preset


def update(lam: list[float], s: list[float], step: float, decay: float) -> list[float]:
    """``update_multipliers`` on lists."""
    out = update_multipliers(
        tuple(jnp.float32(x) for x in lam), tuple(jnp.float32(x) for x in s), step, decay
    )
    return [float(x) for x in out]


def weights(mode: int, s: list[float], lam: list[float], eta: float, pref: tuple = COST) -> np.ndarray:
    """``mode_weights`` on lists, stacked."""
    cols = mode_weights(
        mode,
        tuple(jnp.float32(x) for x in pref),
        tuple(jnp.float32(x) for x in s),
        tuple(jnp.float32(x) for x in lam),
        eta,
    )
    return np.asarray(jnp.stack(cols))


def test_dual_multiplier_grows_under_violation_and_decays_after_recovery() -> None:
    """Two epochs of a projected deadline overshoot of 50 %, then two with the deadline safe
    (step 1, decay 0.5, eta 1): the deadline's multiplier goes 0.5, 1.0, 0.5, 0.25 and the time
    weight of a cost-preferring job is 0.2 e^lambda / (0.2 e^lambda + 0.8)."""
    severities = [0.5, 0.5, 0.0, 0.0]
    expected = [0.5, 1.0, 0.5, 0.25]
    lam = [0.0] * 6
    for s_time, want in zip(severities, expected, strict=True):
        s = [s_time, 0.0, 0.0, 0.0, 0.0, 0.0]
        lam = update(lam, s, step=1.0, decay=0.5)
        assert lam == pytest.approx([want, 0, 0, 0, 0, 0], abs=1e-7)
        boost = 0.2 * math.exp(want)
        w = weights(DUAL, s, lam, eta=1.0)
        assert w == pytest.approx([boost / (boost + 0.8), 0.6 / (boost + 0.8), 0.2 / (boost + 0.8)], rel=1e-6)
        # The memoryless form forgets at once: at the first safe epoch it is back at the preference.
        if s_time == 0.0:
            assert weights(SEVERITY, s, lam, eta=1.0) == pytest.approx(COST, rel=1e-6)
    # Recovered but remembered: the time weight is still above the preference's 0.2.
    assert weights(DUAL, [0.0] * 6, lam, eta=1.0)[0] > 0.2


def test_dual_multiplier_is_capped_and_grouped_like_the_severities() -> None:
    """A full throughput shortfall (severity 1) every epoch: 1, 2, ..., 5, then held at the cap;
    throughput pressure reaches the time objective, memory's the sla objective."""
    lam = [0.0] * 6
    seen = []
    for _ in range(7):
        lam = update(lam, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0], step=1.0, decay=0.2)
        seen.append(lam[2])
    assert seen == [1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0] and DEFAULT_DUAL_MAX == 5.0
    capped = update_multipliers((jnp.float32(2.5),) * 6, (jnp.float32(1.0),) * 6, 1.0, 0.2, cap=3.0)
    assert [float(x) for x in capped] == [3.0] * 6  # the cap is a param (EnvParams.dual_max)
    balanced = (0.4, 0.4, 0.2)
    w = weights(DUAL, [0.0] * 6, lam, eta=0.5, pref=balanced)
    boost = 0.4 * math.exp(2.5)
    assert w == pytest.approx([boost / (boost + 0.6), 0.4 / (boost + 0.6), 0.2 / (boost + 0.6)], rel=1e-6)
    w_mem = weights(DUAL, [0.0] * 6, [0, 0, 0, 2.0, 0, 0], eta=1.0, pref=balanced)
    assert w_mem[2] > 0.2 and w_mem[0] == pytest.approx(w_mem[1])


unit = st.floats(0.0, 1.0, width=32)
multipliers = st.lists(st.floats(0.0, DEFAULT_DUAL_MAX, width=32), min_size=6, max_size=6)


@given(
    pref=st.lists(unit, min_size=3, max_size=3).filter(lambda w: sum(w) > 1e-3),
    s=st.lists(unit, min_size=6, max_size=6),
    lam=multipliers,
    eta=st.floats(0.0, 10.0, width=32),
    sla=st.integers(0, 5),
    more=st.floats(0.0, 1.0, width=32),
)
def test_every_form_keeps_the_simplex_and_monotonicity(
    pref: list[float], s: list[float], lam: list[float], eta: float, sla: int, more: float
) -> None:
    """Each form's weights lie on the simplex; raising one severity never lowers the new multiplier
    (so never its objective's weight); eta = 0 and ``static`` give the preference; ``severity`` is
    ``adapt`` and ``dual`` is ``adapt`` of the updated multipliers."""
    p = tuple(float(x) for x in np.asarray(pref, np.float32) / np.float32(sum(pref)))
    after = update(lam, s, 1.0, 0.2)
    for mode in (STATIC, SEVERITY, DUAL):
        w = weights(mode, s, after, eta, p)
        assert np.all(w >= 0) and math.isclose(float(w.sum()), 1.0, abs_tol=1e-5)
        assert weights(mode, s, after, 0.0, p) == pytest.approx(p, abs=1e-6)
    assert weights(STATIC, s, after, eta, p) == pytest.approx(p, abs=1e-6)
    assert weights(SEVERITY, s, after, eta, p) == pytest.approx(np.asarray(adapt(p, s, eta)), abs=1e-6)
    assert weights(DUAL, s, after, eta, p) == pytest.approx(np.asarray(dual_weights(p, after, eta)), abs=1e-6)
    raised = list(s)
    raised[sla] = min(1.0, s[sla] + more)
    assert update(lam, raised, 1.0, 0.2)[sla] >= after[sla]


def test_weights_flag_reaches_the_env_and_old_configs_default_to_severity() -> None:
    """``--weights`` picks ``EnvParams.weights_mode``; a config saved before it reads as severity."""
    for name in WEIGHT_MODES:
        config = validate_config(TrainConfig(weights=name, scenario="deadline-critical"))
        assert int(env_params_from_config(config).weights_mode) == WEIGHT_MODES.index(name)
    assert TrainConfig().weights == "severity"
    legacy = {k: v for k, v in TrainConfig().__dict__.items() if k != "weights"}
    assert TrainConfig.from_dict(legacy).weights == "severity"
    with pytest.raises(ValueError, match="--weights must be one of static, severity, dual"):
        validate_config(TrainConfig(weights="lagrange"))


def test_dual_flags_reach_the_env_and_old_configs_keep_the_defaults() -> None:
    """``--dual_step`` and ``--dual_decay`` set the env's; a config saved before them reads as the
    defaults they were trained with."""
    config = validate_config(TrainConfig(weights="dual", dual_step=3.0, dual_decay=0.05))
    params = env_params_from_config(config)
    assert float(params.dual_step) == 3.0 and float(params.dual_decay) == np.float32(0.05)
    defaults = env_params_from_config(TrainConfig())
    legacy = {k: v for k, v in TrainConfig().__dict__.items() if k not in ("dual_step", "dual_decay")}
    restored = env_params_from_config(TrainConfig.from_dict(legacy))
    assert float(restored.dual_step) == float(defaults.dual_step) == 1.0
    assert float(restored.dual_decay) == float(defaults.dual_decay) == np.float32(0.2)


def test_env_carries_dual_multipliers_through_a_rollout(batched_rollout: Callable) -> None:
    """Under ``weights_mode = dual`` each epoch updates the job's multipliers by the rule, from 0
    at reset, and the weights it gives are ``dual_weights`` of them; ``info`` and state agree."""
    params = validate_params(
        with_values(scenario_params("conflict"), weights_mode=DUAL, dual_step=0.7, dual_decay=0.3)
    )
    out = batched_rollout(3, params, np.zeros(89, np.float32))
    before, after, s = out["multipliers_before"], out["multipliers_after"], out["severities"]
    expected = np.where(s > 0, np.minimum(before + 0.7 * s, DEFAULT_DUAL_MAX), 0.7 * before)
    np.testing.assert_allclose(after, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        out["final_weights"],
        np.asarray(dual_weights(out["preference"], after, params.adapt_strength)),
        rtol=1e-5,
        atol=1e-7,
    )
    carried = out["epoch_before"][1:] > 0  # the same job continues from the previous step
    np.testing.assert_array_equal(out["multipliers_before"][1:][carried], after[:-1][carried])
    assert np.any(after > 0) and np.any((after > 0) & (s == 0) & (before > after))


def test_conflict_jobs_prefer_what_their_tight_sla_does_not_protect(batched_rollout: Callable) -> None:
    """``conflict`` draws the deadline-critical kind's SLAs with the cost preference and the
    budget-constrained kind's with the time preference, half each, never the balanced kind; the
    other scenarios keep their presets."""
    params = validate_params(scenario_params("conflict"))
    out = batched_rollout(4, params, np.zeros(89, np.float32))
    kind, pref = out["kind"].ravel(), out["preference"].reshape(-1, 3)
    deadline, budget = SCENARIO_KINDS.index("deadline-critical"), SCENARIO_KINDS.index("budget-constrained")
    assert set(np.unique(kind)) == {deadline, budget}
    np.testing.assert_array_equal(
        pref[kind == deadline], np.broadcast_to(preference_vector("cost"), (np.sum(kind == deadline), 3))
    )
    np.testing.assert_array_equal(
        pref[kind == budget], np.broadcast_to(preference_vector("time"), (np.sum(kind == budget), 3))
    )
    jobs = out["kind"][0]  # the first job of every env: independent draws
    assert 0.2 < np.mean(jobs == deadline) < 0.8
    mixed = scenario_params("mixed")
    np.testing.assert_array_equal(np.asarray(mixed.kind_preference)[deadline], preference_vector("time"))
