"""Minimal gymnax-style spaces: ``Discrete`` actions and ``Box`` observations and rewards."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Discrete:
    """Integers ``0 .. n - 1``."""

    n: int
    dtype: jnp.dtype = jnp.int32

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one element (a scalar)."""
        return ()

    def sample(self, key: jax.Array) -> jax.Array:
        """A uniformly random element."""
        return jax.random.randint(key, (), 0, self.n, dtype=self.dtype)

    def contains(self, x: jax.Array) -> jax.Array:
        """Whether ``x`` is an element."""
        return jnp.logical_and(x >= 0, x < self.n)


@dataclasses.dataclass(frozen=True)
class Box:
    """Arrays of ``shape`` with every element in ``[low, high]``."""

    low: np.ndarray
    high: np.ndarray
    shape: tuple[int, ...]
    dtype: jnp.dtype = jnp.float32

    def sample(self, key: jax.Array) -> jax.Array:
        """A uniformly random element (bounds must be finite)."""
        return jax.random.uniform(key, self.shape, dtype=self.dtype, minval=self.low, maxval=self.high)

    def contains(self, x: jax.Array) -> jax.Array:
        """Whether every element of ``x`` lies inside the bounds."""
        return jnp.logical_and(jnp.all(x >= self.low), jnp.all(x <= self.high))
