"""The greedy decision every tool takes from a policy's logits, and holding when the policy is unsure.

A trained policy's greedy action is the argmax of its logits. Where the policy ranks two actions
almost alike, the argmax can alternate between them from one epoch to the next: a job flips between
two allocations (A -> B -> A), paying a checkpoint-restart each time for nothing
(``benchmarks/reallocation_patterns.py`` counts the flips and the probability the policy gave each
move). **Holding** is a decision rule for platforms whose restarts cost more than the env's pause:
with ``hold_below = p`` the job keeps its allocation (the keep action, :data:`HOLD_ACTION`, index 4 in
every action set, ``action_sets.py``) whenever the policy's most probable action has probability
below ``p``; at or above it the argmax is taken as usual. ``0`` (the default) is the plain argmax:
every figure and checkpoint of the project is judged with it. A policy's top probability is at least
``1 / num_actions``, so any ``p`` up to that acts as 0, and ``1`` holds every decision (a top
probability that rounds to 1 in float32 included). The rule reads only the logits, so it needs
nothing of the job's state and serves every tool alike: ``LoadedPolicy`` (its ``holding``), which
``live``/``recommend`` and ``evaluate`` follow, and the ``training_seeds`` and
``reallocation_patterns`` benchmarks.
"""

from __future__ import annotations

import contextlib
import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.actions import NO_OP_ACTION

HOLD_ACTION = NO_OP_ACTION  # keep the allocation: the same index in every action set


def check_hold_below(value: float) -> float:
    """``value`` as a float if it is a probability threshold in [0, 1], else ``ValueError``. A
    NumPy or concrete JAX scalar counts as its number (``jnp.float32(0.5)``, as ``LiveJob`` takes)."""
    if isinstance(value, np.ndarray | jax.Array) and np.ndim(value) == 0:
        with contextlib.suppress(
            TypeError, jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError
        ):
            value = np.asarray(value).item()  # a traced one stays an array: refused below
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"hold_below must be a number in [0, 1], got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"hold_below must be in [0, 1], got {value}")
    return value


def greedy_actions(logits: jax.Array, hold_below: float | jax.Array = 0.0) -> jax.Array:
    """The argmax of ``logits`` over its last axis, replaced by :data:`HOLD_ACTION` wherever the
    argmax's softmax probability is below ``hold_below``, and everywhere when ``hold_below`` is 1
    (module docstring); int32, the leading shape."""
    action = jnp.argmax(logits, axis=-1).astype(jnp.int32)
    if not isinstance(hold_below, jax.Array) and hold_below <= 0.0:
        return action  # the plain argmax: the same program as before holding existed
    top = jnp.max(jax.nn.softmax(logits, axis=-1), axis=-1)
    hold = jnp.logical_or(top < hold_below, hold_below >= 1.0)
    return jnp.where(hold, jnp.int32(HOLD_ACTION), action)
