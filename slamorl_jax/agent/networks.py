"""Flax actor-critic: the actor sees (observation, adaptive weights); the critic values each objective.

The actor maps the observation features and the current objective weights ``w_t`` to logits over
the actions; the critic maps the same input to one value per objective (a vector critic), so the
learner can scalarise advantages with whatever weights were in force at each step. Actor and critic
have separate trunks of the same shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "elu": nn.elu,
}
INITIALIZERS = ("orthogonal", "lecun", "he", "glorot")


def kernel_init(name: str, scale: float) -> nn.initializers.Initializer:
    """A kernel initialiser by name; ``scale`` is the orthogonal gain or the variance scale."""
    if name == "orthogonal":
        return nn.initializers.orthogonal(scale)
    mode, distribution = {
        "lecun": ("fan_in", "truncated_normal"),
        "he": ("fan_in", "truncated_normal"),
        "glorot": ("fan_avg", "uniform"),
    }[name]
    variance = scale**2 * (2.0 if name == "he" else 1.0)
    return nn.initializers.variance_scaling(variance, mode, distribution)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Shape of the actor-critic (every field is a CLI flag of ``slamorl_jax.train``)."""

    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    initializer: str = "orthogonal"
    num_actions: int = 9
    num_objectives: int = 3
    # Observation features the network reads (the first ones); None = all. Policies trained before
    # the forecast block read the paper's 21 features and still run on today's observation.
    obs_dim: int | None = None


class MLP(nn.Module):
    """Dense layers with one activation, then a linear head of ``out_size`` units."""

    hidden_sizes: Sequence[int]
    out_size: int
    activation: str
    initializer: str
    head_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the network to the last axis of ``x``."""
        act = ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = nn.Dense(size, kernel_init=kernel_init(self.initializer, float(np.sqrt(2.0))))(x)
            x = act(x)
        return nn.Dense(self.out_size, kernel_init=kernel_init(self.initializer, self.head_scale))(x)


class ActorCritic(nn.Module):
    """Policy logits over the actions and a value per objective from (observation, weights)."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, obs: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Return ``(logits [..., num_actions], values [..., num_objectives])``."""
        c = self.config
        obs = obs if c.obs_dim is None else obs[..., : c.obs_dim]
        x = jnp.concatenate([obs, weights], axis=-1)
        logits = MLP(c.hidden_sizes, c.num_actions, c.activation, c.initializer, 0.01, name="actor")(x)
        values = MLP(c.hidden_sizes, c.num_objectives, c.activation, c.initializer, 1.0, name="critic")(x)
        return logits, values


def init_params(network: ActorCritic, key: jax.Array, obs_dim: int) -> dict:
    """Fresh network parameters for observations of ``obs_dim`` features."""
    c = network.config
    return network.init(key, jnp.zeros((1, obs_dim)), jnp.full((1, c.num_objectives), 1.0 / c.num_objectives))
