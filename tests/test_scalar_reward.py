"""ScalarRewardWrapper: w . r with fixed or adaptive weights, the vector kept in info.

Here on a stand-in env whose reward vector is known (nothing to compile); the adaptive weights on
the real env: test_gymnax_env.py.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from slamorl_jax.env import ScalarRewardWrapper, make, preference_vector


class VectorRewardStandIn:
    """A stand-in env paying a fixed reward vector, with the real env's reward space."""

    reward = np.array([-0.5, -0.25, 2.0], np.float32)

    def __init__(self) -> None:
        self.env, self.params = make()

    def step(self, key: object, state: object, action: object, params: object = None) -> tuple:
        """Echo the state; pay ``reward``; adaptive weights (1, 0, 0)."""
        info = {"step_weights": jnp.array([1.0, 0.0, 0.0])}
        return None, state, jnp.asarray(self.reward), False, False, info

    def reward_space(self, params: object = None) -> object:
        """The real env's reward space."""
        return self.env.reward_space(self.params)


def test_fixed_weights_and_reward_space() -> None:
    """A preset pays preference . vector; the scalar space bounds it; attributes pass through."""
    inner = VectorRewardStandIn()
    for weights in ("time", "cost", [1.0, 1.0, 2.0]):
        wrapped = ScalarRewardWrapper(inner, weights)
        _, _, reward, _, _, info = wrapped.step(None, "state", 0)
        expected = preference_vector(weights) @ inner.reward
        np.testing.assert_allclose(reward, expected, rtol=1e-6)
        np.testing.assert_array_equal(info["vector_reward"], inner.reward)
        space = wrapped.reward_space()
        assert space.shape == () and bool(space.contains(reward))
    adaptive = ScalarRewardWrapper(inner)
    assert float(adaptive.step(None, "state", 0)[2]) == -0.5
    assert bool(adaptive.reward_space().contains(jnp.float32(-0.5)))
    assert adaptive.params is inner.params  # pass-through
    assert "adaptive" in repr(adaptive)
