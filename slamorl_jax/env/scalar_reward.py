"""``ScalarRewardWrapper``: the env with one float32 reward per step, for single-objective RL code.

The env's reward is a (time, cost, sla) vector; gymnax's ``LogWrapper``, ``RolloutWrapper`` and
PureJaxRL-style trainers expect a scalar. The wrapper pays ``w . r`` with either

* a fixed preference ``w`` (a preset name of ``objectives.PREFERENCES`` or any non-negative 3-vector,
  normalised onto the simplex), or
* ``"adaptive"``: the env's own SLA-severity-adapted weights in force when the action was taken
  (``info["step_weights"]``), the scalarisation this project's own PPO learns with.

The vector stays in ``info["vector_reward"]`` and the weights used in ``info["reward_weights"]``
(MO-Gymnasium's ``LinearReward`` names). Everything else (observation, spaces, params, the rest of
``info``) is the wrapped env's. Build it with ``make(scenario, reward=...)`` or wrap an env yourself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces
from gymnax.wrappers.purerl import GymnaxWrapper

from slamorl_jax.env.batched_step import step_envs
from slamorl_jax.env.objectives import PREFERENCES, preference_vector

ADAPTIVE = "adaptive"


class ScalarRewardWrapper(GymnaxWrapper):
    """A gymnax wrapper paying ``weights . reward_vector`` (see the module docstring)."""

    def __init__(self, env: Any, weights: str | Sequence[float] | np.ndarray = ADAPTIVE) -> None:
        # Weighting a reward that is already scalar would multiply a number by a vector: these
        # weights replace the wrapped env's instead, on the same vector env.
        super().__init__(env._env if isinstance(env, ScalarRewardWrapper) else env)
        self.adaptive = isinstance(weights, str) and weights == ADAPTIVE
        self.weights = None if self.adaptive else preference_vector(weights).astype(np.float32)

    def __getattr__(self, name: str) -> Any:
        """The wrapped env's attribute; never for ``_env`` itself, so ``copy.deepcopy`` (which
        ``GymnaxToVectorGymWrapper`` calls) does not recurse through a half-built copy."""
        if name == "_env" or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)
        return getattr(self._env, name)

    @property
    def name(self) -> str:
        """The wrapped env's name with ``Scalar`` before its version (``JobAllocation-v0`` gives
        ``JobAllocationScalar-v0``, the gymnax id of the scalar env), as gymnax names its envs."""
        base, dash, version = self._env.name.rpartition("-")
        return f"{base}Scalar{dash}{version}" if dash else f"{self._env.name}Scalar"

    def __repr__(self) -> str:
        how = ADAPTIVE if self.adaptive else np.round(self.weights, 4).tolist()
        return f"ScalarRewardWrapper({self._env!r}, weights={how})"

    def reset(self, key: jax.Array, params: Any = None) -> tuple[jax.Array, Any]:
        """The wrapped env's reset."""
        return self._env.reset(key, params)

    def step(
        self, key: jax.Array, state: Any, action: jax.Array | int, params: Any = None
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array, dict[str, Any]]:
        """The wrapped env's step with the reward scalarised; the vector goes to ``info``."""
        obs, state, vector, terminated, truncated, info = self._env.step(key, state, action, params)
        reward, info = self._scalarise(vector, info)
        return obs, state, reward, terminated, truncated, info

    def step_env(
        self, key: jax.Array, state: Any, action: jax.Array | int, params: Any = None
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, dict[str, Any]]:
        """gymnax's step hook without the auto-reset, ``(obs, state, reward, terminated, info)``, its
        reward scalarised as :meth:`step`'s (it reached the wrapped env through ``__getattr__`` and
        paid the vector)."""
        obs, state, vector, terminated, info = self._env.step_env(key, state, action, params)
        reward, info = self._scalarise(vector, info)
        return obs, state, reward, terminated, info

    def step_batch(
        self,
        keys: jax.Array,
        state: Any,
        action: jax.Array,
        params: Any = None,
        reset_slots: int | None = None,
        reset_by: str | None = None,
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array, dict[str, Any]]:
        """The wrapped env's ``step_batch`` (a batch of envs; ``vmap`` of its ``step`` where its class
        has none) with each env's reward scalarised; ``reset_slots`` and ``reset_by`` as the wrapped
        env's."""
        stepped = step_envs(self._env, keys, state, action, params, reset_slots, reset_by=reset_by)
        obs, state, vector, terminated, truncated, info = stepped
        reward, info = jax.vmap(self._scalarise)(vector, info)
        return obs, state, reward, terminated, truncated, info

    def _scalarise(self, vector: jax.Array, info: dict[str, Any]) -> tuple[jax.Array, dict[str, Any]]:
        """One step's scalar reward and its ``info`` with the vector and the weights added."""
        weights = info["step_weights"] if self.adaptive else jnp.asarray(self.weights)
        reward = jnp.dot(weights, vector).astype(jnp.float32)
        return reward, {**info, "vector_reward": vector, "reward_weights": weights}

    def reward_space(self, params: Any = None) -> spaces.Box:
        """Bounds of the scalar reward: the vector's bounds under the weights (any simplex point when
        adaptive)."""
        vector = self._env.reward_space(params)
        low, high = np.asarray(vector.low), np.asarray(vector.high)
        if self.adaptive:
            return spaces.Box(np.float32(low.min()), np.float32(high.max()), (), jnp.float32)
        return spaces.Box(np.float32(self.weights @ low), np.float32(self.weights @ high), (), jnp.float32)


VECTOR = "vector"
REWARDS = (VECTOR, ADAPTIVE, *PREFERENCES)


def with_reward(env: Any, reward: str | Sequence[float] | np.ndarray = VECTOR) -> Any:
    """``env`` itself for ``reward="vector"``, else ``ScalarRewardWrapper(env, reward)``: ``"adaptive"``,
    a preference preset or 3 non-negative weights (time, cost, sla). ``ValueError`` on anything else.
    An env that already pays a scalar (a :class:`ScalarRewardWrapper`, e.g. ``JobAllocationScalar-v0``)
    gets the new reward in place of its own."""
    if isinstance(env, ScalarRewardWrapper):
        env = env._env
    if isinstance(reward, str):
        if reward == VECTOR:
            return env
        if reward not in REWARDS:
            raise ValueError(
                f"unknown reward {reward!r}; choose one of: {', '.join(REWARDS)} "
                "or give 3 non-negative weights (time, cost, sla)"
            )
    return ScalarRewardWrapper(env, reward)
