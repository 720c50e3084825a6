"""The greedy decision and its hold rule (``slamorl_jax.agent.decision``), on hand-made logits."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.agent.decision import HOLD_ACTION, check_hold_below, greedy_actions
from slamorl_jax.env.action_sets import ACTION_SETS, action_names, apply
from slamorl_jax.env.scenarios import scenario_params

# Three rows of 9 logits: a near tie between actions 3 and 7 (probabilities about 0.45 each), a
# clear choice of 8 (about 0.9), and a clear keep (index 4 itself).
LOGITS = jnp.array(
    [
        [0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 2.9, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0],
        [0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0],
    ]
)


def top_probability() -> np.ndarray:
    return np.asarray(jax.nn.softmax(LOGITS, axis=-1).max(axis=-1))


def test_without_a_threshold_it_is_the_argmax() -> None:
    np.testing.assert_array_equal(greedy_actions(LOGITS), [3, 8, 4])
    np.testing.assert_array_equal(greedy_actions(LOGITS, 0.0), jnp.argmax(LOGITS, axis=-1))


def test_an_unsure_argmax_is_held_and_a_sure_one_is_taken() -> None:
    """Below the threshold the keep action replaces the argmax; at or above it the argmax stays."""
    top = top_probability()
    assert top[0] < 0.5 < top[1] and top[2] > 0.5
    np.testing.assert_array_equal(greedy_actions(LOGITS, 0.5), [HOLD_ACTION, 8, 4])
    np.testing.assert_array_equal(greedy_actions(LOGITS, float(top[1])), [HOLD_ACTION, 8, 4])
    np.testing.assert_array_equal(greedy_actions(LOGITS, 1.0), [HOLD_ACTION] * 3)
    np.testing.assert_array_equal(greedy_actions(LOGITS, float(top[0]) * 0.99), [3, 8, 4])


def test_one_holds_even_a_certain_policy() -> None:
    """A top probability that rounds to 1 in float32 is not below 1, yet a threshold of 1 holds it:
    1 holds every decision; just under 1 takes it."""
    certain = jnp.zeros((1, 9)).at[0, 8].set(100.0)
    assert float(jax.nn.softmax(certain, axis=-1).max()) == 1.0
    np.testing.assert_array_equal(greedy_actions(certain, 1.0), [HOLD_ACTION])
    np.testing.assert_array_equal(greedy_actions(certain, jnp.float32(1.0)), [HOLD_ACTION])
    np.testing.assert_array_equal(greedy_actions(certain, 0.999), [8])


def test_a_traced_threshold_decides_as_a_python_one() -> None:
    """Under ``jit`` with the threshold an argument (one program for every threshold)."""
    decide = jax.jit(greedy_actions)
    for threshold in (0.0, 0.5, 1.0):
        np.testing.assert_array_equal(
            decide(LOGITS, jnp.float32(threshold)), greedy_actions(LOGITS, threshold)
        )


def test_the_hold_action_keeps_the_allocation_in_every_action_set() -> None:
    params = scenario_params("mixed")
    gpus, cpus = jnp.array([1, 4, 16]), jnp.array([4, 32, 64])
    for name in ACTION_SETS:
        assert action_names(name, params)[HOLD_ACTION] == "gpu+0/cpu+0"
        held = apply(jnp.full(3, HOLD_ACTION), gpus, cpus, params)
        np.testing.assert_array_equal(held[0], gpus)
        np.testing.assert_array_equal(held[1], cpus)


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf, True, "0.5", None])
def test_a_threshold_outside_zero_to_one_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="hold_below must be"):
        check_hold_below(bad)  # type: ignore[arg-type]


def test_thresholds_in_range_are_floats() -> None:
    given = (0, 0.25, 1, np.float32(0.5), np.int64(1), jnp.float32(0.5), np.array(0.25))
    assert [check_hold_below(v) for v in given] == [0.0, 0.25, 1.0, 0.5, 1.0, 0.5, 0.25]
    for bad in (np.bool_(True), jnp.array(True), jnp.array([0.5])):  # a JAX scalar was refused as not one
        with pytest.raises(ValueError, match="hold_below must be a number"):
            check_hold_below(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hold_below must be a number"):
        jax.jit(check_hold_below)(0.5)  # traced: no number to check
