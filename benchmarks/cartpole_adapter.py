"""gymnax CartPole-v1 behind the interface the trainer expects, for the training-speed peer.

The training benchmark runs PPO on CartPole with *our* trainer (same network, rollout, minibatches,
optimiser and loop), so the only difference between the two measurements is the environment. This
adapter gives CartPole a reward vector, constant weights, and the ``info`` keys the trainer reads
(episode figures it cannot have are zeros; its shaping potential is zero).

CartPole's network is narrower than ours: 4 observation features and 2 actions against our 351 and
89. ``CartPoleForTrainer.as_wide_as(...)`` pads CartPole's observation with zeros to our width, gives
it as many actions (action ``a`` pushes the cart like ``a % 2``) and as many objectives (the reward
repeated, equal weights), so the trainer builds exactly our network for it, priors included, and
the comparison isolates the environment from the network's size.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from slamorl_jax.agent.plain_info import plain_info

CARTPOLE_FEATURES = 4
CARTPOLE_ACTIONS = 2


class CartPoleForTrainer:
    """CartPole-v1 with a reward vector and the trainer's ``info`` keys (by default its own width:
    4 features, 2 actions, 1 objective)."""

    name = "CartPole-v1"

    def __init__(
        self, obs_width: int = CARTPOLE_FEATURES, num_actions: int = CARTPOLE_ACTIONS, reward_dim: int = 1
    ) -> None:
        if obs_width < CARTPOLE_FEATURES or num_actions < CARTPOLE_ACTIONS or reward_dim < 1:
            raise ValueError("CartPole can only be padded: at least 4 features, 2 actions, 1 objective")
        import gymnax  # here: it computes arrays on import, after the backend check

        self.env, self.default_params = gymnax.make("CartPole-v1")
        self.obs_width = obs_width
        self.num_actions = num_actions
        self.reward_dim = reward_dim

    @classmethod
    def as_wide_as(cls, env: Any) -> CartPoleForTrainer:
        """CartPole padded to ``env``'s observation width, action count and objectives."""
        width = int(env.observation_space(env.default_params).shape[-1])
        return cls(width, int(env.num_actions), int(env.reward_dim))

    def observation_space(self, params: Any = None) -> Any:
        """CartPole's observation space, or a box of the padded width."""
        space = self.env.observation_space(self.default_params)
        if self.obs_width == CARTPOLE_FEATURES:
            return space
        return type(space)(-jnp.inf, jnp.inf, (self.obs_width,), jnp.float32)

    def _pad(self, obs: jax.Array) -> jax.Array:
        return jnp.pad(obs, (0, self.obs_width - CARTPOLE_FEATURES))

    def reset(self, key: jax.Array, params: Any = None) -> tuple[jax.Array, Any]:
        """gymnax reset; the state gains constant weights for the trainer."""
        obs, state = self.env.reset(key, self.default_params if params is None else params)
        return self._pad(obs), _WithWeights(state, self.reward_dim)

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None) -> tuple:
        """gymnax step, reward as a 1-vector, trainer ``info`` keys filled in."""
        params = self.default_params if params is None else params
        action = action % CARTPOLE_ACTIONS
        obs, inner, reward, terminated, truncated, info = self.env.step(key, state.inner, action, params)
        weights = jnp.full((self.reward_dim,), 1.0 / self.reward_dim, jnp.float32)
        info = plain_info(self._pad(info["final_observation"]), weights)
        return (
            self._pad(obs),
            _WithWeights(inner, self.reward_dim),
            jnp.broadcast_to(reward, (self.reward_dim,)).astype(jnp.float32),
            terminated,
            truncated,
            info,
        )


@jax.tree_util.register_pytree_node_class
class _WithWeights:
    """A gymnax state plus the ``weights`` and projections the trainer reads from env states."""

    def __init__(self, inner: Any, reward_dim: int = 1) -> None:
        self.inner = inner
        self.reward_dim = reward_dim

    @property
    def weights(self) -> jax.Array:
        return jnp.full((*jnp.shape(self.inner.time), self.reward_dim), 1.0 / self.reward_dim, jnp.float32)

    @property
    def projected_remaining_time_s(self) -> jax.Array:
        return jnp.zeros(jnp.shape(self.inner.time), jnp.float32)

    projected_remaining_cost_usd = projected_remaining_time_s

    @property
    def job(self) -> Any:
        ones = jnp.ones(jnp.shape(self.inner.time), jnp.float32)
        return _Refs(ones, ones)

    def tree_flatten(self) -> tuple[tuple[Any], int]:
        return (self.inner,), self.reward_dim

    @classmethod
    def tree_unflatten(cls, reward_dim: int, children: tuple[Any]) -> _WithWeights:
        return cls(children[0], reward_dim)


class _Refs:
    """Reference time and cost of 1 (shaping potentials are zero anyway)."""

    def __init__(self, time_ref_s: jax.Array, cost_ref_usd: jax.Array) -> None:
        self.time_ref_s = time_ref_s
        self.cost_ref_usd = cost_ref_usd
