"""gymnax CartPole-v1 behind the interface the trainer expects, for the training-speed peer.

The training benchmark runs PPO on CartPole with *our* trainer (same network, rollout, minibatches,
optimiser and loop), so the only difference between the two measurements is the environment. This
adapter gives CartPole a one-objective reward vector, constant weights of 1, and the ``info`` keys
the trainer reads (episode figures it cannot have are zeros; its shaping potential is zero).
"""

from __future__ import annotations

from typing import Any

import gymnax
import jax
import jax.numpy as jnp


class CartPoleForTrainer:
    """CartPole-v1 with a ``(1,)`` reward vector and the trainer's ``info`` keys."""

    num_actions = 2
    reward_dim = 1
    name = "CartPole-v1"

    def __init__(self) -> None:
        self.env, self.default_params = gymnax.make("CartPole-v1")

    def observation_space(self, params: Any = None) -> Any:
        """CartPole's 4-feature observation space."""
        return self.env.observation_space(self.default_params)

    def reset(self, key: jax.Array, params: Any = None) -> tuple[jax.Array, Any]:
        """gymnax reset; the state gains constant weights for the trainer."""
        obs, state = self.env.reset(key, self.default_params if params is None else params)
        return obs, _WithWeights(state)

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None) -> tuple:
        """gymnax step, reward as a 1-vector, trainer ``info`` keys filled in."""
        params = self.default_params if params is None else params
        obs, inner, reward, terminated, truncated, info = self.env.step(key, state.inner, action, params)
        one = jnp.ones((1,), jnp.float32)
        zero = jnp.zeros((), jnp.float32)
        info = {
            "weights": one,
            "final_weights": one,
            "final_observation": info["final_observation"],
            "preference": one,
            "projected_remaining_time_s": zero,
            "projected_remaining_cost_usd": zero,
            "time_ref_s": jnp.ones((), jnp.float32),
            "cost_ref_usd": jnp.ones((), jnp.float32),
            "episode_time_s": zero,
            "episode_cost_usd": zero,
            "deadline_met": jnp.zeros((), bool),
            "budget_met": jnp.zeros((), bool),
            "all_slas_met": jnp.zeros((), bool),
            "sla_compliance": zero,
            "reallocations": jnp.zeros((), jnp.int32),
        }
        return (
            obs,
            _WithWeights(inner),
            jnp.reshape(reward, (1,)).astype(jnp.float32),
            terminated,
            truncated,
            info,
        )


@jax.tree_util.register_pytree_node_class
class _WithWeights:
    """A gymnax state plus the ``weights`` and projections the trainer reads from env states."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def weights(self) -> jax.Array:
        return jnp.ones((*jnp.shape(self.inner.time), 1), jnp.float32)

    @property
    def projected_remaining_time_s(self) -> jax.Array:
        return jnp.zeros(jnp.shape(self.inner.time), jnp.float32)

    projected_remaining_cost_usd = projected_remaining_time_s

    @property
    def job(self) -> Any:
        ones = jnp.ones(jnp.shape(self.inner.time), jnp.float32)
        return _Refs(ones, ones)

    def tree_flatten(self) -> tuple[tuple[Any], None]:
        return (self.inner,), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple[Any]) -> _WithWeights:
        return cls(children[0])


class _Refs:
    """Reference time and cost of 1 (shaping potentials are zero anyway)."""

    def __init__(self, time_ref_s: jax.Array, cost_ref_usd: jax.Array) -> None:
        self.time_ref_s = time_ref_s
        self.cost_ref_usd = cost_ref_usd
