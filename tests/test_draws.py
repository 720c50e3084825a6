"""Inverse-CDF draws (``env.draws.categorical_from_cdf``): the env's job draws, the Python reference's
thresholds and the trainer's action sampling share one rule for bins without probability."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.agent.networks import MASKED_LOGIT
from slamorl_jax.agent.trainer import sample_actions
from slamorl_jax.env import draws
from slamorl_jax.env.python_params import cdf_thresholds

# A distribution whose float32 sum before its trailing zero rounds below 1 (found by a review).
PROBS = np.array([0.04496, 0.09042, 0.40440, 0.08567, 0.22556, 0.14898, 0.0], np.float32)
LAST_UNIFORM = 1.0 - 2.0**-24  # the largest float32 below 1


def python_index(u: float, thresholds: tuple[float, ...]) -> int:
    """The Python reference's draw (``python_job._categorical``): thresholds passed."""
    return sum(u >= c for c in thresholds)


def test_a_trailing_zero_probability_bin_is_never_drawn() -> None:
    """The sum of the first six rounds below 1 in float32, so the largest uniform drew bin 6, of
    probability 0 (a workload, GPU count or scenario kind the params exclude)."""
    cdf = np.cumsum(PROBS / PROBS.sum(dtype=np.float32), dtype=np.float32)
    assert cdf[-2] <= LAST_UNIFORM  # the sliver that drew it is there
    u = jnp.float32(LAST_UNIFORM)
    assert int(draws.categorical(u, jnp.asarray(PROBS))) == 5
    assert python_index(LAST_UNIFORM, cdf_thresholds(PROBS)) == 5


def test_the_rule_leaves_every_other_draw_as_it_was() -> None:
    """Over a grid of uniforms and distributions with zero bins inside and at the end, the index is
    the count of thresholds passed, clamped to the last bin with probability; the Python reference
    agrees draw for draw."""
    rng = np.random.default_rng(0)
    us = np.concatenate([rng.random(2000, np.float32), [0.0, LAST_UNIFORM]]).astype(np.float32)
    for _ in range(20):
        probs = rng.random(8).astype(np.float32) * (rng.random(8) < 0.7)
        probs[0] += 0.01  # at least one bin with probability
        cdf = jnp.cumsum(jnp.asarray(probs) / jnp.sum(jnp.asarray(probs)))
        got = np.asarray(jax.vmap(draws.categorical_from_cdf, in_axes=(0, None))(jnp.asarray(us), cdf))
        last = int(np.nonzero(probs > 0)[0].max())
        plain = np.minimum((us[:, None] >= np.asarray(cdf)[None, :-1]).sum(axis=1), last)
        np.testing.assert_array_equal(got, plain)
        assert np.all(probs[got] > 0)
        thresholds = cdf_thresholds(probs)
        assert [python_index(float(u), thresholds) for u in us] == got.tolist()


def test_a_masked_last_action_is_never_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer samples through the same rule: relocate, the last action, masked by the payback
    rule, was drawn where the other actions' float32 probabilities summed below 1. Its uniforms are
    set to the largest ``jax.random.uniform`` gives (1 - 2**-23), which reaches that sliver on some
    rows: drawn honestly, about once in 2**23 draws."""
    logits = jax.random.normal(jax.random.key(1), (4096, 90)).at[:, -1].set(MASKED_LOGIT)
    cdf = jnp.cumsum(jax.nn.softmax(logits), axis=-1)
    largest = 1.0 - 2.0**-23
    assert bool(jnp.any(cdf[:, -2] <= largest))  # rows where it passes every unmasked threshold

    def largest_uniforms(key: jax.Array, shape: tuple[int, ...], dtype: jnp.dtype = jnp.float32) -> jax.Array:
        return jnp.full(shape, largest, dtype)

    monkeypatch.setattr(jax.random, "uniform", largest_uniforms)
    actions, log_probs = sample_actions(jax.random.key(2), logits)
    assert int(jnp.max(actions)) < 89 and bool(jnp.all(log_probs > MASKED_LOGIT / 2))
